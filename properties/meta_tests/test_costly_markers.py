"""The costly-property markers tell the truth: a property is marked ``oracle_backed`` exactly
when it calls the 50-digit oracle (itself, or through a helper of its module), and every
property of the kernel-sized files (:data:`KERNEL_FILES`) is ``kernel_sized``; the plugin gives each marked test
its share of the profile's examples (properties.profiles.COSTLY_MARKERS; the counts are
checked end to end by ci/tests/test_results_channel.py::test_example_counts)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SUITE = Path(__file__).resolve().parents[1]


def _marks(node: ast.FunctionDef) -> set[str]:
    return {
        d.attr
        for d in node.decorator_list
        if isinstance(d, ast.Attribute) and ast.unparse(d).startswith("pytest.mark.")
    }


def _reaches_oracle(name: str, functions: dict, seen: set) -> bool:
    """Whether module function ``name`` names the oracle, itself or through the module's
    other functions it names."""
    if name in seen or name not in functions:
        return False
    seen.add(name)
    names = {n.id for n in ast.walk(functions[name]) if isinstance(n, ast.Name)}
    return bool(names & ORACLE_NAMES) or any(_reaches_oracle(n, functions, seen) for n in names)


def _functions(path: Path) -> dict:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


# Names that reach the oracle: its module, and the _support helpers that call it (read from
# _support.py, so a new helper there counts without being listed).
ORACLE_NAMES = {"oracle"}
_SUPPORT = _functions(SUITE / "_support.py")
ORACLE_NAMES |= {name for name in _SUPPORT if _reaches_oracle(name, _SUPPORT, set())}


def _properties():
    for path in sorted(SUITE.glob("test_*.py")):
        functions = _functions(path)
        for name, node in functions.items():
            if name.startswith("test_") and any(
                "given" in ast.unparse(d) for d in node.decorator_list
            ):
                yield path.name, name, _marks(node), _reaches_oracle(name, functions, set())


PROPERTIES = list(_properties())
KERNEL_FILES = (
    "test_kernel_sizes.py",
    "test_kernel_serving.py",
    "test_kernel_groups_and_windows.py",
    "test_kernel_wide_heads.py",
)  # every property kernel-sized


def test_the_suite_has_marked_properties_of_both_kinds():
    kinds = {mark for _, _, marks, _ in PROPERTIES for mark in marks}
    assert {"oracle_backed", "kernel_sized"} <= kinds, kinds


@pytest.mark.parametrize(("file", "name", "marks", "oracle"), PROPERTIES)
def test_oracle_backed_marks_exactly_the_properties_that_call_the_oracle(file, name, marks, oracle):
    if file in KERNEL_FILES:
        assert "kernel_sized" in marks and "oracle_backed" not in marks, (name, marks)
    else:
        assert ("oracle_backed" in marks) == oracle, (name, marks, oracle)
