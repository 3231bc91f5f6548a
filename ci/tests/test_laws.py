"""``attnprops laws``: docs/laws.md is the catalogue generated from the code, and current."""

from __future__ import annotations

from pathlib import Path

from attnprops.ci import laws
from attnprops.mutants import all_mutants

PAGE = Path(__file__).resolve().parents[2] / "docs" / "laws.md"


def test_the_committed_catalogue_is_current():
    assert PAGE.read_text(encoding="utf-8") == laws.render(), (
        "docs/laws.md is stale: regenerate it with `attnprops laws --out docs/laws.md`"
    )


def test_every_test_and_every_killing_property_is_in_the_catalogue():
    rows = laws.laws()
    names = [r["test"] for r in rows]
    defined = [
        line
        for path in sorted(laws.PROPERTIES.glob("test_*.py"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith("def test_")
    ]
    assert len(names) == len(set(names)) == len(defined)
    for mutant in all_mutants().values():  # each kill is credited to a listed law
        assert set(mutant.killed_by) <= set(names), mutant.name
    assert all(r["law"] != "(no docstring)" for r in rows), [
        r["test"] for r in rows if r["law"] == "(no docstring)"
    ]


def test_sources_are_read_from_the_docstrings():
    assert laws.sources("law (Vaswani et al. 2017, eq. 1); seed 000") == [
        "Vaswani et al. 2017",
        "source lab (seed 000)",
    ]
    assert laws.sources("a rule with no citation") == [laws.RULEBOOK]
