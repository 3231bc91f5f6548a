"""``attnprops check`` refuses what cannot run, before any property runs, in one line that
names the argument: bad stop options, shards, ``-k`` expressions and pasted test ids, report
paths it cannot write or that name the subject, a subject that is not Python; and a run that
cannot start still writes its JSON and JUnit reports, saying why."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from attnprops.ci.cli import main
from attnprops.properties.selection import parse_shard


def test_check_refuses_an_unwritable_json_path_before_running(tmp_path):
    with pytest.raises(SystemExit, match=r"--json .*r\.json: No such file or directory"):
        main(["check", "--json", str(tmp_path / "missing" / "r.json")])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--maxfail", "0"], "--maxfail: invalid positive integer value: '0'"),
        (["-x", "--maxfail", "2"], "not allowed with argument"),
    ],
)
def test_check_rejects_bad_stop_options(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["check", *argv])
    assert stop.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(("text", "shard"), [(" 1/2", (1, 2)), ("2 / 4", (2, 4)), ("3/3", (3, 3))])
def test_a_shard_may_carry_white_space_as_jobs_may(text, shard):
    assert parse_shard(text) == shard


@pytest.mark.parametrize("text", ["3/2", "0/2", "1/0", "abc", "1/2/3", "\u00b2/3", ""])
def test_anything_else_is_no_shard(text):
    with pytest.raises(ValueError, match="expected I/N with 1 <= I <= N"):
        parse_shard(text)


def test_a_run_that_cannot_start_says_why_in_the_json(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(["check", "--impl", "no_such_subject_zzz", "--json", "j.json"])
    capsys.readouterr()
    summary = json.loads((tmp_path / "j.json").read_text())
    assert code == 1 and summary["passed"] is False and summary["returncode"] == 4
    assert "cannot import the attention subject 'no_such_subject_zzz'" in summary["error"]


def test_a_run_that_cannot_start_still_writes_a_junit_report(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "report.xml").write_text("<stale/>", encoding="utf-8")
    code = main(["check", "--impl", "no_such_subject_zzz", "--junitxml", "report.xml"])
    capsys.readouterr()
    suite = ET.parse(tmp_path / "report.xml").getroot().find("testsuite")
    assert code == 1 and suite.get("errors") == "1" and suite.get("tests") == "1"
    error = suite.find("testcase/error")
    assert "could not run (pytest exit 4)" in error.get("message")
    assert "cannot import the attention subject 'no_such_subject_zzz'" in error.text


@pytest.mark.parametrize("expression", ["foo(", "not and", "a or"])
def test_check_refuses_an_unparsable_k_expression_in_one_line(expression, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["check", "-k", expression])
    message = str(stop.value.code)
    assert (
        message.startswith(f"attnprops check: -k {expression!r} is not a pytest -k expression: ")
        and "\n" not in message
    ), message


def test_a_pasted_test_id_gets_a_hint(capsys):
    """A fresh user pasted ``test_invalid_inputs_raise[query ndim]`` (as the report prints
    it) into ``-k``: the refusal says how to select it."""
    with pytest.raises(SystemExit) as stop:
        main(["check", "-k", "test_invalid_inputs_raise[query ndim]"])
    assert str(stop.value.code).endswith(
        "(a test id's [parameters] are not -k words: give its words joined by 'and', "
        "e.g. -k 'invalid_inputs_raise and ndim')"
    )


@pytest.mark.parametrize(
    "argv, env, message",
    [
        (["--junitxml", "/proc/r.xml"], {}, "--junitxml /proc/r.xml: No such file or directory"),
        (
            ["--json", "same.out", "--junitxml", "same.out"],
            {},
            "--json and --junitxml name the same file",
        ),
        ([], {"ATTN_ROBUSTNESS": "bogus"}, "ATTN_ROBUSTNESS='bogus': use one of report, gate"),
    ],
)
def test_bad_report_paths_and_variables_stop_before_the_run(
    argv, env, message, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as stop:
        main(["check", *argv])
    assert str(stop.value.code) == f"attnprops check: {message}"


@pytest.mark.parametrize("flag", ["--json", "--junitxml"])
def test_a_report_naming_the_subject_file_is_refused_and_the_file_kept(flag, tmp_path, monkeypatch):
    """A fresh user's slip: ``--json attn.py`` with ``--impl ./attn.py`` once emptied the
    subject (``--junitxml``: deleted it) before the run."""
    monkeypatch.chdir(tmp_path)
    source = "def attention(q, k, v, **kw):\n    return q\n"
    (tmp_path / "attn.py").write_text(source, encoding="utf-8")
    with pytest.raises(SystemExit) as stop:
        main(["check", "--impl", "./attn.py", flag, "attn.py"])
    assert str(stop.value.code) == (
        f"attnprops check: {flag} attn.py is the subject file (--impl): the report would "
        "overwrite it; name another file"
    )
    assert (tmp_path / "attn.py").read_text(encoding="utf-8") == source


def test_a_file_that_is_not_python_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "attn.txt").write_text("x = 1\n", encoding="utf-8")
    main(["check", "--impl", "./attn.txt", "--jobs", "1", "--json", "txt.json"])
    capsys.readouterr()
    error = json.loads((tmp_path / "txt.json").read_text())["error"]
    assert "attn.txt is not a .py file; name a Python file, a package folder or a module" in error
    assert "Traceback" not in error
