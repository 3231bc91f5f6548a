"""Expected-failures files: a subject's known deviations, by test id.

``--attn-xfail FILE`` (or ``ATTN_XFAIL``, ``os.pathsep``-separated) and a subject module's
``ATTNPROPS_EXPECTED_FAILURES = "relative/path.txt"`` (relative to the module's folder) name
them (:func:`xfail_files`); :func:`read_expected_failures` gives the format. Each listed test
is marked ``xfail(strict=True, raises=AssertionError)`` with the file's reason
(:func:`mark_expected_failures`): it must fail, as a property violation, or the run fails (a
fixed deviation must be removed from the file). Strict under the derandomized profiles
(``ci``, ``mutation``), whose draws, and so the listed failures, are the same every run;
under the random ones (``dev``, ``thorough``) a listed test whose draws miss the deviation
is reported as XPASS, not failed (the files list what the ``ci`` profile finds with the
pinned Hypothesis release, ``ci/constraints.txt``: another release draws other examples; a
random run meets the same deviation on other properties, which fail as usual). An id that
matches no collected test is a collection error, so the file cannot rot silently. The
plugin (:mod:`properties.plugin`) reads the files at configuration and marks the tests at
collection.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from attnprops.properties import results

__all__ = [
    "XFAIL_ATTRIBUTE",
    "XFAIL_ENV_VAR",
    "XFAIL_RAISES",
    "ExpectedFailure",
    "item_id",
    "mark_expected_failures",
    "read_expected_failures",
    "xfail_files",
]

XFAIL_ENV_VAR = "ATTN_XFAIL"
XFAIL_ATTRIBUTE = "ATTNPROPS_EXPECTED_FAILURES"
XFAIL_RAISES = (AssertionError, results.BaseExceptionGroup)  # Hypothesis's distinct failures


@dataclass(frozen=True)
class ExpectedFailure:
    """One line of an expected-failures file: a test id, why it fails, where it was read."""

    test_id: str
    reason: str
    file: str
    line: int

    def matches(self, nodeid: str) -> bool:
        """Whether the collected test ``nodeid`` is this entry.

        An id without ``[params]`` matches every parametrization; ids are compared as path
        suffixes, so ``properties/test_values.py::test_x`` also matches the vendored
        ``tests/properties/test_values.py::test_x`` (the plugin passes ids whose file part
        is an absolute path, see :func:`item_id`).
        """
        if "[" not in self.test_id.rsplit("::", 1)[-1]:
            nodeid = _without_params(nodeid)
        return nodeid == self.test_id or nodeid.endswith("/" + self.test_id)


def item_id(item) -> str:
    """The item's id with its file as an absolute path (``/abs/tests/test_x.py::test_y``):
    node ids are relative to the rootdir, which differs between this repository, a vendored
    tree and ``pytest --pyargs attnprops.properties``; absolute paths end the same way in all three."""
    _, sep, names = item.nodeid.partition("::")
    return f"{Path(item.path).resolve().as_posix()}{sep}{names}"


def _without_params(nodeid: str) -> str:
    head, sep, last = nodeid.rpartition("::")
    return head + sep + last.split("[", 1)[0]


def read_expected_failures(path) -> list[ExpectedFailure]:
    """Parse an expected-failures file.

    Format (UTF-8 text): one pytest test id per line, ``path/to/test_file.py::test_name``
    (optionally ``[params]``: without them every parametrization is meant). The reason is the
    ``# comment`` after the id on the same line or, when there is none, the block of ``#``
    comment lines just above it (a blank line ends a block, so one block can explain several
    ids). Blank lines and comment-only lines are otherwise ignored.

    Returns:
        The entries in file order.

    Raises:
        OSError: the file cannot be read.
        ValueError: a line is not a test id (no ``::``), an id has no reason, or an id is
            listed twice; the message names the line.
    """
    path = Path(path)
    entries: list[ExpectedFailure] = []
    block: list[str] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line:
            block = []
            continue
        if line.startswith("#"):
            block.append(line.lstrip("#").strip())
            continue
        test_id, _, comment = line.partition("#")
        test_id, comment = test_id.strip(), comment.strip()
        if "::" not in test_id or " " in test_id.split("[", 1)[0]:
            raise ValueError(
                f"line {number}: {test_id!r} is not a test id "
                "(expected path/to/test_file.py::test_name)"
            )
        reason = comment or " ".join(t for t in block if t)
        if not reason:
            raise ValueError(f"line {number}: {test_id} has no reason; add '# why it fails'")
        if test_id in seen:
            raise ValueError(f"line {number}: {test_id} is already listed on line {seen[test_id]}")
        seen[test_id] = number
        entries.append(ExpectedFailure(test_id, reason, str(path), number))
    return entries


def xfail_files(config, subject) -> list[Path]:
    """The subject's file (module attribute) and the ``--attn-xfail``/``ATTN_XFAIL`` files."""
    files = []
    declared = getattr(subject.module, XFAIL_ATTRIBUTE, None)
    if declared:
        where = Path(getattr(subject.module, "__file__", None) or ".").resolve().parent
        files.append(where / declared)
    invocation = Path(config.invocation_params.dir)
    named = config.getoption("--attn-xfail")
    if named is None:
        named = [p for p in os.environ.get(XFAIL_ENV_VAR, "").split(os.pathsep) if p]
    files += [(invocation / p).resolve() for p in named]
    unique = []
    for path in files:
        if path not in unique:
            unique.append(path)
    return unique


def _file_exists(config, file_part: str) -> bool:
    """Whether the test file of an id exists on disk although this run did not collect it
    (relative to the rootdir, the invocation folder, or the folder holding ``properties``)."""
    bases = {
        Path(config.rootpath),
        Path(config.invocation_params.dir),
        Path(__file__).resolve().parent.parent,
    }
    return any((base / file_part).is_file() for base in bases)


def _stale(entry: ExpectedFailure, items, config) -> str | None:
    """Why ``entry`` (which matched no collected test) is stale, or None when its test merely
    was not selected in this run (another file, or a node id on the command line)."""
    file_part, _, names = entry.test_id.partition("::")
    same_file = [
        item for item in items if item_id(item).split("::", 1)[0].endswith("/" + file_part)
    ]
    if not same_file:
        return None if _file_exists(config, file_part) else "matches no test file"
    target = getattr(same_file[0], "module", None)
    for name in names.split("[", 1)[0].split("::"):
        target = getattr(target, name, None)
    if target is None:
        return f"matches no collected test (no {names.split('[', 1)[0]} in {file_part})"
    base = _without_params(entry.test_id)
    if base != entry.test_id and any(
        _without_params(item_id(item)).endswith("/" + base) for item in same_file
    ):
        return "matches no collected test (no such parametrization)"
    return None


def mark_expected_failures(config, items, entries: list[ExpectedFailure], subject_name: str):
    """Mark each test an entry names ``xfail(strict=..., raises=XFAIL_RAISES)`` with the
    entry's reason, strict when the loaded Hypothesis profile is derandomized (module doc);
    report the entries that match no test (:func:`_stale`) as one collection error."""
    if not entries:
        return
    strict = bool(settings.default.derandomize)
    problems = []
    for entry in entries:
        matched = [item for item in items if entry.matches(item_id(item))]
        for item in matched:
            item.add_marker(
                pytest.mark.xfail(
                    reason=f"known deviation of {subject_name}: {entry.reason} "
                    f"[{entry.file}:{entry.line}]",
                    strict=strict,
                    raises=XFAIL_RAISES,
                )
            )
        if not matched:
            problem = _stale(entry, items, config)
            if problem:
                problems.append(f"{entry.file}:{entry.line}: {entry.test_id} {problem}")
    if problems:
        report = pytest.CollectReport(
            "attnprops-expected-failures",
            "failed",
            "attnprops: stale expected-failures entries (remove or fix them):\n  "
            + "\n  ".join(problems),
            [],
        )
        config.hook.pytest_collectreport(report=report)
