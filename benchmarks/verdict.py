"""Section 1: time to verdict — the test suite, the mutation run, and where the time goes.

- ``pytest -n auto`` (the project's tests, ``ci`` profile): measured with ``--suite`` (a few
  minutes on a loaded 2-core machine); otherwise the last measurement recorded in the
  results file (``--out``) of an earlier run is shown with its date.
- ``attnprops mutants``: read from ``mutation-report/mutation-report.json`` (``--report``) if
  present, never rerun here; the table says where the figures come from and when.
- profile: a few properties run in a fresh process with Hypothesis's observability timings:
  time drawing inputs (Hypothesis generation), in the test bodies (of which the 50-digit oracle,
  the error bounds, the subject), and the rest (Hypothesis's engine, pytest). The same for one
  mutant (the report's slowest to kill), whose run includes Hypothesis's shrink and explain
  phases after the first failure.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from attnprops.benchmarks._harness import REPO
from attnprops.benchmarks._harness import Row

# Oracle-backed, generation-heavy and the slowest non-oracle properties of the ci profile.
PROFILE_TESTS = (
    "test_output_matches_oracle",
    "test_weights_match_oracle",
    "test_bool_mask_equals_additive_mask",
    "test_key_permutation_invariance",
)
SHRINK_MUTANT = "online_softmax_last_partial_block_dropped"


def _mtime(path: Path) -> str:
    return _dt.datetime.fromtimestamp(path.stat().st_mtime).isoformat(timespec="seconds")


def time_project_tests() -> dict:
    """``pytest -n auto`` in the ci profile, timed; the slowest tests from ``--durations``."""
    env = dict(os.environ, HYPOTHESIS_PROFILE="ci", PYTHONDONTWRITEBYTECODE="1")
    env.pop("ATTN_IMPL", None)
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-n",
        "auto",
        "-p",
        "no:cacheprovider",
        "-q",
        "--durations=10",
    ]
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    slowest = re.findall(r"^([\d.]+)s (call|setup|teardown)\s+(\S+)", proc.stdout, flags=re.M)
    summary = [line for line in proc.stdout.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    return {
        "seconds": seconds,
        "returncode": proc.returncode,
        "measured": _dt.datetime.now().isoformat(timespec="seconds"),
        "command": "pytest -n auto -p no:cacheprovider -q (HYPOTHESIS_PROFILE=ci)",
        "summary": summary[-1] if summary else proc.stdout[-300:],
        "slowest": [{"seconds": float(s), "phase": p, "test": t} for s, p, t in slowest],
    }


def _shown(path: Path) -> str:
    """``path`` relative to the repository when it lies inside it."""
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def read_report(path: Path) -> dict | None:
    if not path.exists():
        return None
    report = json.loads(path.read_text())
    killed = [m for m in report.get("mutants", []) if m.get("outcome") == "killed"]
    seconds = [m["seconds"] for m in killed]
    examples = [m["examples_tried"] for m in killed if m.get("examples_tried") is not None]
    slowest = max(killed, key=lambda m: m["seconds"]) if killed else None
    return {
        "path": _shown(path),
        "written": _mtime(path),
        "profile": report.get("profile"),
        "total_s": report.get("seconds"),
        "reference_s": (report.get("reference") or {}).get("seconds"),
        "killed": report.get("killed"),
        "total": report.get("total"),
        "median_kill_s": statistics.median(seconds) if seconds else None,
        "max_kill_s": max(seconds) if seconds else None,
        "median_examples": statistics.median(examples) if examples else None,
        "max_examples": max(examples) if examples else None,
        "slowest_mutant": None if slowest is None else slowest["name"],
        "per_mutant": {
            m["name"]: {
                "seconds": m["seconds"],
                "examples": m.get("examples_tried"),
                "outcome": m.get("outcome"),
            }
            for m in report.get("mutants", [])
        },
    }


def profile(
    subject: str, tests: list[str], maxfail: int = 0, hypothesis_profile: str = "ci"
) -> dict:
    """Run :mod:`benchmarks._suite_profile` in a fresh process; return its summary."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "profile.json"
        command = [
            sys.executable,
            "-m",
            "attnprops.benchmarks._suite_profile",
            "--subject",
            subject,
            "--out",
            str(out),
            f"--maxfail={maxfail}",
            f"--profile={hypothesis_profile}",
            *tests,
        ]
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
        if not out.exists():
            return {"error": proc.stdout[-2000:] + proc.stderr[-2000:]}
        return json.loads(out.read_text())


def _shares(p: dict) -> dict:
    wall = p["wall_s"] or 1.0
    return {
        "generation": p["generation_s"] / wall,
        "bodies": p["execution_s"] / wall,
        "oracle": p["oracle_s"] / wall,
        "bounds": p["bounds_s"] / wall,
        "subject": p["subject_s"] / wall,
        "other": p["other_s"] / wall,
    }


def run(args, previous: dict | None = None) -> tuple[list[Row], dict]:
    rows: list[Row] = []
    details: dict = {}

    # 1. pytest -n auto
    suite = time_project_tests() if args.suite else (previous or {}).get("suite")
    details["suite"] = suite
    if suite is None:
        rows.append(
            Row(
                "1",
                "pytest -n auto (ci profile), whole project",
                None,
                "s",
                target="< 60 s",
                note="not measured: run `python -m attnprops.benchmarks --suite`",
            )
        )
    else:
        where = (
            "measured in this run"
            if args.suite
            else f"recorded {suite['measured']} by `python -m attnprops.benchmarks --suite`"
        )
        ok = suite["returncode"] == 0
        rows.append(
            Row(
                "1",
                "pytest -n auto (ci profile), whole project",
                suite["seconds"],
                "s",
                anchor="target",
                anchor_value=60.0,
                ratio=suite["seconds"] / 60.0,
                ratio_of="of target",
                target="< 60 s",
                met=bool(ok and suite["seconds"] < 60),
                note=f"{where}; {suite['summary'].strip()}" + ("" if ok else " (FAILED)"),
                details={"slowest": suite["slowest"]},
            )
        )

    # 2. attnprops mutants, from its report
    report = read_report(Path(args.report))
    details["mutation_report"] = report
    if report is None:
        rows.append(
            Row(
                "1",
                "attnprops mutants (every mutant)",
                None,
                "s",
                target="< 120 s",
                note=f"no report at {_shown(Path(args.report))}: run `attnprops mutants` first",
            )
        )
    else:
        source = f"read from {report['path']} ({report['written']}), not rerun"
        total = report["total_s"]
        complete = report["reference_s"] is not None
        rows.append(
            Row(
                "1",
                "attnprops mutants (every mutant), wall time",
                total,
                "s",
                anchor="target",
                anchor_value=120.0,
                ratio=total / 120.0,
                ratio_of="of target",
                target="< 120 s",
                met=bool(complete and total < 120 and report["killed"] == report["total"]),
                note=f"{source}; {report['killed']}/{report['total']} killed"
                + ("" if complete else "; partial run (--skip-reference)"),
            )
        )
        rows.append(
            Row(
                "1",
                "median time-to-kill per mutant",
                report["median_kill_s"],
                "s",
                anchor="slowest mutant",
                anchor_value=report["max_kill_s"],
                note=f"slowest: {report['slowest_mutant']}; {source}",
            )
        )
        rows.append(
            Row(
                "1",
                "median examples to kill (generate phase)",
                report["median_examples"],
                "examples",
                anchor="most",
                anchor_value=report["max_examples"],
                note=source,
            )
        )

    # 3. profile of a few properties against impl, and of one mutant (with shrinking)
    tests = list(args.profile_tests or PROFILE_TESTS)
    prof = profile("impl", [] if args.profile_all else tests)
    details["profile_impl"] = prof
    if "error" not in prof:
        s = _shares(prof)
        label = "all properties" if args.profile_all else ", ".join(tests)
        rows.append(
            Row(
                "1",
                f"profile vs impl ({label}): Hypothesis generation share",
                100 * s["generation"],
                "%",
                anchor="run wall time",
                anchor_value=prof["wall_s"],
                anchor_unit="s",
                note=(
                    f"test bodies {100 * s['bodies']:.0f}% (oracle {100 * s['oracle']:.0f}%, "
                    f"bounds {100 * s['bounds']:.0f}%, subject {100 * s['subject']:.0f}%); "
                    f"Hypothesis engine, pytest and imports {100 * s['other']:.0f}%"
                ),
            )
        )
        oracle_calls = prof["calls"].get("oracle", 0)
        per_call = 1e3 * prof["oracle_s"] / max(1, oracle_calls)
        rows.append(
            Row(
                "1",
                "profile vs impl: 50-digit oracle share",
                100 * s["oracle"],
                "%",
                anchor="oracle calls",
                anchor_value=oracle_calls,
                anchor_unit="calls",
                note=f"{per_call:.1f} ms per oracle call",
            )
        )
    mutant = args.shrink_mutant or (report or {}).get("slowest_mutant") or SHRINK_MUTANT
    try:
        from attnprops.mutants import all_mutants

        killed_by = list(all_mutants()[mutant].killed_by)
    except Exception:  # an unknown name: fall back to the default mutant
        mutant = SHRINK_MUTANT
        from attnprops.mutants import all_mutants

        killed_by = list(all_mutants()[mutant].killed_by)
    # as the first pass of `attnprops mutants`: its named properties, no explicit examples
    prof_m = profile(f"mutants.{mutant}", killed_by, maxfail=1, hypothesis_profile="mutation")
    details["profile_mutant"] = prof_m
    if "error" not in prof_m:
        phases = prof_m["phases"]
        shrink = phases.get("shrink", {})
        explain = phases.get("explain", {})
        generate = phases.get("generate", {})
        wall = prof_m["wall_s"] or 1.0
        after = shrink.get("wall_s", 0.0) + explain.get("wall_s", 0.0)
        rows.append(
            Row(
                "1",
                f"profile of mutant {mutant} ({', '.join(killed_by)}): share after the first "
                "failure (shrink + explain phases)",
                100 * after / wall,
                "%",
                anchor="time to verdict",
                anchor_value=wall,
                anchor_unit="s",
                note=(
                    f"shrink {100 * shrink.get('wall_s', 0.0) / wall:.0f}% "
                    f"({shrink.get('cases', 0)} cases), explain "
                    f"{100 * explain.get('wall_s', 0.0) / wall:.0f}% "
                    f"({explain.get('cases', 0)} cases), generate "
                    f"{100 * generate.get('wall_s', 0.0) / wall:.0f}% "
                    f"({generate.get('cases', 0)} cases); in all phases: generation "
                    f"{100 * prof_m['generation_s'] / wall:.0f}%, oracle "
                    f"{100 * prof_m['oracle_s'] / wall:.0f}%"
                ),
            )
        )
    return rows, details
