"""The mutation runner: the three source-document mutants are killed for the right reason,
and the runner tells a property violation from a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnprops.ci.mutation_report import _classify
from attnprops.ci.mutation_report import _message
from attnprops.ci.mutation_report import run_mutant
from attnprops.ci.mutation_report import select
from attnprops.ci.mutation_results import Outcome
from attnprops.ci.pytest_process import STATUS_LOST
from attnprops.ci.suite_runner import PropertyFailure
from attnprops.ci.suite_runner import RunResult
from attnprops.mutants import all_mutants
from attnprops.properties.results import failure_record


@pytest.mark.parametrize("name", ["column_softmax"])
def test_source_document_mutants_are_killed(name, tmp_path):
    """The runner end to end: a seed document's broken variant dies by a property it was
    built to fail, on a generated input (not only on the hand-written seed cases), and the
    result carries Hypothesis's shrunk falsifying example. (Every mutant, the other seed
    variants included, is held to this by ``attnprops mutants``, which exits 1 on a kill
    without a shrunk counterexample.)"""
    result = run_mutant(name, tmp_path, profile="ci")
    assert result.outcome is Outcome.KILLED, result
    assert set(result.failed_properties) & set(all_mutants()[name].killed_by)
    assert result.profile == "mutation" and result.shrunk, result
    assert result.falsifying_example.startswith(("Falsifying example:", "Failing test case:"))


def _run(*failures: PropertyFailure, rc: int = 1) -> RunResult:
    return RunResult(
        subject="mutants.x", returncode=rc, seconds=0.0, tests_run=3, failures=list(failures)
    )


def _failure(test: str, violation: bool) -> PropertyFailure:
    return PropertyFailure(
        test=test, is_property_violation=violation, message="m", falsifying_example=""
    )


def test_classification_distinguishes_kill_crash_and_wrong_reason():
    """Killed needs a PropertyViolation in an expected property; a crash is an error; a
    violation elsewhere only is 'wrong reason'; no failure is 'survived'."""
    expected = {"test_a"}
    assert _classify(_run(_failure("test_a", True)), expected)[0] is Outcome.KILLED
    assert _classify(_run(_failure("test_a", False)), expected)[0] is Outcome.ERROR
    assert _classify(_run(_failure("test_b", True)), expected)[0] is Outcome.WRONG_REASON
    assert _classify(_run(rc=0), expected)[0] is Outcome.SURVIVED
    assert _classify(_run(rc=4), expected)[0] is Outcome.ERROR  # usage error: no verdict


def test_a_lost_exit_status_keeps_the_violations_the_run_recorded():
    """Exit status 255 (the fork server lost the child's status): a recorded violation of an
    expected property still kills (elsewhere: 'wrong reason'); without a violation, or with
    any other status outside pytest's, there is no verdict."""
    expected = {"test_a"}
    lost = STATUS_LOST
    assert _classify(_run(_failure("test_a", True), rc=lost), expected)[0] is Outcome.KILLED
    assert _classify(_run(_failure("test_b", True), rc=lost), expected)[0] is Outcome.WRONG_REASON
    assert _classify(_run(_failure("test_a", False), rc=lost), expected)[0] is Outcome.ERROR
    assert _classify(_run(rc=lost), expected)[0] is Outcome.ERROR
    assert _classify(_run(_failure("test_a", True), rc=3), expected)[0] is Outcome.ERROR


def test_select_only_and_shard():
    """--only keeps the named mutants; --shard i/N takes every N-th from i (1-based)."""
    names = ["a", "b", "c", "d", "e"]
    assert select(names, None, "1/2") == ["a", "c", "e"]
    assert select(names, None, "2/2") == ["b", "d"]
    assert select(names, ["b", "e"], None) == ["b", "e"]
    with pytest.raises(SystemExit, match="unknown mutants"):
        select(names, ["zzz"], None)
    with pytest.raises(SystemExit, match="expected I/N"):
        select(names, None, "3/2")


def test_explicit_example_headings_of_hypothesis_releases():
    """Both earlier Hypothesis releases (6.155: "Falsifying example") and the pinned one
    (6.170: "Failing test case") are read; an explicit @example is told apart from a generated
    one."""
    for head, explicit in (
        ("Failing test case", False),
        ("Falsifying example", False),
        ("Falsifying explicit example", True),
        ("Failing explicit example", True),
    ):
        exc = AssertionError("m")
        exc.__notes__ = [f"{head}: test_x(\n    case=1,\n)"]
        record = failure_record(exc, ())
        assert record["counterexample"] == f"{head}: test_x(\n    case=1,\n)", head
        assert record["explicit"] is explicit, head


def test_a_crash_message_names_its_exception():
    """A subject's ``sys.exit(0)`` reads "SystemExit: 0", not "0"; a property's own
    failure keeps its message as written."""
    assert failure_record(SystemExit(0), ())["message"] == "SystemExit: 0"
    assert failure_record(KeyError(), ())["message"] == "KeyError"
    assert failure_record(AssertionError("output differs"), ())["message"] == "output differs"


def test_every_mutant_declares_itself():
    """Each mutants/ module has a MUTANT with description, model and killing properties that
    exist in the suite."""
    from attnprops import properties

    suite = "\n".join(p.read_text() for p in Path(properties.__file__).parent.glob("test_*.py"))
    found = all_mutants()
    assert len(found) >= 20
    for name, mutant in found.items():
        for prop in mutant.killed_by:
            assert f"def {prop}(" in suite, f"{name}: killed_by names unknown property {prop}"


def test_properties_report_without_bare_asserts():
    """The runner starts pytest with --assert=plain (ci.suite_runner), so a bare ``assert`` in
    a property module would fail without saying why; the properties raise PropertyViolation
    through properties.checks instead."""
    import ast

    from attnprops import properties

    root = Path(properties.__file__).parent
    found = [
        f"{path.name}:{node.lineno}"
        for path in sorted(root.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Assert)
    ]
    assert found == [], found


def test_a_kill_without_a_shrunk_counterexample_fails_the_run():
    """attnprops mutants exits 1 unless every mutant is killed with a generated, shrunk
    counterexample: a kill by an explicit example only is not a kill of the suite."""
    from attnprops.ci.mutation_results import MutantResult
    from attnprops.ci.mutation_results import verdict

    def result(name, outcome, shrunk):
        return MutantResult(
            name=name,
            description="d",
            killed_by=("test_a",),
            outcome=outcome,
            failed_properties=["test_a"],
            falsifying_example="",
            message="m",
            seconds=0.0,
            examples_tried=1,
            profile="mutation",
            shrunk=shrunk,
        )

    assert verdict([result("a", Outcome.KILLED, True)], None, None) == []
    problems = verdict(
        [
            result("a", Outcome.KILLED, False),
            result("b", Outcome.SURVIVED, False),
            result("c", Outcome.KILLED, True),
        ],
        None,
        None,
    )
    assert problems == ["not killed: b", "killed without a generated, shrunk counterexample: a"]


def test_an_error_says_pytests_exit_status_and_why():
    """An error row keeps pytest's exit status and, when no test failed, the lines of the
    output that say why (a signal, a fatal error, an internal error), else its last line; a
    kill's message is the failure's own."""
    segfault = (
        "Fatal Python error: Segmentation fault\n\nCurrent thread:\n"
        + '  File "x.py", line 1 in f\n' * 40
        + "Extension modules: numpy (total: 1)\n[pytest process ended by signal 11 (SIGSEGV)]"
    )
    crash = RunResult(
        subject="mutants.x", returncode=3, seconds=0.0, tests_run=0, output_tail=segfault
    )
    assert _message(Outcome.ERROR, crash, None) == (
        "pytest exit 3: [pytest process ended by signal 11 (SIGSEGV)] | "
        "Fatal Python error: Segmentation fault"
    )
    internal = _run(rc=3)
    internal.output_tail = "INTERNALERROR> Traceback\nINTERNALERROR> KeyError: 'x'\n"
    assert _message(Outcome.ERROR, internal, None) == "pytest exit 3: INTERNALERROR> KeyError: 'x'"
    usage = _run(rc=4)
    usage.output_tail = "ERROR: usage\n  no such option\n\n"
    assert _message(Outcome.ERROR, usage, None) == "pytest exit 4: no such option"
    assert _message(Outcome.ERROR, _run(rc=4), None) == "pytest exit 4"
    collection = _run(rc=2)
    collection.output_tail = "ERROR collecting x.py\nE   ValueError: boom\nExtension: y\n"
    assert _message(Outcome.ERROR, collection, None) == "pytest exit 2: E ValueError: boom"
    failure = _failure("test_a", False)
    assert _message(Outcome.ERROR, _run(failure, rc=3), failure) == "pytest exit 3: m"
    violation = _failure("test_a", True)
    assert _message(Outcome.KILLED, _run(violation), violation) == "m"
    assert _message(Outcome.SURVIVED, _run(rc=0), None) == ""


def test_a_signal_is_named_in_the_output():
    """run_pytest reports a child killed by a signal as exit 3 and names the signal."""
    from attnprops.ci.pytest_process import _signal_name

    assert _signal_name(9) == "9 (SIGKILL)" and _signal_name(11) == "11 (SIGSEGV)"
    assert _signal_name(200) == "200"
