"""``attnprops laws [--out FILE]``: the catalogue of the suite's laws, generated from the code.

One row per test of ``properties/test_*.py`` (read with :mod:`ast`, nothing imported or run):
the law (the first sentence of its docstring), whether it is a Hypothesis property or a
fixed test, the capabilities it needs (``@pytest.mark.requires``), its sources (the papers
and seed documents its docstring cites, :data:`SOURCES`; none cited: the rulebook,
``oracle/rules/``) and the mutants whose ``killed_by`` names it (:mod:`mutants`; the
mutation report, ``attnprops mutants``, checks that each of them is killed). The committed
page is ``docs/laws.md``; ``ci/tests/test_laws.py`` fails when it is stale. Regenerate it::

    attnprops laws --out docs/laws.md
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PROPERTIES = Path(__file__).resolve().parents[1] / "properties"

# (source as the page names it, pattern that finds it in a docstring)
SOURCES = (
    ("Vaswani et al. 2017", r"Vaswani"),
    ("Higham 2002, ch. 3", r"Higham ch|Higham, \*Accuracy"),
    ("Blanchard, Higham & Higham 2021", r"Blanchard"),
    ("Milakov & Gimelshein 2018", r"Milakov"),
    ("Dao et al. 2022", r"Dao et al"),
    ("Ainslie et al. 2023", r"Ainslie"),
    ("source lab (seed 000)", r"seed 000|source lab|the lab's"),
    ("quick reference (seed 003)", r"seed 003|quick reference"),
    ("PyTorch", r"PyTorch"),
    ("FlashAttention", r"FlashAttention"),
    ("JAX", r"\bJAX\b"),
)
RULEBOOK = "rulebook (oracle/rules/)"


ABBREVIATIONS = ("al", "e.g", "i.e", "eq", "cf", "ch", "vs", "etc")


def _first_sentence(doc: str) -> str:
    """Up to the first full stop outside parentheses and not ending an abbreviation."""
    text = " ".join(doc.split())
    depth = 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "." and depth <= 0 and (i + 1 == len(text) or text[i + 1] == " "):
            word = text[:i].rsplit(" ", 1)[-1].lstrip("(").lower()
            if word not in ABBREVIATIONS:
                text = text[: i + 1]
                break
    return text.replace("|", "\\|")


def _requires(node: ast.FunctionDef) -> list[str]:
    """The capabilities of ``@pytest.mark.requires("a", "b")`` decorators."""
    needs = []
    for deco in node.decorator_list:
        if (
            isinstance(deco, ast.Call)
            and isinstance(deco.func, ast.Attribute)
            and deco.func.attr == "requires"
        ):
            needs += [a.value for a in deco.args if isinstance(a, ast.Constant)]
    return needs


def _is_property(node: ast.FunctionDef) -> bool:
    """Decorated with Hypothesis's ``@given``."""
    for deco in node.decorator_list:
        func = deco.func if isinstance(deco, ast.Call) else deco
        if (isinstance(func, ast.Name) and func.id == "given") or (
            isinstance(func, ast.Attribute) and func.attr == "given"
        ):
            return True
    return False


def sources(doc: str) -> list[str]:
    """The :data:`SOURCES` a docstring cites, in that order (none: the rulebook)."""
    found = [name for name, pattern in SOURCES if re.search(pattern, doc)]
    return found or [RULEBOOK]


def laws(folder: Path = PROPERTIES) -> list[dict]:
    """Every test of ``folder/test_*.py``: ``module``, ``test``, ``law``, ``kind``,
    ``requires``, ``sources``, in file and line order."""
    rows = []
    for path in sorted(folder.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                doc = ast.get_docstring(node) or ""
                rows.append(
                    {
                        "module": path.name,
                        "test": node.name,
                        "law": _first_sentence(doc) if doc else "(no docstring)",
                        "kind": "property" if _is_property(node) else "fixed test",
                        "requires": _requires(node),
                        "sources": sources(doc),
                    }
                )
    return rows


def killers() -> dict[str, list[str]]:
    """Property name -> the mutants whose ``killed_by`` names it, sorted."""
    from attnprops.mutants import all_mutants

    named: dict[str, list[str]] = {}
    for mutant in all_mutants().values():
        for test in mutant.killed_by:
            named.setdefault(test, []).append(mutant.name)
    return {test: sorted(names) for test, names in named.items()}


def render() -> str:
    """The Markdown page: one table per property module."""
    kills = killers()
    rows = laws()
    lines = [
        "# The laws of attnprops",
        "",
        "Generated from the code by `attnprops laws --out docs/laws.md` (`ci/laws.py`); do not",
        "edit by hand: `ci/tests/test_laws.py` fails when this page is stale. One row per test",
        "of `properties/test_*.py`: the law (its docstring's first sentence), whether",
        "Hypothesis draws its inputs (*property*) or it runs fixed inputs, the subject",
        "capabilities it needs, the sources its docstring cites, and the mutants whose",
        "`killed_by` names it (the mutation report checks those kills).",
        "",
        f"{len(rows)} tests, {sum(r['kind'] == 'property' for r in rows)} of them properties; "
        f"{len({m for names in kills.values() for m in names})} mutants.",
    ]
    for module in dict.fromkeys(r["module"] for r in rows):
        lines += [
            "",
            f"## properties/{module}",
            "",
            "| test | law | kind | needs | sources | mutants naming it |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for r in (r for r in rows if r["module"] == module):
            lines.append(
                f"| `{r['test']}` | {r['law']} | {r['kind']} | {', '.join(r['requires']) or '-'} "
                f"| {', '.join(r['sources'])} "
                f"| {', '.join(f'`{m}`' for m in kills.get(r['test'], [])) or '-'} |"
            )
    return "\n".join(lines) + "\n"


def add_arguments(parser) -> None:
    parser.add_argument(
        "--out",
        metavar="FILE",
        help="write the page here (e.g. docs/laws.md) instead of printing it",
    )


def run(args) -> int:
    page = render()
    if args.out:
        Path(args.out).write_text(page, encoding="utf-8")
        print(f"wrote {args.out} ({page.count(chr(10))} lines)")
    else:
        print(page, end="")
    return 0
