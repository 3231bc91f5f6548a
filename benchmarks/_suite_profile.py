"""Where a property-suite run spends its time (run in a fresh process by :mod:`benchmarks.verdict`).

``python -m attnprops.benchmarks._suite_profile --subject impl --out FILE [--maxfail N] [TEST_NAME ...]``
runs the property suite (or only the named properties, in that order, as the mutation runner
does) in this process, single-threaded, in the ``--profile`` Hypothesis profile (default
``ci``; the mutation runner's first pass uses ``mutation``), and writes a JSON summary:

- per Hypothesis phase (explicit examples, reuse, generate, shrink): test cases, seconds spent
  drawing inputs (Hypothesis generation, from its observability timings), running the test
  body, and the phase's wall time (first case's start to last case's end, per property);
- inside the test bodies: seconds in the 50-digit oracle (``oracle.attention_parts``), in the
  error bounds (``properties.bounds.attention_bounds``) and in the subject's calls;
- the rest of the wall time: Hypothesis's engine, pytest, collection, imports.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _timed(owner, name: str, label: str, totals: dict, calls: dict) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            totals[label] += time.perf_counter() - started
            calls[label] += 1

    setattr(owner, name, wrapper)


class _NullPrinter:
    """Stands in for Hypothesis's RepresentationPrinter while profiling: with observability on,
    Hypothesis pretty-prints every example's arguments (NumPy arrays), which would add a third
    to the run's time. Falsifying examples are then not printed; only timings matter here."""

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        return lambda *args, **kwargs: None

    def getvalue(self) -> str:
        return "Falsifying example: (not printed while profiling)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnprops.benchmarks._suite_profile")
    parser.add_argument("--subject", default="impl")
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--out", required=True)
    parser.add_argument(
        "--maxfail",
        type=int,
        default=0,
        help="stop after this many failing properties (0: never), as the "
        "mutation runner stops at the first kill",
    )
    parser.add_argument("tests", nargs="*", help="property names, run in this order (default: all)")
    args = parser.parse_args(argv)
    os.environ["ATTN_IMPL"] = args.subject
    os.environ["HYPOTHESIS_PROFILE"] = args.profile
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"

    import hypothesis.core
    import pytest
    from hypothesis.internal import observability

    from attnprops import oracle
    from attnprops.properties import _support as support
    from attnprops.properties.subject import Subject

    observability.OBSERVABILITY_COLLECT_COVERAGE = False  # no tracing: it would slow the run
    hypothesis.core.RepresentationPrinter = _NullPrinter
    totals: dict = defaultdict(float)
    calls: dict = defaultdict(int)
    _timed(oracle, "attention_parts", "oracle", totals, calls)
    _timed(support, "attention_bounds", "bounds", totals, calls)
    _timed(Subject, "attention", "subject", totals, calls)
    _timed(Subject, "attention_weights", "subject", totals, calls)

    phases: dict = defaultdict(
        lambda: {"cases": 0, "generate_s": 0.0, "execute_s": 0.0, "spans": {}}
    )
    per_test: dict = defaultdict(lambda: {"cases": 0, "generate_s": 0.0, "execute_s": 0.0})

    def observe(observation) -> None:
        if getattr(observation, "type", None) != "test_case":
            return
        timing = observation.timing or {}
        generate = sum(v for k, v in timing.items() if k.startswith("generate:"))
        execute = timing.get("execute:test", 0.0)
        phase = getattr(observation.metadata, "phase", None) or "other"
        for bucket in (phases[phase], per_test[observation.property]):
            bucket["cases"] += 1
            bucket["generate_s"] += generate
            bucket["execute_s"] += execute
        # wall-clock span of the phase per property: first case start to last case end (an
        # observation is delivered as its test case ends)
        now = time.perf_counter()
        span = phases[phase]["spans"].setdefault(observation.property, [now, now])
        span[0] = min(span[0], now - generate - execute)
        span[1] = max(span[1], now)

    observability.add_observability_callback(observe)
    from attnprops.properties.options import FAST_START

    selection = ["--attn-tests", ",".join(args.tests)] if args.tests else []
    command = [
        str(REPO / "properties"),
        *selection,
        "-q",
        "-p",
        "no:cacheprovider",
        *FAST_START,
        "-p",
        "no:xdist",
        "-o",
        "addopts=",
        "-p",
        "attnprops.properties.plugin",
        "--attn-impl",
        args.subject,
        f"--hypothesis-profile={args.profile}",
        f"--ignore={REPO / 'properties' / 'meta_tests'}",
        "-W",
        "ignore::pytest.PytestUnknownMarkWarning",
    ]
    if args.maxfail:
        command.append(f"--maxfail={args.maxfail}")
    started = time.perf_counter()
    returncode = int(pytest.main(command))
    wall = time.perf_counter() - started
    observability.remove_observability_callback(observe)

    generate = sum(p["generate_s"] for p in phases.values())
    execute = sum(p["execute_s"] for p in phases.values())
    summary = {
        "subject": args.subject,
        "profile": args.profile,
        "tests": args.tests or "all properties",
        "returncode": returncode,
        "wall_s": wall,
        "generation_s": generate,
        "execution_s": execute,
        "oracle_s": totals["oracle"],
        "bounds_s": totals["bounds"],
        "subject_s": totals["subject"],
        "calls": dict(calls),
        "other_s": max(0.0, wall - generate - execute),
        "phases": {
            k: {
                **{n: x for n, x in v.items() if n != "spans"},
                "wall_s": sum(b - a for a, b in v["spans"].values()),
            }
            for k, v in phases.items()
        },
        "per_test": {
            k: dict(v) for k, v in sorted(per_test.items(), key=lambda kv: -kv[1]["execute_s"])
        },
    }
    Path(args.out).write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
