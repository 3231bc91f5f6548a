"""``attnprops check [--impl MODULE] [--profile NAME]``: run the property suite against a
subject module (default ``impl``) with ``-n auto`` and print a short summary.

Exit code 0 when every property passes (skipped properties are listed with their count;
a subject declares what it lacks, see :mod:`properties.subject`), 1 otherwise. Every
distinct counterexample of every failing property is printed, with the subject's line where
it raised. Robustness-tier properties (:data:`properties.plugin.ROBUSTNESS_REASON`) are
listed apart and do not fail the check unless ``--robustness gate``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from attnprops.properties.plugin import ROBUSTNESS_ENV_VAR, ROBUSTNESS_MODES
from attnprops.properties.profiles import PROFILES

from attnprops.ci.suite_runner import run_suite


def add_arguments(parser) -> None:
    parser.add_argument("--impl", default=os.environ.get("ATTN_IMPL", "attnprops.impl"), metavar="MODULE",
                        help="subject: a module importable from the current folder or "
                             "PYTHONPATH, or a .py file (default: $ATTN_IMPL or impl)")
    parser.add_argument("--profile", default=os.environ.get("HYPOTHESIS_PROFILE", "ci"),
                        help=f"Hypothesis profile, one of {', '.join(PROFILES)} (default: "
                             "$HYPOTHESIS_PROFILE or ci)")
    parser.add_argument("--jobs", default="auto", help="pytest-xdist workers (default auto)")
    parser.add_argument("--robustness", choices=ROBUSTNESS_MODES,
                        default=os.environ.get(ROBUSTNESS_ENV_VAR) or "report",
                        help="robustness-tier properties: 'report' them without failing the "
                             "check (default, or $ATTN_ROBUSTNESS) or 'gate' on them")


def _jobs(text: str) -> int:
    """``--jobs``: ``auto`` (the CPU count) or a positive integer; else a one-line exit."""
    if text == "auto":
        return os.cpu_count() or 1
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise SystemExit(f"attnprops check: --jobs {text!r}: use auto or a positive integer")
    return jobs


def validate_profiles(*names: str) -> None:
    """Exit with a one-line message naming a profile that :mod:`properties.profiles` lacks
    (checked before any pytest run, which would otherwise fail with a traceback)."""
    for name in names:
        if name not in PROFILES:
            raise SystemExit(f"attnprops: Hypothesis profile {name!r} is unknown; use one of "
                             f"{', '.join(PROFILES)} (see --help)")


def run(args) -> int:
    validate_profiles(args.profile)
    if not args.impl.strip():
        raise SystemExit("attnprops check: --impl (or $ATTN_IMPL) is empty; name the subject "
                         "module, e.g. --impl impl")
    jobs = _jobs(args.jobs)
    with tempfile.TemporaryDirectory() as tmp:
        result = run_suite(args.impl.strip(), Path(tmp), jobs=jobs, profile=args.profile,
                           tag="check", robustness=args.robustness)
    examples = sum(result.examples.values())
    print(f"attnprops check: subject {args.impl}, profile {args.profile}")
    print(f"  {result.tests_run} property tests ran ({result.skipped} skipped, "
          f"{result.xfailed} expected failures), {examples} Hypothesis examples, "
          f"{result.seconds:.1f} s")
    if result.returncode not in (0, 1) or (result.returncode and not result.failures):
        print(f"  the suite could not run (pytest exit {result.returncode}):")
        print(result.output_tail)
        return 1
    for failure in result.failures:  # every distinct failure of every failing property
        kind = "violated" if failure.is_property_violation else "ERROR"
        print(f"  {kind}: {failure.test}: {failure.message}")
        if failure.subject_frame:
            print(f"    in the subject at {failure.subject_frame}")
        if failure.falsifying_example:
            print("    " + failure.falsifying_example.replace("\n", "\n    "))
    for failure in result.robustness:
        print(f"  robustness (reported, not gated; --robustness gate to gate): {failure.test}: "
              f"{failure.message}")
        if failure.falsifying_example:
            print("    " + failure.falsifying_example.replace("\n", "\n    "))
    failed = len({f.test for f in result.failures})
    robust = len({f.test for f in result.robustness})
    print(f"{result.tests_run - failed} passed, {failed} failed"
          + (f", {robust} robustness-tier not met (reported)" if robust else ""))
    return 0 if result.returncode == 0 else 1
