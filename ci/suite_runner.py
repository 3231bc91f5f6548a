"""Run the property suite in a pytest process against one subject and read the result.

Shared by ``attnprops check`` and ``attnprops mutants``. The run's JUnit XML says which
properties failed and how; ``--hypothesis-show-statistics`` says how many examples ran.
A failure counts as a *property violation* only when it is a
:class:`properties.checks.PropertyViolation` or another ``AssertionError``; any other
exception (import error, crash of the suite's own code) is reported as such.

The subprocess runs with ``--assert=plain``: the properties report through
:class:`properties.checks.PropertyViolation` and carry no bare ``assert``, and pytest's
assertion rewriting would otherwise re-compile every module of each plugin's distribution
(all of Hypothesis, about 100 modules) in every process where bytecode is not cached
(``PYTHONDONTWRITEBYTECODE``, read-only site-packages): measured 3.3 s vs 1.8 s to start and
collect the suite, which is most of a quickly killed mutant's time.
"""

from __future__ import annotations

import os
import re
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from properties.plugin import FAST_START

from .pytest_process import run_pytest

REPO = Path(__file__).resolve().parent.parent
PROPERTIES = REPO / "properties"


@dataclass(frozen=True)
class PropertyFailure:
    """One failing property: its name, whether it failed as a property (not a crash), the
    first line of the failure and Hypothesis's falsifying example."""

    test: str
    is_property_violation: bool
    message: str
    falsifying_example: str


@dataclass
class RunResult:
    """One pytest run against one subject (``tests_run`` excludes skipped and xfailed
    tests; ``xfailed`` are expected failures from an expected-failures file)."""

    subject: str
    returncode: int
    seconds: float
    tests_run: int = 0
    skipped: int = 0
    xfailed: int = 0
    failures: list[PropertyFailure] = field(default_factory=list)
    examples: dict[str, int] = field(default_factory=dict)
    output_tail: str = ""


def node_ids(tests: list[str]) -> list[str]:
    """pytest node ids (``file::name``) of the property tests named, in the order given (pytest
    runs them in that order, so with ``--maxfail=1`` the first named property decides)."""
    ids = []
    for name in tests:
        files = [p for p in sorted(PROPERTIES.glob("test_*.py"))
                 if f"def {name}(" in p.read_text(encoding="utf-8")]
        if not files:
            raise ValueError(f"no property test named {name!r} in {PROPERTIES}")
        ids += [f"{path}::{name}" for path in files]
    return ids


def _pytest_args(subject: str, junit: Path, tests: list[str] | None, jobs: int,
                 profile: str, maxfail: int | None = None) -> list[str]:
    """Arguments of ``python -m pytest`` for one run."""
    targets = [str(PROPERTIES)] if not tests else node_ids(tests)
    cmd = [
        *targets, "-q", "-p", "no:cacheprovider", *FAST_START,
        f"--ignore={PROPERTIES / 'meta_tests'}",
        "-o", "addopts=", "-p", "properties.plugin", "--attn-impl", subject,
        f"--junitxml={junit}", "--hypothesis-show-statistics", f"--hypothesis-profile={profile}",
        "-o", "junit_family=xunit2",
    ]
    cmd += ["-p", "no:benchmark"]  # a plugin some environments have; unused here
    cmd += ["-n", str(jobs)] if jobs > 1 else ["-p", "no:xdist"]
    if maxfail:
        cmd += [f"--maxfail={maxfail}"]
    return cmd


# Hypothesis's heading of a counterexample: "Falsifying example: test(" (6.155, the pinned
# release), "Failing test case: test(" (6.170); an explicit @example's says "explicit example".
_FALSIFYING = re.compile(
    r"(?:Falsifying|Failing) (?:explicit example|example|test case): .*?\n *\)", re.S)


def is_explicit_example(example: str) -> bool:
    """True when ``example`` (as returned by :func:`_falsifying_example`) is a hand-written
    ``@example`` case, not a generated (and shrunk) one."""
    return "explicit example" in example.split("\n", 1)[0]


def _falsifying_example(text: str) -> str:
    """Hypothesis's ``Falsifying example: test(...)`` block and its ``Draw N`` lines, with
    pytest's ``E`` prefixes and the block's indentation (deeper when the failure was raised
    in a nested call) removed."""
    lines = [line[1:] if line.startswith("E") else line for line in text.splitlines()]
    heads = [line for line in lines if re.match(r" *(?:Falsifying|Failing) ", line)]
    indent = len(heads[0]) - len(heads[0].lstrip()) if heads else 0
    text = "\n".join(line[indent:] if line[:indent].isspace() else line.lstrip()
                     for line in lines)
    match = _FALSIFYING.search(text)
    if not match:
        return ""
    # st.data() draws: "Draw N (label): value", a value's repr continuing on indented lines
    draws, current = [], None
    for line in text[match.end():].splitlines():
        if re.match(r"Draw \d+", line):
            current = [line]
            draws.append(current)
        elif current is not None and (not line.strip() or line[:1].isspace()):
            if line.strip():
                current.append(line)
        else:
            current = None
    return "\n".join([match.group(0).strip()] + ["\n".join(d) for d in draws])


def _violation_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip().removeprefix("E").strip()
        if "PropertyViolation:" in line:
            return line.split("PropertyViolation:", 1)[1].strip()
    for line in text.splitlines():
        if line.startswith("E "):
            return line[1:].strip()
    return text.strip().splitlines()[0] if text.strip() else ""


def _parse_junit(path: Path) -> tuple[int, int, int, list[PropertyFailure]]:
    """(tests run, skipped, xfailed, failures) from a pytest JUnit XML file."""
    if not path.exists():
        return 0, 0, 0, []
    root = ET.parse(path).getroot()
    failures, count, skipped, xfailed = [], 0, 0, 0
    for case in root.iter("testcase"):
        count += 1
        for tag in ("failure", "error"):
            node = case.find(tag)
            if node is None:
                continue
            text = (node.get("message") or "") + "\n" + (node.text or "")
            violation = tag == "failure" and (
                "PropertyViolation" in text or "AssertionError" in text)
            failures.append(PropertyFailure(
                test=case.get("name", "?").split("[")[0],
                is_property_violation=violation,
                message=_violation_line(text)[:400],
                falsifying_example=_falsifying_example(node.text or "")[:4000],
            ))
        node = case.find("skipped")
        if node is not None:
            count -= 1
            if node.get("type") == "pytest.xfail":
                xfailed += 1
            else:
                skipped += 1
    return count, skipped, xfailed, failures


_STATS_TEST = re.compile(r"^\S*::(test_\w+).*:$")
# "3 passing examples, 6 failing examples" (6.155); "3 passing, 6 failing, and 1 invalid test
# cases" (6.170)
_STATS_GENERATE = re.compile(r"(\d+) passing(?: examples?)?, (\d+) failing")


def _parse_statistics(output: str) -> dict[str, int]:
    """Examples Hypothesis tried per test (reuse + generate phases; shrinking excluded)."""
    examples: dict[str, int] = {}
    current = None
    phase = None
    for line in output.splitlines():
        head = _STATS_TEST.match(line.strip())
        if head:
            current = head.group(1)
            continue
        if "during " in line:
            phase = "shrink" if "shrink" in line else "other"
        m = _STATS_GENERATE.search(line)
        if m and current and phase != "shrink":
            examples[current] = examples.get(current, 0) + int(m.group(1)) + int(m.group(2))
    return examples


def run_suite(subject: str, workdir: Path, *, tests: list[str] | None = None, jobs: int = 1,
              profile: str = "ci", tag: str | None = None,
              maxfail: int | None = None) -> RunResult:
    """Run the property suite (or ``tests``) against ``subject``; parse what failed."""
    workdir.mkdir(parents=True, exist_ok=True)
    junit = workdir / f"{tag or subject}.xml"
    env = dict(os.environ, HYPOTHESIS_PROFILE=profile, ATTN_IMPL=subject,
               PYTHONDONTWRITEBYTECODE="1")
    started = time.perf_counter()
    run = run_pytest(_pytest_args(subject, junit, tests, jobs, profile, maxfail), cwd=REPO,
                     env=env)
    seconds = time.perf_counter() - started
    count, skipped, xfailed, failures = _parse_junit(junit)
    return RunResult(subject=subject, returncode=run.returncode, seconds=seconds,
                     tests_run=count, skipped=skipped, xfailed=xfailed, failures=failures,
                     examples=_parse_statistics(run.output), output_tail=run.output[-3000:])


