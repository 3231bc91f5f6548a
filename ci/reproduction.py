"""A failing property's counterexample as code a user can paste: :func:`reproduction` turns
Hypothesis's falsifying example (the text of a result record) into a Python script that runs
the property's own body on exactly that input, and :func:`rerun_command` is the ``pytest``
command that re-runs the property as the mutation runner did. Used by the mutation report
(:mod:`attnprops.ci.mutation_report`); ``result`` is anything with the fields of its
``MutantResult`` (``name``, ``profile``, ``failed_properties``, ``falsifying_example``).
"""

from __future__ import annotations

import ast
import builtins
import importlib
import re
from typing import TYPE_CHECKING

from attnprops.ci.suite_runner import PROPERTIES
from attnprops.properties.plugin import WARNINGS_POLICY

if TYPE_CHECKING:
    from attnprops.ci.mutation_results import MutantResult

_HEADING = re.compile(r"^(?:Falsifying|Failing)(?: explicit)? (?:example|test case): ")
_DRAW = re.compile(r"^Draw \d+(?: \(.*\))?: ", re.M)
# Modules whose classes appear in the suite's counterexamples (AttentionCase, KernelSpec, ...).
_CASE_MODULES = (
    "attnprops.properties.strategies",
    "attnprops.properties.kernel_spec",
    "attnprops.properties.invalid",
)
_NUMPY_PRECISION = 8  # numpy's default print precision: more fractional digits are rounded

_DRAWS_CLASS = """\
class Draws:  # stands in for st.data(): hands back the values Hypothesis drew, in order
    def __init__(self, *values):
        self.values = list(values)

    def draw(self, strategy, label=None):
        if not self.values:  # a subject that got further than the failing one did
            raise LookupError("no recorded draw left")
        return self.values.pop(0)
"""


def _property_module(nodeid: str) -> str | None:
    """``attnprops.properties.test_...``, the module of the collected test ``nodeid``
    (``properties/test_x.py::test_y[...]``), or None."""
    path = nodeid.split("::", 1)[0]
    folder, _, file = path.rpartition("/")
    if not (
        file.startswith("test_")
        and file.endswith(".py")
        and folder.endswith("properties")
        and (PROPERTIES / file).is_file()
    ):
        return None
    return f"attnprops.properties.{file[:-3]}"


def _import_of(name: str) -> str | None:
    """The import line that binds ``name`` in a reproduction, ``""`` for a builtin, None when
    unknown."""
    if hasattr(builtins, name):
        return ""
    for module in _CASE_MODULES:
        obj = getattr(importlib.import_module(module), name, None)
        if isinstance(obj, type) and obj.__module__ == module:
            return f"from {module} import {name}"
    if name == "np":
        return "import numpy as np"
    import numpy

    return f"from numpy import {name}" if hasattr(numpy, name) else None


def _rounded_by_numpy(source: str, tree: ast.AST) -> bool:
    """Whether a float in an ``array(...)`` repr may have lost digits: numpy prints at most
    :data:`_NUMPY_PRECISION` fractional digits (a value shown with fewer is its shortest
    exact repr)."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", "")) == "array"
        ):
            for leaf in ast.walk(node):
                if isinstance(leaf, ast.Constant) and isinstance(leaf.value, float):
                    text = ast.get_source_segment(source, leaf) or ""
                    mantissa = text.lower().split("e")[0]
                    if len(mantissa.partition(".")[2]) >= _NUMPY_PRECISION:
                        return True
    return False


def _split_counterexample(text: str) -> tuple[str, list[tuple[str, str]]] | None:
    """Hypothesis's counterexample as (the call ``test_x(...)``, [("Draw N (label)", value)])."""
    head = _HEADING.match(text)
    if not head:
        return None
    body = text[head.end() :]
    marks = list(_DRAW.finditer(body))
    call = body[: marks[0].start()] if marks else body
    draws = [
        (m.group(0)[:-2], body[m.end() : marks[i + 1].start() if i + 1 < len(marks) else None])
        for i, m in enumerate(marks)
    ]
    return call.strip(), [(label, value.strip()) for label, value in draws]


def _indented(expr: str, indent: str) -> str:
    """``expr`` (possibly several lines, as Hypothesis printed it) without its blank lines,
    continuation lines indented by ``indent``."""
    lines = [line for line in expr.splitlines() if line.strip()]
    return "\n".join([lines[0]] + [indent + line for line in lines[1:]])


def first_property(result: "MutantResult") -> str | None:
    """The failing property whose counterexample the result carries (the first to fail),
    else the first failed property, else None."""
    named = [t for t in result.failed_properties if f" {t}(" in result.falsifying_example]
    return (named or result.failed_properties or [None])[0]


def _calls(node: ast.AST, name: str, *args) -> bool:
    """Whether ``node`` is the call ``name(*args)`` of constants."""
    return (
        isinstance(node, ast.Call)
        and getattr(node.func, "id", None) == name
        and not node.keywords
        and [getattr(a, "value", a) for a in node.args] == list(args)
    )


def reproduction(result: "MutantResult") -> tuple[str, bool] | None:
    """A Python script that re-runs the first failing property's body on exactly its recorded
    counterexample, and whether the input is exact (False: numpy printed a value rounded to
    :data:`_NUMPY_PRECISION` decimals). None when the counterexample cannot be rendered as
    code (none recorded, an unknown name, a summarized array ``[0., ..., 0.]``).

    The script loads the run's Hypothesis profile and sets ``ATTN_IMPL`` to the mutant before
    importing the property's module (which reads the subject when imported), rebuilds the
    arguments from Hypothesis's repr (``st.data()`` as a ``Draws`` object that hands back the
    recorded draws in order) and runs the property's own function (``.hypothesis.inner_test``)
    under ``@given`` (its ``note()`` calls need a Hypothesis test), the arguments built afresh
    for each execution since a property may modify its input and Hypothesis runs a failing
    example twice. It fails with the property's ``PropertyViolation``.
    """
    test = first_property(result)
    parts = _split_counterexample(result.falsifying_example)
    module = test and _property_module(getattr(result, "nodeid", ""))
    if parts is None or not module:
        return None
    call_text, draws = parts
    try:
        call = ast.parse(call_text, mode="eval").body
        draw_trees = [ast.parse(value, mode="eval").body for _, value in draws]
    except SyntaxError:
        return None
    if not (
        isinstance(call, ast.Call) and getattr(call.func, "id", None) == test and not call.args
    ):
        return None
    subject = f"attnprops.mutants.{result.name}"
    arguments, values, uses_data = [], list(draw_trees), False
    for keyword in call.keywords:
        if keyword.arg == "subject":
            if not _calls(keyword.value, "Subject", subject):
                return None
            arguments.append(f'        subject=load_subject("{subject}"),')
        elif keyword.arg == "data" and _calls(keyword.value, "data", ...):
            uses_data = True
            arguments.append("        data=Draws(")
            arguments += [
                f"            {_indented(text, ' ' * 12)},  # {label}" for label, text in draws
            ]
            arguments.append("        ),")
        else:
            values.append(keyword.value)
            text = ast.get_source_segment(call_text, keyword.value)
            arguments.append(f"        {keyword.arg}={_indented(text, ' ' * 8)},")
    if draws and not uses_data:
        return None
    nodes = [n for tree in values for n in ast.walk(tree)]
    if any(isinstance(n, ast.Constant) and n.value is ... for n in nodes):
        return None  # a summarized array cannot be rebuilt
    imports = {_import_of(n.id) for n in nodes if isinstance(n, ast.Name)}
    if None in imports:
        return None
    action, _, category, warned = WARNINGS_POLICY.split(":", 3)
    if not (action.isalpha() and re.fullmatch(r"\w+Warning", category)) or '"' in warned:
        return None
    exact = not (
        _rounded_by_numpy(call_text, call)
        or any(_rounded_by_numpy(text, tree) for (_, text), tree in zip(draws, draw_trees))
    )
    lines = [
        f"# mutant {result.name}: {test} fails on this input (profile {result.profile})",
        "import os",
        "import warnings",
        "",
        f'os.environ["ATTN_IMPL"] = "{subject}"  # the property modules read it when imported',
        '# the suite\'s warnings policy (README "Warnings"), as the runs apply it',
        f'warnings.filterwarnings("{action}", category={category}, module=r"{warned}")',
        "",
        "from hypothesis import given, settings, strategies as st",
        *sorted(line for line in imports if line and "numpy" in line),
        "",
        "from attnprops.properties.profiles import load_profile",
        "",
        f'load_profile("{result.profile}")  # the profile of the run that found it',
        "",
        *sorted(line for line in imports if line and "numpy" not in line),
        "from attnprops.properties.subject import load_subject",
        f"from {module} import {test}",
        "",
    ]
    if not exact:
        lines += [
            f"# numpy printed some values rounded to {_NUMPY_PRECISION} decimals: this "
            "may not be exactly the failing input",
            "# (the pytest command re-runs the property as the runner did)",
            "",
        ]
    if uses_data:
        lines += ["", _DRAWS_CLASS]
    lines += [
        "",
        "def failing_input():  # built afresh for each run: a property may modify its input",
        "    return dict(",
        *arguments,
        "    )",
        "",
        "",
        "@settings(max_examples=1, database=None, deadline=None, print_blob=False)",
        "@given(st.builds(failing_input))",
        "def reproduce(arguments):  # the property's own body, on exactly this input",
        f"    {test}.hypothesis.inner_test(**arguments)",
        "",
        "",
        "reproduce()",
    ]
    return "\n".join(lines) + "\n", exact


def rerun_command(result: "MutantResult") -> str:
    """The ``pytest`` command that re-runs the mutant's first failing property as the runner
    did: the same subject, property, profile (derandomized: the same examples) and
    robustness gate. Empty when no property failed."""
    test = first_property(result)
    if test is None:
        return ""
    return (
        f"python -m pytest --pyargs attnprops.properties -p no:cacheprovider "
        f"--attn-impl attnprops.mutants.{result.name} --attn-tests {test} "
        f"--hypothesis-profile {result.profile} --attn-robustness=gate"
    )
