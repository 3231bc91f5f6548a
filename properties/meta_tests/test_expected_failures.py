"""Meta-tests of expected-failures files (``--attn-xfail``, ``ATTN_XFAIL``, a subject's
``ATTNPROPS_EXPECTED_FAILURES``): listed tests are strict xfails with the file's reason, a
listed test that passes or crashes fails the run, and a stale id is a collection error.

The pytest runs are fresh processes (:func:`ci.pytest_process.run_pytest`, forked with the
libraries imported; plain subprocesses in a vendored copy): the plugin keeps the selected subject in module state, which an
in-process run would overwrite for this session.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

try:
    from attnprops.ci.pytest_process import run_pytest
except ImportError:  # a vendored copy of properties/ has no ci/: plain subprocesses
    run_pytest = None

from attnprops import properties
from attnprops.properties.expected_failures import ExpectedFailure
from attnprops.properties.expected_failures import read_expected_failures
from attnprops.properties.options import suite_args

pytest_plugins = ["pytester"]

SUITE_ROOT = Path(properties.__file__).resolve().parent.parent  # holds properties/ and oracle/

DEMO_TESTS = """
    import pytest

    def test_fails():
        assert 1 + 1 == 3, "a known deviation"

    def test_passes():
        pass

    def test_crashes():
        raise RuntimeError("not a property violation")

    @pytest.mark.parametrize("n", [1, 2])
    def test_param(n):
        assert n == 2
"""

TINY_SUBJECT = """
    import numpy as np
    __version__ = "9.9"
    ATTNPROPS_CAPABILITIES = {"dtypes": ("float64",), "validates_inputs": False,
                              "weights": False, "kv_cache": False}
    {extra}
    def attention(query, key, value, *, attn_mask=None, is_causal=False, query_start=None,
                  scale=None):
        raise NotImplementedError
"""


@pytest.fixture
def demo(pytester, monkeypatch):
    """A folder with ``test_demo.py`` and a subject ``tiny_subject``; returns a runner."""
    monkeypatch.setenv("PYTHONPATH", str(SUITE_ROOT))
    monkeypatch.delenv("ATTN_XFAIL", raising=False)
    monkeypatch.delenv("ATTN_IMPL", raising=False)
    pytester.makepyfile(test_demo=textwrap.dedent(DEMO_TESTS))
    pytester.makepyfile(tiny_subject=textwrap.dedent(TINY_SUBJECT).replace("{extra}", ""))

    def run(*args, subject="tiny_subject"):
        args = [
            *suite_args(subject),
            "-rxXfE",
            "test_demo.py",
            *args,
        ]
        if run_pytest is None:
            return pytester.runpytest_subprocess(*args)
        done = run_pytest(args, cwd=pytester.path, env=dict(os.environ))
        lines = done.output.splitlines()  # one stream: stdout and stderr together
        return pytest.RunResult(done.returncode, lines, lines, 0.0)

    return run


def test_listed_tests_are_strict_xfails_with_the_reason(demo, pytester):
    """A listed failing test is xfailed with the file's reason (trailing comment, or the
    comment block above); an unlisted failure still fails; a listed test that passes is a
    strict XPASS failure; a listed test that crashes with a non-assertion error fails; an id
    with [params] marks that parametrization only; the header names the file."""
    pytester.path.joinpath("xfail.txt").write_text(
        textwrap.dedent("""\
        # The demo's arithmetic is off by one
        # (explained in findings.md).
        test_demo.py::test_fails

        test_demo.py::test_passes  # claims to fail but passes
        test_demo.py::test_crashes  # crashes instead of failing
        test_demo.py::test_param[1]  # only n=1 fails
    """),
        encoding="utf-8",
    )
    result = demo("--attn-xfail", "xfail.txt")
    result.assert_outcomes(passed=1, failed=2, xfailed=2)
    result.stdout.fnmatch_lines(
        [
            "attnprops expected failures: *xfail.txt (4 test ids)",
            "[[]XPASS(strict)[]] known deviation of tiny_subject: claims to fail but passes*",
            "XFAIL test_demo.py::test_fails - known deviation of tiny_subject: The demo's "
            "arithmetic is off by one (explained in findings.md).*xfail.txt:3]",
            "XFAIL test_demo.py::test_param[[]1[]] - known deviation of tiny_subject: only n=1 "
            "fails*",
            "FAILED test_demo.py::test_passes - [[]XPASS(strict)[]]*",
            "FAILED test_demo.py::test_crashes - RuntimeError*",
        ]
    )


def test_random_profiles_report_a_listed_test_that_passes(demo, pytester):
    """Under a random profile (dev, thorough) the draws differ from run to run, so a listed
    test that passes is reported as XPASS rather than failing the run; a listed failure is
    still xfailed and an unlisted one still fails."""
    pytester.path.joinpath("xfail.txt").write_text(
        "test_demo.py::test_fails  # a known deviation\n"
        "test_demo.py::test_passes  # missed by these draws\n",
        encoding="utf-8",
    )
    result = demo(
        "--attn-xfail", "xfail.txt", "--hypothesis-profile", "thorough", "-k", "not crashes"
    )
    result.assert_outcomes(passed=1, failed=1, xfailed=1, xpassed=1)  # test_param[1] fails
    result.stdout.fnmatch_lines(["XPASS test_demo.py::test_passes*missed by these draws*"])


def test_stale_ids_are_collection_errors(demo, pytester):
    """An id naming a missing test in a collected file, or a test file that does not exist,
    is reported as a collection error with file and line, and the run fails; ids of tests
    deselected by -k are still matched (not stale)."""
    pytester.path.joinpath("xfail.txt").write_text(
        textwrap.dedent("""\
        test_demo.py::test_fails  # real
        test_demo.py::test_renamed_long_ago  # stale: no such test
        test_gone.py::test_x  # stale: no such file
        test_demo.py::test_param[3]  # stale: no such parametrization
    """),
        encoding="utf-8",
    )
    result = demo("--attn-xfail", "xfail.txt", "-k", "passes")
    assert result.ret != 0
    result.stdout.fnmatch_lines(
        [
            "*ERROR collecting attnprops-expected-failures*",
            "attnprops: stale expected-failures entries (remove or fix them):",
            "  *xfail.txt:2: test_demo.py::test_renamed_long_ago matches no collected test*",
            "  *xfail.txt:3: test_gone.py::test_x matches no test file",
            "  *xfail.txt:4: test_demo.py::test_param[[]3[]] matches no collected test (no such "
            "parametrization)",
        ]
    )
    assert "xfail.txt:1" not in result.stdout.str()


def test_stale_ids_fail_under_xdist(demo, pytester):
    """With pytest-xdist (``attnprops check`` runs ``-n``) a stale id still fails the run."""
    pytester.path.joinpath("xfail.txt").write_text(
        "test_demo.py::test_nope  # stale\n", encoding="utf-8"
    )
    result = demo("--attn-xfail", "xfail.txt", "-n", "2", "-k", "passes")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*xfail.txt:1: test_demo.py::test_nope matches no collected*"])


def test_subject_attribute_and_environment_variable(demo, pytester, monkeypatch):
    """A subject's ``ATTNPROPS_EXPECTED_FAILURES`` (relative to the module's folder) applies
    without any option; ``ATTN_XFAIL`` adds files; both appear in the header."""
    pytester.mkpydir("adapters")
    pytester.path.joinpath("adapters", "mine.py").write_text(
        textwrap.dedent(TINY_SUBJECT).replace(
            "{extra}", 'ATTNPROPS_EXPECTED_FAILURES = "mine.xfail.txt"'
        ),
        encoding="utf-8",
    )
    pytester.path.joinpath("adapters", "mine.xfail.txt").write_text(
        "test_demo.py::test_fails  # from the subject\n", encoding="utf-8"
    )
    pytester.path.joinpath("more.txt").write_text(
        "test_demo.py::test_param[1]  # from the environment\n", encoding="utf-8"
    )
    monkeypatch.setenv("ATTN_XFAIL", "more.txt")
    result = demo("-k", "not crashes", subject="adapters.mine")
    result.assert_outcomes(passed=2, xfailed=2, deselected=1)
    result.stdout.fnmatch_lines(
        [
            "attnprops expected failures: *adapters?mine.xfail.txt (1 test ids)",
            "attnprops expected failures: *more.txt (1 test ids)",
            "XFAIL test_demo.py::test_fails - known deviation of adapters.mine: from the subject*",
            "XFAIL test_demo.py::test_param[[]1[]] - * from the environment*",
        ]
    )


def test_header_says_none_without_a_file(demo):
    result = demo("-k", "passes")
    result.stdout.fnmatch_lines(["attnprops expected failures: none"])
    result.assert_outcomes(passed=1, deselected=4)


def test_bad_files_are_usage_errors(demo, pytester):
    """An entry without a reason, a line that is not a test id, a missing file: usage error."""
    pytester.path.joinpath("noreason.txt").write_text(
        "test_demo.py::test_fails\n", encoding="utf-8"
    )
    result = demo("--attn-xfail", "noreason.txt")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*noreason.txt: line 1: test_demo.py::test_fails has no reason*"])
    result = demo("--attn-xfail", "missing.txt")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*expected-failures file *missing.txt*"])


def test_parser_reads_reasons_blocks_and_rejects_junk(tmp_path):
    """Unit test of the format: trailing comment, comment block (ended by a blank line),
    params kept, junk lines / duplicates rejected with the line number."""
    path = tmp_path / "x.txt"
    path.write_text(
        textwrap.dedent("""\
        # block reason
        # continued
        a/test_a.py::test_one
        a/test_a.py::test_two[p]  # own reason

        # orphan comment, then a blank line

        a/test_a.py::test_three  # three
    """),
        encoding="utf-8",
    )
    entries = read_expected_failures(path)
    assert [(e.test_id, e.reason, e.line) for e in entries] == [
        ("a/test_a.py::test_one", "block reason continued", 3),
        ("a/test_a.py::test_two[p]", "own reason", 4),
        ("a/test_a.py::test_three", "three", 8),
    ]
    path.write_text("not a test id  # reason\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 1: 'not a test id' is not a test id"):
        read_expected_failures(path)
    path.write_text("t.py::a  # x\nt.py::a  # y\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2: t.py::a is already listed on line 1"):
        read_expected_failures(path)


def test_ids_match_as_path_suffixes():
    """``properties/...`` ids match the same test in a vendored tree (``tests/properties/...``)
    and every parametrization unless one is named; never a different file or test."""
    entry = ExpectedFailure("properties/test_values.py::test_output_matches_oracle", "r", "f", 1)
    assert entry.matches("properties/test_values.py::test_output_matches_oracle")
    assert entry.matches("tests/properties/test_values.py::test_output_matches_oracle")
    assert entry.matches("properties/test_values.py::test_output_matches_oracle[x]")
    assert not entry.matches("myproperties/test_values.py::test_output_matches_oracle")
    assert not entry.matches("properties/test_values.py::test_output_matches_oracle_2")
    one = ExpectedFailure(
        "properties/test_rejection.py::test_invalid_inputs_raise[query ndim]", "r", "f", 1
    )
    assert one.matches("properties/test_rejection.py::test_invalid_inputs_raise[query ndim]")
    assert not one.matches(
        "properties/test_rejection.py::test_invalid_inputs_raise[zero-size axis]"
    )
