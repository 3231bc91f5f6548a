"""The suite's structured result channel: one JSON object per test, written by the plugin.

``pytest --attn-results FILE`` (what ``attnprops check`` and ``attnprops mutants`` pass)
makes :mod:`properties.plugin` append one line per test to ``FILE`` (JSON Lines; under
pytest-xdist the controller writes the workers' records). Nothing is read back from pytest's
text output. A record (:data:`SCHEMA_VERSION`)::

    {"schema": 1, "nodeid": "properties/test_values.py::test_output_matches_oracle",
     "test": "test_output_matches_oracle",     # the function's name, without [params]
     "outcome": "failed",                     # passed | failed | skipped | xfailed | xpassed
     "when": "call",                          # the phase that decided it: setup | call | teardown
     "reason": "",                            # why skipped / xfailed, else ""
     "examples": 12,                          # inputs the property ran up to its first
                                              #  failure, all when it passed (no shrinking)
     "failures": [                            # one per distinct failure (Hypothesis reports
       {"type": "PropertyViolation",          #  each one of an ExceptionGroup), else []
        "violation": true,                    # an AssertionError: the property failed, not the suite
        "message": "output vs 50-digit oracle: 1 of 4 elements outside the bound; ...",
                                              #  (a crash: "SystemExit: 0", as Python prints it)
        "counterexample": "Falsifying example: test_output_matches_oracle(\\n    case=...,\\n)",
        "explicit": false,                    # the counterexample is a hand-written @example
        "notes": ["case: query (1, 1, 2, 1) ..."],   # Hypothesis note()s of the failing example
        "subject_frame": "/path/my_attention.py:17 in attention"}]}   # deepest frame in the
                                                                       # subject's code, or ""

The records are built in the process that ran the test (from the exception itself: its
``__notes__``, where Hypothesis puts the falsifying example, and its traceback) and travel to
the controller in the report's ``user_properties``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    from builtins import BaseExceptionGroup
else:  # Hypothesis depends on the backport there
    from exceptiongroup import BaseExceptionGroup

SCHEMA_VERSION = 1
PROPERTY_NAME = "attnprops_result"  # the user_properties key that carries a record

_HEADINGS = (
    "Falsifying example",
    "Falsifying explicit example",
    "Failing test case",
    "Failing explicit example",
)


def _leaves(exc: BaseException) -> list[BaseException]:
    """The distinct failures inside ``exc`` (an ExceptionGroup's leaves, else ``exc``)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def _frames(exc: BaseException):
    """``(filename, lineno, function)`` of every traceback frame of ``exc`` and of the
    exceptions it was raised from or during (``__cause__``/``__context__``), outermost
    first, each exception's frames innermost last."""
    seen, chain = set(), []
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    frames = []
    for link in chain:
        tb = link.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            frames.append((code.co_filename, tb.tb_lineno, code.co_name))
            tb = tb.tb_next
    return frames


def subject_frame(exc: BaseException, subject_files: tuple[str, ...]) -> str:
    """``"file:line in function"`` of the innermost frame that lies in the subject's code
    (a file in ``subject_files``, or under one of them when it is a folder), or ``""``."""
    hits = [
        f
        for f in _frames(exc)
        if any(f[0] == p or f[0].startswith(p.rstrip("/") + "/") for p in subject_files)
    ]
    if not hits:
        return ""
    name, line, function = hits[-1]
    return f"{name}:{line} in {function}"


def failure_record(exc: BaseException, subject_files: tuple[str, ...]) -> dict:
    """One entry of a record's ``failures`` for the distinct failure ``exc``."""
    notes = [str(n) for n in getattr(exc, "__notes__", None) or []]
    example, other = [], []
    for n in notes:
        if n.startswith(_HEADINGS) or (example and n.startswith("Draw ")):
            example.append(n)
        else:
            other.append(n)
    violation = isinstance(exc, AssertionError)
    text = str(exc).strip()
    if not violation:  # a crash reads as Python prints it: "SystemExit: 0", not "0"
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return _entry(
        type(exc).__name__,
        violation,
        text or type(exc).__name__,
        "\n".join(example),
        bool(example) and " explicit " in example[0].split("\n", 1)[0],
        other,
        subject_frame(exc, subject_files),
    )


def _entry(
    kind: str,
    violation: bool,
    message: str,
    counterexample: str = "",
    explicit: bool = False,
    notes: list[str] | None = None,
    frame: str = "",
) -> dict:
    """One entry of a record's ``failures`` (the fields of the module docstring)."""
    return {
        "type": kind,
        "violation": violation,
        "message": message,
        "counterexample": counterexample,
        "explicit": explicit,
        "notes": notes or [],
        "subject_frame": frame,
    }


def failures_of(exc: BaseException, subject_files: tuple[str, ...]) -> list[dict]:
    """The ``failures`` of a record: one per distinct failure in ``exc``."""
    return [failure_record(leaf, subject_files) for leaf in _leaves(exc)]


def outcome_of(report) -> str:
    """``passed``/``failed``/``skipped``/``xfailed``/``xpassed`` of a pytest report."""
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed"
    return report.outcome


def record_of(report, failures: list[dict], examples: int = 0) -> dict:
    """The record of a pytest report whose distinct failures are ``failures`` (a failed
    report without an exception of its own gets one crash entry with pytest's text) and
    whose property ran ``examples`` Hypothesis examples."""
    reason = ""
    if hasattr(report, "wasxfail"):
        reason = report.wasxfail
    elif report.skipped and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2]).removeprefix("Skipped: ")
    if report.failed and not failures:
        failures = [_entry("", False, str(report.longrepr)[-2000:])]
    return {
        "schema": SCHEMA_VERSION,
        "nodeid": report.nodeid,
        "test": report.nodeid.rsplit("::", 1)[-1].split("[", 1)[0],
        "outcome": outcome_of(report),
        "when": report.when,
        "reason": reason,
        "examples": examples,
        "failures": failures,
    }


def read_records(path) -> list[dict]:
    """The records of a results file (an absent file: none)."""
    path = Path(path)
    if not path.exists():
        return []
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
