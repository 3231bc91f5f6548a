"""``attnprops mutants`` (also ``python -m attnprops.ci.mutation_report``): the mutation-kill runner.

Phases, in order (as mutation tools do):

1. **reference** — the properties that judge the mutants run (the union of their
   ``killed_by``: a kill is a failure of one of them, nothing else counts) against ``impl``
   and must pass; a property that fails the reference kills nothing meaningful. The whole
   suite's run against ``impl`` is the README's test command's; repeating it here cost about
   a third of this command's time.
2. **harness** — a deliberately wrong subject (:mod:`ci.broken_subject`) must be reported as
   failing, so the harness can see failures at all.
3. **mutants** — each mutant of :mod:`mutants` runs the properties named in its
   ``Mutant.killed_by`` (in parallel across cores, one pytest process per mutant). It is
   *killed* when one of them fails with a :class:`properties.checks.PropertyViolation` (an
   ``AssertionError``): a wrong value, or a missing or wrong error. A failure by any other
   exception (an import error, a crash in the suite) is an *error*, not a kill.

   Passes per mutant, each only if the one before did not kill it:

   a. the named properties under ``--mutant-profile`` (default ``mutation``: the ``ci``
      profile without the explicit ``@example`` cases), so a kill comes with Hypothesis's
      *shrunk* counterexample, the minimal input that exposes the fault;
   b. the named properties under ``--profile`` (``ci``: explicit examples on, among them
      the source documents' cases); a kill here is marked "explicit example only";
   c. the whole suite under ``--profile``: a failure elsewhere is *wrong reason* (not a
      kill), no failure is *survived*.

   Each pass stops at the first failing property (its shrinking is the expensive part);
   ``--full`` runs the whole suite for every mutant instead, to list every property each one
   fails.

For each mutant the report gives its one-line description, the outcome, the properties that
failed, the wall time and the examples Hypothesis tried (:data:`ci.mutation_results.EXAMPLES_NOTE`), and the first
failing property's shrunk falsifying example (Hypothesis's minimal input) as a Python script
that runs the property's body on exactly that input (:func:`reproduction`), with the ``pytest``
command that re-runs the property as the runner did (:func:`rerun_command`). Outputs in
``--out`` (default ``mutation-report/``):
``mutation-report.md`` (also appended to ``$GITHUB_STEP_SUMMARY`` when set),
``mutation-report.json`` (schema version :data:`SCHEMA_VERSION`) and ``mutation-report.xml``
(JUnit). Prints ``mutation score: K/N killed``; exits 1 if the reference fails, the harness
sees no failure, any mutant is not killed, or a kill has no generated, shrunk counterexample
(killed by an explicit example only, or no counterexample recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from attnprops.ci.check_arguments import validate_profiles
from attnprops.ci.mutation_results import MutantResult
from attnprops.ci.mutation_results import Outcome
from attnprops.ci.mutation_results import console_table
from attnprops.ci.mutation_results import json_row
from attnprops.ci.mutation_results import junit
from attnprops.ci.mutation_results import markdown_report
from attnprops.ci.mutation_results import verdict
from attnprops.ci.pytest_process import SIGNAL_MARK
from attnprops.ci.pytest_process import STATUS_LOST
from attnprops.ci.suite_runner import PropertyFailure
from attnprops.ci.suite_runner import RunResult
from attnprops.ci.suite_runner import run_suite
from attnprops.properties.selection import parse_shard
from attnprops.properties.selection import shard_of
from attnprops.properties.threads import one_thread_per_process

SCHEMA_VERSION = 3  # 2: mutant_profile; per mutant profile and shrunk; 3: per mutant nodeid,
#                     reproduction, reproduction_exact and rerun_command
REFERENCE_SUBJECT = "attnprops.impl"
BROKEN_SUBJECT = "attnprops.ci.broken_subject"


def _classify(run: RunResult, expected: set[str]) -> tuple[Outcome, list[PropertyFailure]]:
    # A lost status (one the child could not write down either: ci.pytest_process) says
    # nothing; a property violation the run recorded still kills (what came after it cannot
    # undo it), but without one there is no verdict.
    lost = run.returncode == STATUS_LOST
    if run.returncode not in (0, 1) and not (
        lost and any(f.is_property_violation for f in run.failures)
    ):  # usage error, internal error, no tests collected, a status lost before any violation
        return Outcome.ERROR, run.failures
    # expected properties first, and among them those with a shrunk falsifying example
    violations = sorted(
        (f for f in run.failures if f.is_property_violation),
        key=lambda f: (f.test not in expected, not f.falsifying_example),
    )
    if violations and violations[0].test in expected:
        return Outcome.KILLED, violations
    if violations:
        return Outcome.WRONG_REASON, violations
    if run.failures:
        return Outcome.ERROR, run.failures
    return Outcome.SURVIVED, []


# Lines of pytest's output that say why a run could not finish, in the order shown: the
# signal that ended the process (ci.pytest_process), a fatal Python error, an internal error,
# an error line.
TELLING = (SIGNAL_MARK, "Fatal Python error", "INTERNALERROR>", "E   ")


def _telling(output: str) -> str:
    """What ``output`` says went wrong: the last line of each :data:`TELLING` kind there is,
    joined by `` | ``; else its last non-blank line."""
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    picked = []
    for kind in TELLING:  # each at the start of its line
        found = [line for line in lines if line.startswith(kind)]
        if found:
            picked.append(" ".join(found[-1].split()))
    return " | ".join(picked) or (lines[-1].strip() if lines else "")


def _message(outcome: Outcome, run: RunResult, first: PropertyFailure | None) -> str:
    """The report's message for a mutant: the first failure's; for an error, pytest's exit
    status and, when no test failed, what the end of its output says went wrong
    (:func:`_telling`: a signal that ended the run shows as exit 3, its name on the line), so
    that a crash that does not come back on a rerun still says what it was."""
    if outcome is not Outcome.ERROR:
        return first.message if first else ""
    why = first.message if first else _telling(run.output_tail)
    return f"pytest exit {run.returncode}" + (f": {why}" if why else "")


def run_mutant(
    name: str,
    workdir: Path,
    *,
    profile: str = "ci",
    mutant_profile: str = "mutation",
    full: bool = False,
) -> MutantResult:
    """Run the suite against ``mutants.<name>`` and decide killed / survived / error, in the
    passes described in the module docstring (``full``: one run of the whole suite under
    ``profile``)."""
    from attnprops.mutants import all_mutants

    mutant = all_mutants()[name]
    expected = set(mutant.killed_by)
    subject = f"attnprops.mutants.{name}"
    started = time.perf_counter()
    if full:
        passes = [(profile, None, None, name)]
    else:
        passes = [(mutant_profile, list(mutant.killed_by), 1, name)]
        if profile != mutant_profile:
            passes.append((profile, list(mutant.killed_by), 1, f"{name}-{profile}"))
        passes.append((profile, None, None, f"{name}-full"))
    for used, tests, maxfail, tag in passes:
        run = run_suite(
            subject, workdir, tests=tests, profile=used, tag=tag, maxfail=maxfail, robustness="gate"
        )
        outcome, failures = _classify(run, expected)
        if outcome is not Outcome.SURVIVED:
            break
    first = failures[0] if failures else None
    return MutantResult(
        name=name,
        description=mutant.description,
        killed_by=tuple(mutant.killed_by),
        outcome=outcome,
        failed_properties=sorted({f.test for f in failures}),
        falsifying_example=first.falsifying_example if first else "",
        message=_message(outcome, run, first),
        seconds=round(time.perf_counter() - started, 2),
        examples_tried=run.examples.get(first.test) if first else None,
        profile=used,
        shrunk=bool(first and first.falsifying_example and not first.explicit),
        nodeid=first.nodeid if first else "",
    )


def select(names: list[str], only: list[str] | None, shard: str | None) -> list[str]:
    """Apply ``--only`` then ``--shard i/N`` (1-based) to the sorted mutant names."""
    if only:
        unknown = sorted(set(only) - set(names))
        if unknown:
            raise SystemExit(f"--only: unknown mutants {unknown}; known: {names}")
        names = [n for n in names if n in only]
    if shard:
        try:
            index, count = parse_shard(shard)
        except ValueError as exc:
            raise SystemExit(f"--shard {exc}") from None
        names = shard_of(names, index, count)
    return names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="mutation-report", help="output folder")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these mutants")
    parser.add_argument("--shard", metavar="I/N", help="run shard I of N (1-based)")
    parser.add_argument(
        "--profile",
        default=os.environ.get("HYPOTHESIS_PROFILE", "ci"),
        help="Hypothesis profile (default: $HYPOTHESIS_PROFILE or ci)",
    )
    parser.add_argument(
        "--mutant-profile",
        default=None,
        help="profile of each mutant's first pass (default: mutation, which is "
        "ci without explicit examples, when --profile is ci; else "
        "--profile)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="mutants run in parallel (default: CPU count)",
    )
    parser.add_argument(
        "--full", action="store_true", help="run every property against every mutant"
    )
    parser.add_argument(
        "--skip-reference",
        action="store_true",
        help="do not run the suite against impl first (for shards after one that did)",
    )


def run(args) -> int:
    from attnprops.mutants import all_mutants

    started = time.perf_counter()
    mutant_profile = args.mutant_profile or ("mutation" if args.profile == "ci" else args.profile)
    validate_profiles(args.profile, mutant_profile)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise SystemExit(f"attnprops mutants: --out {out} exists and is not a folder")
    work = out / "runs"
    for stale in work.glob("*.jsonl"):  # one results file per run; none left from an earlier one
        stale.unlink()
    mutants = all_mutants()
    names = select(sorted(mutants), args.only, args.shard)
    one_thread_per_process(workers=args.jobs)  # the pool runs --jobs pytest processes at once
    reference = harness = None
    if not args.skip_reference:
        judges = sorted({test for n in names for test in mutants[n].killed_by})
        reference = run_suite(
            REFERENCE_SUBJECT,
            work,
            tests=judges,
            jobs=args.jobs,
            profile=args.profile,
            robustness="gate",
        )
        print(
            f"reference impl: {'passed' if reference.returncode == 0 else 'FAILED'} "
            f"({reference.tests_run} properties, {reference.seconds:.1f} s)",
            flush=True,
        )
        harness = run_suite(
            BROKEN_SUBJECT, work, tests=["test_output_matches_oracle"], profile=args.profile
        )
        print(
            f"harness check: {'failures seen' if harness.failures else 'NO FAILURE SEEN'}",
            flush=True,
        )
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(
            pool.map(
                lambda n: run_mutant(
                    n, work, profile=args.profile, mutant_profile=mutant_profile, full=args.full
                ),
                names,
            )
        )
    for line in console_table(results):
        print(line, flush=True)
    seconds = time.perf_counter() - started
    markdown = markdown_report(reference, harness, results, args.profile, seconds)
    out.mkdir(parents=True, exist_ok=True)
    (out / "mutation-report.md").write_text(markdown)
    report = {
        "schema_version": SCHEMA_VERSION,
        "profile": args.profile,
        "mutant_profile": mutant_profile,
        "seconds": round(seconds, 2),
        "reference": None
        if reference is None
        else {
            "passed": reference.returncode == 0,
            "tests_run": reference.tests_run,
            "seconds": round(reference.seconds, 2),
            "failures": [asdict(f) for f in reference.failures],
        },
        "harness_sees_failures": None if harness is None else bool(harness.failures),
        "mutants": [json_row(r) for r in results],
        "killed": sum(r.outcome is Outcome.KILLED for r in results),
        "total": len(results),
    }
    (out / "mutation-report.json").write_text(json.dumps(report, indent=2))
    junit(results, out / "mutation-report.xml")
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a") as fh:
            fh.write(markdown)
    print(markdown)
    print(f"mutation score: {report['killed']}/{len(results)} killed")
    problems = verdict(results, reference, harness)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="attnprops mutants", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
