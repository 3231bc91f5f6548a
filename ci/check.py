"""``attnprops check [--impl MODULE] [--profile NAME] [--seed N] [-k EXPRESSION] [--shard I/N]
[-x | --maxfail N] [--junitxml FILE] [--json FILE]``: run the property suite against a
subject module (default ``attnprops.impl``) with ``-n auto`` and print a short summary.

While it runs, each finished property is printed to standard error as it finishes (a failure
with its first message), with ``[done/total]``; on a terminal a status line names the
properties running now. ``-x``/``--maxfail N`` stop after the first / N-th failing property
(with several workers, properties already running then still finish, so more than N failures
may be listed: pytest-xdist's documented behaviour).
``--jobs N`` runs N workers (``auto``: the CPU count), but no more than the tests that ``-k``
and ``--shard`` select (counted by a collection-only run first).
``-k EXPRESSION`` runs only the matching properties (pytest's ``-k``); ``--shard I/N`` runs
every N-th from the I-th (a CI matrix of N jobs covers the suite once; an empty shard passes,
unless its ``-k`` selects nothing in any shard). ``--seed N`` seeds a
random profile (``dev``, ``thorough``), so that a nightly run can be repeated draw for draw.
``--junitxml FILE`` writes pytest's JUnit XML report (a run that could not start: one error
test case with the reason); ``--json FILE`` writes the summary as
JSON (:func:`summary`: counts, every failure with its counterexample, the skipped properties
with their reasons). Skipped properties are listed by reason.

Exit code 0 when every property passes (skipped properties are listed with their count;
a subject declares what it lacks, see :mod:`properties.subject`), 1 otherwise. Every
distinct counterexample of every failing property is printed, with the subject's line where
it raised. Robustness-tier properties (:data:`properties.options.ROBUSTNESS_REASON`) are
listed apart and do not fail the check unless ``--robustness gate``. The options and their
checks: :mod:`ci.check_arguments`.
"""

from __future__ import annotations

import json
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import asdict
from pathlib import Path

import pytest

from attnprops.ci.check_arguments import add_arguments  # add_arguments: what ci/cli.py reads here  # noqa: F401
from attnprops.ci.check_arguments import check_keyword  # add_arguments: what ci/cli.py reads here
from attnprops.ci.check_arguments import check_seed  # add_arguments: what ci/cli.py reads here
from attnprops.ci.check_arguments import jobs as jobs_of
from attnprops.ci.check_arguments import (  # add_arguments: what ci/cli.py reads here
    validate_profiles,
)
from attnprops.ci.progress import Progress
from attnprops.ci.suite_runner import run_suite
from attnprops.properties.options import ROBUSTNESS_ENV_VAR
from attnprops.properties.options import ROBUSTNESS_MODES
from attnprops.properties.selection import parse_shard
from attnprops.properties.subject_import import is_file_name

NO_TESTS_COLLECTED = int(pytest.ExitCode.NO_TESTS_COLLECTED)  # pytest's exit status 5


def _selected(args, shard: str | None) -> int | None:
    """How many property tests ``-k`` and ``shard`` select (a collection-only run without
    workers; the plugin's ``collected`` event), or None when the collection failed."""
    counts = []
    with tempfile.TemporaryDirectory() as tmp:
        run_suite(
            args.impl.strip(),
            Path(tmp),
            profile=args.profile,
            tag="select",
            keyword=args.keyword,
            shard=shard,
            collect_only=True,
            progress=lambda event: counts.append(event.get("tests")),
        )
    return next((n for n in counts if n is not None), None)


def _workers(args, jobs: int) -> int:
    """``--jobs``, but no more workers than the tests ``-k``/``--shard`` select (each worker
    would start an interpreter and collect the suite for nothing; ``auto`` on a many-core
    machine would start dozens). Without a selection, or when counting fails, ``jobs``."""
    if jobs == 1 or not (args.keyword or args.shard):
        return jobs
    selected = _selected(args, args.shard)
    return jobs if selected is None else max(1, min(jobs, selected))


def run(args) -> int:
    validate_profiles(args.profile)
    if not args.impl.strip():
        raise SystemExit(
            "attnprops check: --impl (or $ATTN_IMPL) is empty; name the subject "
            "module, e.g. --impl attnprops.impl"
        )
    jobs = jobs_of(args.jobs)
    check_seed(args.seed, args.profile)
    if args.robustness not in ROBUSTNESS_MODES:  # argparse checks --robustness, not the variable
        raise SystemExit(
            f"attnprops check: {ROBUSTNESS_ENV_VAR}={args.robustness!r}: use one of "
            f"{', '.join(ROBUSTNESS_MODES)}"
        )
    if args.keyword:
        check_keyword(args.keyword)
    if args.shard:
        try:
            parse_shard(args.shard)
        except ValueError as exc:
            raise SystemExit(f"attnprops check: --shard {exc}") from None
    _check_report_paths(args)  # last: it writes the files (empty) to prove they can be
    jobs = _workers(args, jobs)
    progress = Progress()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            result = run_suite(
                args.impl.strip(),
                Path(tmp),
                jobs=jobs,
                profile=args.profile,
                tag="check",
                robustness=args.robustness,
                progress=progress,
                maxfail=args.maxfail,
                junitxml=args.junitxml,
                keyword=args.keyword,
                shard=args.shard,
                seed=args.seed,
            )
    finally:
        progress.close()
    if args.json_file:
        Path(args.json_file).write_text(
            json.dumps(summary(args, result), indent=1) + "\n", encoding="utf-8"
        )
    examples = sum(result.examples.values())
    seed = "" if args.seed is None else f", seed {args.seed}"
    print(f"attnprops check: subject {args.impl}, profile {args.profile}{seed}")
    robust = len({f.nodeid for f in result.robustness})
    print(
        f"  {result.tests_run} property test{'' if result.tests_run == 1 else 's'} ran "
        f"({result.skipped} skipped, {result.xfailed - robust} expected failures), "
        f"{examples} Hypothesis examples, "
        f"{result.seconds:.1f} s"
    )
    stopped = _stopped_early(args, result)
    if result.returncode == NO_TESTS_COLLECTED:
        chosen = " and ".join(
            f"{flag} {value!r}"
            for flag, value in (("-k", args.keyword), ("--shard", args.shard))
            if value
        )
        print(f"  no property test was selected{' by ' + chosen if chosen else ''}: nothing ran")
        # A shard may be empty (a CI matrix wider than the suite, or than a -k selection); a
        # -k that selects nothing in any shard is a mistake to report.
        if not args.shard:
            return 1
        if args.keyword and not _selected(args, shard=None):
            print(f"  -k {args.keyword!r} selects no property test in any shard")
            return 1
        return 0
    if _could_not_run(args, result):
        print(f"  the suite could not run (pytest exit {result.returncode}):")
        print(result.output_tail)
        if args.junitxml and not Path(args.junitxml).exists():
            _write_error_junit(Path(args.junitxml), result)
        return 1
    for reason, tests in _by_reason(result.skips).items():
        print(f"  skipped ({reason}): {', '.join(tests)}")
    for failure in result.failures:  # every distinct failure of every failing property
        kind = "violated" if failure.is_property_violation else "ERROR"
        print(f"  {kind}: {_name(failure)}: {failure.message}")
        if failure.subject_frame:
            print(f"    in the subject at {failure.subject_frame}")
        if failure.falsifying_example:
            print("    " + failure.falsifying_example.replace("\n", "\n    "))
        if failure.explicit:  # Hypothesis stops at a failing @example: nothing was generated
            print(
                "    (a hand-written @example; --profile mutation skips those and shows a "
                "generated, shrunk counterexample)"
            )
    for failure in result.robustness:
        print(
            f"  robustness (reported, not gated; --robustness gate to gate): {_name(failure)}: "
            f"{failure.message}"
        )
        if failure.falsifying_example:
            print("    " + failure.falsifying_example.replace("\n", "\n    "))
    failed = len({f.nodeid for f in result.failures})  # a parametrized test counts per id
    print(
        f"{result.tests_run - failed} passed, {failed} failed"
        + (f", {robust} robustness-tier not met (reported)" if robust else "")
        + _stop_note(args.maxfail, stopped, failed)
    )
    return 0 if result.returncode == 0 else 1


def _name(failure) -> str:
    """The failing test as collected: its name with its parameters (``test_x[(Tq, Tk)]``)."""
    return failure.nodeid.split("::", 1)[-1] if failure.nodeid else failure.test


def _check_report_paths(args) -> None:
    """Exit with one line, before the run, when ``--json`` or ``--junitxml`` cannot be written,
    both name one file, or one names the subject's file (``--impl ./attn.py``: writing the
    report would destroy it); a stale JUnit file is removed (it must not stand for this
    run)."""
    paths = [
        (flag, path)
        for flag, path in (("--json", args.json_file), ("--junitxml", args.junitxml))
        if path
    ]
    if len(paths) == 2 and Path(paths[0][1]).resolve() == Path(paths[1][1]).resolve():
        raise SystemExit("attnprops check: --json and --junitxml name the same file")
    impl = args.impl.strip()
    subject = Path(impl).expanduser().resolve() if is_file_name(impl) else None
    for flag, path in paths:
        if subject is not None and Path(path).expanduser().resolve() == subject:
            raise SystemExit(
                f"attnprops check: {flag} {path} is the subject file (--impl): the report "
                f"would overwrite it; name another file"
            )
    for flag, path in paths:
        try:
            Path(path).write_text("", encoding="utf-8")
        except OSError as exc:
            raise SystemExit(f"attnprops check: {flag} {path}: {exc.strerror}") from None
    if args.junitxml:
        Path(args.junitxml).unlink()


def _stop_note(maxfail: int | None, stopped: bool, failed: int) -> str:
    """The summary's note on ``-x``/``--maxfail``: empty unless the run stopped at
    ``maxfail`` failing properties. Under pytest-xdist the other workers finish the properties
    they had started, so more may have failed: the note says so (it read "1 passed, 2 failed
    (stopped after 1 failing)")."""
    if not maxfail or not (stopped or failed >= maxfail):
        return ""
    more = failed - maxfail
    tail = f"; {more} more in properties other workers had started" if more > 0 else ""
    return f" (stopped after {maxfail} failing: -x/--maxfail{tail})"


def _stopped_early(args, result) -> bool:
    """-x/--maxfail ended an xdist run (pytest's exit status 2, interrupted) after failures."""
    return bool(args.maxfail) and result.returncode == 2 and bool(result.failures)


def _could_not_run(args, result) -> bool:
    """The suite did not run to a verdict: an exit status other than 0/1 (not an early stop),
    or 1 without a failing property (a collection or usage error)."""
    return (result.returncode not in (0, 1) and not _stopped_early(args, result)) or bool(
        result.returncode and not result.failures
    )


def _write_error_junit(path: Path, result) -> None:
    """The JUnit XML report of a run that could not start (pytest writes none when its
    session never began, e.g. a subject that cannot be imported): one test case,
    ``attnprops.check::suite``, in error with the end of pytest's output, so a CI system
    that reads the report sees the failure and why."""
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="attnprops",
        tests="1",
        errors="1",
        failures="0",
        skipped="0",
        time=f"{result.seconds:.3f}",
    )
    case = ET.SubElement(
        suite, "testcase", classname="attnprops.check", name="suite", time=f"{result.seconds:.3f}"
    )
    error = ET.SubElement(
        case, "error", message=f"the suite could not run (pytest exit {result.returncode})"
    )
    error.text = result.output_tail[-2000:]
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)


def _by_reason(skips: list[tuple[str, str]]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for test, reason in skips:
        grouped.setdefault(reason or "no reason given", []).append(test)
    return grouped


def summary(args, result) -> dict:
    """The ``--json`` report: ``{"schema": 1, "subject", "profile", "seed" (``--seed``, or
    null: a random profile then drew from a seed of its own), "passed" (the exit status is
    0), "returncode" (pytest's), "seconds", "workers" (pytest processes that ran tests:
    ``--jobs``, or fewer when ``-k``/``--shard`` select fewer tests), "tests_run", "failed"
    (test ids, a parametrized property once per id, as pytest counts them), "skipped":
    [{"test", "reason"}], "xfailed" (expected-failures-file entries), "robustness_not_met"
    (robustness-tier properties missed, reported), "examples" (per test), "failures" and
    "robustness": [{"test", "is_property_violation", "message", "falsifying_example",
    "subject_frame", "explicit", "nodeid"}], "error": the end of pytest's output when the
    suite could not run (exit status other than 0 and 1, or 1 without a failure), else
    ""}``."""
    robust = len({f.nodeid for f in result.robustness})
    return {
        "schema": 1,
        "subject": args.impl,
        "profile": args.profile,
        "seed": args.seed,
        "passed": result.returncode == 0,
        "returncode": result.returncode,
        "seconds": round(result.seconds, 3),
        "workers": result.workers,
        "tests_run": result.tests_run,
        "failed": len({f.nodeid for f in result.failures}),
        "skipped": [{"test": t, "reason": r} for t, r in result.skips],
        "xfailed": result.xfailed - robust,
        "robustness_not_met": robust,
        "examples": result.examples,
        "failures": [asdict(f) for f in result.failures],
        "robustness": [asdict(f) for f in result.robustness],
        "error": result.output_tail[-2000:] if _could_not_run(args, result) else "",
    }
