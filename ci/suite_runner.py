"""Run the property suite in a pytest process against one subject and read the result.

Shared by ``attnprops check`` and ``attnprops mutants``. The plugin's results file
(``--attn-results``, one JSON line per test, :mod:`properties.results`) says which properties
failed, each distinct failure with its message, counterexample and the subject's frame, and
how many examples each property ran (counted by the plugin around Hypothesis's inner
test). Nothing is read from pytest's text output. Tests are
selected by their collected function names (``--attn-tests``). A failure counts as a
*property violation* only when it is a :class:`properties.checks.PropertyViolation` or
another ``AssertionError`` raised while the test ran; any other exception (import error,
crash of the suite's own code) is reported as such.

The pytest process runs with ``--assert=plain``: the properties report through
:class:`properties.checks.PropertyViolation` and carry no bare ``assert``, and pytest's
assertion rewriting would otherwise re-compile every module of each plugin's distribution
(all of Hypothesis, about 100 modules) in every process where bytecode is not cached
(``PYTHONDONTWRITEBYTECODE``, read-only site-packages): measured 3.3 s vs 1.8 s to start and
collect the suite, which is most of a quickly killed mutant's time.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Callable

from attnprops.ci.pytest_process import run_pytest
from attnprops.properties.options import FAST_START
from attnprops.properties.options import ROBUSTNESS_REASON
from attnprops.properties.results import read_records
from attnprops.properties.subject_import import is_file_name

REPO = Path(__file__).resolve().parent.parent
SUITE_RUN_INI = Path(__file__).resolve().parent / "suite_run.ini"  # see that file
PROPERTIES = REPO / "properties"


@dataclass(frozen=True)
class PropertyFailure:
    """One distinct failure of a property: its name, whether it failed as a property (not a
    crash), the message, Hypothesis's counterexample and the subject's frame."""

    test: str
    is_property_violation: bool
    message: str
    falsifying_example: str
    subject_frame: str = ""  # "file:line in function" of the subject's code, where known
    explicit: bool = False  # the counterexample is a hand-written @example, not generated
    nodeid: str = ""  # the collected test's node id (properties/test_x.py::test_y[...])


@dataclass
class RunResult:
    """One pytest run against one subject (``tests_run`` excludes skipped and xfailed
    tests; ``xfailed`` are expected failures from an expected-failures file)."""

    subject: str
    returncode: int
    seconds: float
    workers: int = 1  # pytest processes that ran tests (1: no pytest-xdist workers)
    tests_run: int = 0
    skipped: int = 0
    xfailed: int = 0
    failures: list[PropertyFailure] = field(default_factory=list)
    robustness: list[PropertyFailure] = field(default_factory=list)  # reported, not gated
    examples: dict[str, int] = field(default_factory=dict)
    skips: list[tuple[str, str]] = field(default_factory=list)  # (test id, why skipped)
    output_tail: str = ""


def _pytest_args(
    subject: str,
    results: Path,
    tests: list[str] | None,
    jobs: int,
    profile: str,
    maxfail: int | None = None,
    robustness: str = "report",
    progress: Path | None = None,
    junitxml: Path | None = None,
    keyword: str | None = None,
    shard: str | None = None,
    seed: int | None = None,
) -> list[str]:
    """Arguments of ``python -m pytest`` for one run (in the caller's folder: the suite's
    folder is named by its absolute path and is the rootdir, so node ids read
    ``properties/test_x.py::...`` whether attnprops is a clone or installed)."""
    cmd = [
        str(PROPERTIES),
        "-q",
        "-p",
        "no:cacheprovider",
        *FAST_START,
        f"--rootdir={REPO}",
        "-c",
        str(SUITE_RUN_INI),
        f"--ignore={PROPERTIES / 'meta_tests'}",
        "-p",
        "attnprops.properties.plugin",
        f"--attn-impl={subject}",
        f"--attn-results={results}",
        f"--hypothesis-profile={profile}",
        f"--attn-robustness={robustness}",
    ]
    if progress:
        cmd += [f"--attn-progress={progress}"]
    if junitxml:
        cmd += [f"--junitxml={junitxml}"]
    if keyword:
        cmd += [f"-k={keyword}"]
    if shard:
        cmd += [f"--attn-shard={shard}"]
    if seed is not None:
        cmd += [f"--hypothesis-seed={seed}"]
    if tests:  # selected by collected function name, in this order (--maxfail=1: the first decides)
        cmd += ["--attn-tests", ",".join(tests)]
    cmd += ["-p", "no:benchmark"]  # a plugin some environments have; unused here
    cmd += ["-n", str(jobs)] if jobs > 1 else ["-p", "no:xdist"]
    if maxfail:
        cmd += [f"--maxfail={maxfail}"]
    return cmd


def _failures(record: dict) -> list[PropertyFailure]:
    return [
        PropertyFailure(
            test=record["test"],
            is_property_violation=f["violation"] and record["when"] == "call",
            message=f["message"],
            falsifying_example=f["counterexample"],
            subject_frame=f["subject_frame"],
            explicit=f["explicit"],
            nodeid=record["nodeid"],
        )
        for f in record["failures"]
    ]


def _read_results(path: Path) -> dict:
    """:class:`RunResult`'s counts, by field name, from the plugin's results file
    (:mod:`properties.results`; a test may have two records, its call and a failed
    teardown): ``tests_run``, ``skipped``, ``xfailed``, ``failures``, ``robustness``
    (robustness-tier failures, the non-strict xfails of ``--attn-robustness report``, which
    count as xfailed), ``skips`` ((test id without the file, reason) of each skipped test)
    and ``examples`` (per test function)."""
    outcomes: dict[str, set[str]] = {}
    failures, robust, skips = [], [], []
    examples: dict[str, int] = {}
    for record in read_records(path):
        outcomes.setdefault(record["nodeid"], set()).add(record["outcome"])
        if record.get("examples"):
            examples[record["test"]] = examples.get(record["test"], 0) + record["examples"]
        if record["outcome"] == "failed":
            failures += _failures(record)
        elif record["outcome"] == "xfailed" and record["reason"].startswith(ROBUSTNESS_REASON):
            robust += _failures(record)
        elif record["outcome"] == "skipped":
            skips.append((record["nodeid"].split("::", 1)[-1], record["reason"]))
    skipped = sum(seen == {"skipped"} for seen in outcomes.values())
    xfailed = sum(seen == {"xfailed"} for seen in outcomes.values())
    return dict(
        tests_run=len(outcomes) - skipped - xfailed,
        skipped=skipped,
        xfailed=xfailed,
        failures=failures,
        robustness=robust,
        skips=skips,
        examples=examples,
    )


def _follow(path: Path, callback: Callable[[dict], None]) -> Callable[[], None]:
    """A poll function that passes each new complete JSON line of ``path`` to ``callback``."""
    offset = 0

    def poll() -> None:
        nonlocal offset
        if not path.exists():
            return
        with path.open("rb") as stream:
            stream.seek(offset)
            data = stream.read()
        complete = data[: data.rfind(b"\n") + 1]  # a line still being written waits
        offset += len(complete)
        for line in complete.decode("utf-8").splitlines():
            if line.strip():
                callback(json.loads(line))

    return poll


def _user_path() -> str:
    """``$PYTHONPATH`` for the pytest process, which runs in the caller's folder: that folder
    first (a module there imports as with ``python -m``), then the caller's ``$PYTHONPATH``
    entries made absolute. Nothing of attnprops' own folder is put on the path: its packages
    import as ``attnprops.*``, so a caller's own ``ci`` or ``impl`` package stays the one
    found."""
    entries = [os.getcwd()] + [
        os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p
    ]
    return os.pathsep.join(dict.fromkeys(entries))


def run_suite(
    subject: str,
    workdir: Path,
    *,
    tests: list[str] | None = None,
    jobs: int = 1,
    profile: str = "ci",
    tag: str | None = None,
    maxfail: int | None = None,
    robustness: str = "report",
    progress: Callable[[dict], None] | None = None,
    junitxml: Path | None = None,
    keyword: str | None = None,
    shard: str | None = None,
    seed: int | None = None,
    collect_only: bool = False,
) -> RunResult:
    """Run the property suite (or ``tests``) against ``subject`` (a module name, or a file
    relative to the caller's folder) in a pytest process started in the caller's folder;
    parse what failed. ``progress`` is called in this process with each event of the
    plugin's ``--attn-progress`` stream (collected, started, finished: see
    :mod:`properties.plugin`) while the run goes on. ``junitxml``: pytest's JUnit XML
    report, written there. ``keyword``: pytest's ``-k`` expression. ``shard``: ``I/N``, the
    plugin's ``--attn-shard``. ``seed``: Hypothesis's ``--hypothesis-seed``. ``collect_only``:
    pytest's ``--collect-only`` (exit status 0 when a test is selected, 5 when none is)."""
    if is_file_name(subject):
        subject = str(Path(subject).expanduser().resolve())
    workdir.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", tag or subject)
    results = workdir / f"{stem}.jsonl"
    events = workdir / f"{stem}.progress.jsonl" if progress else None
    env = dict(
        os.environ,
        HYPOTHESIS_PROFILE=profile,
        ATTN_IMPL=subject,
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONPATH=_user_path(),
    )
    started = time.perf_counter()
    args = _pytest_args(
        subject,
        results,
        tests,
        jobs,
        profile,
        maxfail,
        robustness,
        events,
        junitxml and Path(junitxml).resolve(),
        keyword,
        shard,
        seed,
    ) + (["--collect-only"] if collect_only else [])
    run = run_pytest(
        args, cwd=Path.cwd(), env=env, poll=_follow(events, progress) if progress else None
    )
    seconds = time.perf_counter() - started
    return RunResult(
        subject=subject,
        returncode=run.returncode,
        seconds=seconds,
        workers=max(1, jobs),
        output_tail=run.output[-3000:],
        **_read_results(results),
    )
