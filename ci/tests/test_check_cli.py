"""``attnprops check``'s progress, ``-x``/``--maxfail``, ``--junitxml`` and ``--json``, and
its list of skipped properties with their reasons: one run of a few quick properties
(``-k``) against a subject whose ``attention`` always raises, stopped by ``-x``."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from attnprops.ci import check
from attnprops.ci.cli import main

RAISES = """\
ATTNPROPS_CAPABILITIES = {"dtypes": ("float64",), "validates_inputs": False,
                          "weights": False, "kv_cache": False, "kv_cache_bytes": False}


def attention(query, key, value, *, attn_mask=None, is_causal=False, query_start=None,
              scale=None):
    raise NotImplementedError("not written yet")
"""


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("check")
    (folder / "raises.py").write_text(RAISES, encoding="utf-8")
    return folder


def _check_raises(*argv: str, profile: str = "dev") -> int:
    """``attnprops check`` of RAISES (``./raises.py``, in the current folder), one worker."""
    return main(["check", "--impl", "./raises.py", "--profile", profile, "--jobs", "1", *argv])


def test_check_prints_progress_stops_at_the_first_failure_and_writes_reports(
    stopped_run, capsys, monkeypatch
):
    monkeypatch.chdir(stopped_run)
    code = _check_raises(
        "-x",
        "-k",
        "test_kv_cache or test_weights or test_seed_examples or test_single_visible_key",
        "--junitxml",
        "report.xml",
        "--json",
        "summary.json",
    )
    out, err = capsys.readouterr()
    assert code == 1, out + err
    total = int(re.search(r"^attnprops check: (\d+) property tests$", err, re.M).group(1))
    subject = re.search(r"^  subject: (.*)$", err, re.M).group(1)  # with its declarations
    assert subject.split(" ", 1)[0].endswith("raises.py") and "kv_cache=False" in subject, err
    lines = re.findall(r"^\[\s*(\d+)/(\d+)\] (\S+) +(\S+)(.*)$", err, re.M)
    assert lines and all(int(of) == total for _, of, _, _, _ in lines), err
    assert [int(n) for n, *_ in lines] == list(range(1, len(lines) + 1)), err  # in order
    failed = [line for line in lines if line[2] == "failed"]
    assert len(failed) == 1 and lines[-1] == failed[0], err  # -x: the first failure ends it
    assert "NotImplementedError: not written yet" in failed[0][4], err
    assert len(lines) < total, err  # stopped before the end
    assert "(stopped after 1 failing: -x/--maxfail)" in out, out
    skipped = [line for line in lines if line[2] == "skipped"]
    assert skipped, err  # the KV-cache properties, declared missing, come first
    summary = json.loads((stopped_run / "summary.json").read_text())
    assert summary["passed"] is False and summary["subject"] == "./raises.py"
    assert [f["test"] for f in summary["failures"]] == [failed[0][3].rstrip(":").split("[")[0]]
    # raising on a valid call violates the property (checks.call_subject), with the subject's line
    assert summary["failures"][0]["is_property_violation"] is True
    assert summary["failures"][0]["subject_frame"].endswith(":7 in attention")
    assert len(summary["skipped"]) == len(skipped)
    reasons = {s["reason"] for s in summary["skipped"]}
    assert all(re.fullmatch(r"subject \S+ declares \w+=False", r) for r in reasons), reasons
    for reason in reasons:  # the summary lists skipped properties by reason
        tests = [s["test"] for s in summary["skipped"] if s["reason"] == reason]
        assert f"  skipped ({reason}): {', '.join(tests)}" in out, out
    suite = ET.parse(stopped_run / "report.xml").getroot().find("testsuite")
    assert int(suite.get("failures")) + int(suite.get("errors")) == 1
    assert int(suite.get("skipped")) == len(skipped)


def test_check_says_when_a_selection_is_empty(stopped_run, capsys, monkeypatch):
    monkeypatch.chdir(stopped_run)
    code = _check_raises("-k", "no_such_property_zzz")
    out = capsys.readouterr().out
    assert code == 1
    assert "no property test was selected by -k 'no_such_property_zzz': nothing ran" in out, out


def _skipped(folder, *argv) -> list[str]:
    _check_raises("-k", "test_kv_cache", "--json", "shard.json", *argv)
    return [s["test"] for s in json.loads((folder / "shard.json").read_text())["skipped"]]


def test_check_shards_split_the_selection_once(stopped_run, capsys, monkeypatch):
    """--shard I/N: the N shards of a selection are disjoint, cover it, and are balanced."""
    monkeypatch.chdir(stopped_run)
    everything = _skipped(stopped_run)
    shards = [_skipped(stopped_run, "--shard", f"{i}/3") for i in (1, 2, 3)]
    assert len(everything) == 11 and sorted(sum(shards, [])) == sorted(everything)
    assert [len(s) for s in shards] == [4, 4, 3]
    capsys.readouterr()
    with pytest.raises(SystemExit, match=r"--shard '4/3': expected I/N with 1 <= I <= N"):
        main(["check", "--shard", "4/3"])


def test_jobs_are_capped_by_the_tests_selected(stopped_run, monkeypatch, capsys):
    """``--jobs 8`` starts no more workers than ``-k`` and ``--shard`` leave tests (here 2 of
    the 3 that ``-k`` selects); without a selection ``--jobs`` stands (nothing is counted)."""
    monkeypatch.chdir(stopped_run)
    few = "test_single_visible_key or test_seed_examples"
    argv = ["--profile", "dev", "--jobs", "8", "-k", few, "--shard", "1/2", "--json", "cap.json"]
    main(["check", "--impl", "./raises.py", *argv])
    report = json.loads(Path("cap.json").read_text())
    selected = report["tests_run"] + len(report["skipped"]) + report["xfailed"]
    assert 1 < selected < 8, report
    assert report["workers"] == selected, report
    capsys.readouterr()
    args = type("Args", (), {"keyword": None, "shard": None, "impl": "./raises.py"})()
    assert check._workers(args, 8) == 8


def test_check_imports_a_package_folder_and_names_a_plain_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_pkg").mkdir()
    (tmp_path / "my_pkg" / "__init__.py").write_text(RAISES, encoding="utf-8")
    (tmp_path / "plain").mkdir()
    main(
        [
            "check",
            "--impl",
            "./my_pkg",
            "--profile",
            "dev",
            "--jobs",
            "1",
            "-k",
            "test_single_visible_key",
            "--json",
            "pkg.json",
        ]
    )
    failures = json.loads((tmp_path / "pkg.json").read_text())["failures"]
    assert failures and all("not written yet" in f["message"] for f in failures), failures
    assert failures[0]["subject_frame"].endswith("__init__.py:7 in attention")
    main(["check", "--impl", "./plain", "--jobs", "1", "--json", "plain.json"])
    error = json.loads((tmp_path / "plain.json").read_text())["error"]
    assert "plain is a folder without __init__.py; name a .py file or a package" in error


class _Terminal:
    """A standard-error stand-in that is a terminal of ``columns`` columns."""

    def __init__(self):
        self.text = ""

    def isatty(self):
        return True

    def fileno(self):
        raise OSError("not a real terminal")  # os.get_terminal_size fails: 80 columns

    def write(self, text):
        self.text += text

    def flush(self):
        pass


def test_the_header_names_the_subject_and_the_kernel_sizes():
    from attnprops.ci.progress import Progress

    terminal = _Terminal()
    Progress(terminal)({"event": "collected", "tests": 2, "subject": "S", "kernel_sizes": "K"})
    lines = terminal.text.replace("\r\x1b[K", "").splitlines()  # a terminal's line clears
    assert lines == ["attnprops check: 2 property tests", "  subject: S", "  kernel sizes: K"]


def test_the_status_line_fits_the_terminal_and_keeps_its_counts():
    from attnprops.ci.progress import Progress

    terminal = _Terminal()
    progress = Progress(terminal)
    progress({"event": "collected", "tests": 64})
    for n in range(6):
        progress({"event": "started", "nodeid": f"properties/test_x.py::test_a_long_name_{n}"})
    status = terminal.text.rsplit("\r\x1b[K", 1)[-1]
    assert status.startswith("  [0/64 done, 0 failed] running: test_a_long_name_0"), status
    assert len(status) < 80 and status.endswith("..."), status


def test_an_explicit_example_failure_says_how_to_see_a_generated_one(
    stopped_run, capsys, monkeypatch
):
    """In profile ``ci`` a failing hand-written ``@example`` stops the property before any
    generated input: the summary says so and names the profile that skips them."""
    monkeypatch.chdir(stopped_run)
    _check_raises("-k", "test_output_matches_oracle", profile="ci")
    out = capsys.readouterr().out
    # Hypothesis 6.155 writes "Falsifying explicit example", 6.170 (pinned) "Failing ..."
    assert re.search(r"(Falsifying|Failing) explicit example: test_output_matches_oracle\(", out), (
        out
    )
    assert (
        "(a hand-written @example; --profile mutation skips those and shows a generated, "
        "shrunk counterexample)"
    ) in out, out


def test_a_parametrized_property_counts_once_per_id(stopped_run, capsys, monkeypatch):
    """Each id of a parametrized property is one test, in the summary line, its
    ``violated:`` lines and the JSON, as pytest and the JUnit file count them. (Profile
    mutation: one counterexample per id is all it needs, in half dev's time.)"""
    monkeypatch.chdir(stopped_run)
    code = _check_raises(
        "-k",
        "test_broadcast_mask_equals_expanded",
        "--json",
        "ids.json",
        "--junitxml",
        "ids.xml",
        profile="mutation",
    )
    out = capsys.readouterr().out
    ids = re.findall(r"^  violated: test_broadcast_mask_equals_expanded\[(.+?)\]: ", out, re.M)
    assert code == 1 and len(ids) == len(set(ids)) == 5, out
    assert out.splitlines()[-1] == "0 passed, 5 failed", out
    assert json.loads((stopped_run / "ids.json").read_text())["failed"] == 5
    suite = ET.parse(stopped_run / "ids.xml").getroot().find("testsuite")
    assert int(suite.get("failures")) + int(suite.get("errors")) == 5


def test_an_empty_shard_alone_passes_and_says_so(stopped_run, capsys, monkeypatch):
    """A CI matrix wider than the selection has empty shards: they pass, also when the
    selection is a -k one; a -k that selects nothing in any shard still fails."""
    monkeypatch.chdir(stopped_run)
    code = _check_raises("--shard", "999/1000", profile="ci")
    assert code == 0
    assert (
        "no property test was selected by --shard '999/1000': nothing ran"
        in capsys.readouterr().out
    )
    assert _check_raises("-k", "test_kv_cache", "--shard", "999/1000", profile="ci") == 0
    out = capsys.readouterr().out
    assert "selected by -k 'test_kv_cache' and --shard '999/1000': nothing ran" in out
    assert "in any shard" not in out
    assert _check_raises("-k", "no_such_property_zzz", "--shard", "1/2", profile="ci") == 1
    assert "-k 'no_such_property_zzz' selects no property test in any shard" in (
        capsys.readouterr().out
    )


def test_the_suite_run_reads_only_its_own_pytest_configuration(tmp_path):
    """The runs attnprops check starts take their pytest configuration from ci/suite_run.ini
    (-c), and no value of theirs stands alone where pytest would read it as a path: a
    subject ``./dir/sub.py`` beside a project's pyproject.toml made pytest pick that file
    (the common folder of the suite and the subject), whose filterwarnings turned the
    subject's RuntimeWarnings into errors."""
    from attnprops.ci.suite_runner import SUITE_RUN_INI
    from attnprops.ci.suite_runner import _pytest_args

    args = _pytest_args(
        "./dir/sub.py", tmp_path / "r.json", ["test_x"], 2, "ci", keyword="not slow"
    )
    ini = Path(args[args.index("-c") + 1])
    assert ini == SUITE_RUN_INI and ini.is_file()
    lines = [line.strip() for line in ini.read_text().splitlines()]
    assert [line for line in lines if line and not line.startswith("#")] == ["[pytest]"]
    takes_value = {"-c", "-p", "-n", "--attn-tests"}
    positional = [
        a for k, a in enumerate(args) if not a.startswith("-") and args[k - 1] not in takes_value
    ]
    assert positional == [args[0]] and args[0].endswith("properties"), args


RECORDS = """\
import hashlib
from pathlib import Path

import numpy as np

from attnprops.impl import attention as _attention

ATTNPROPS_CAPABILITIES = {"dtypes": ("float64",), "kv_cache": False, "kv_cache_bytes": False}


def attention(query, key, value, **options):
    with open(Path(__file__).with_name("seen.txt"), "a") as seen:
        seen.write(hashlib.sha256(np.ascontiguousarray(query).tobytes()).hexdigest() + "\\n")
    return _attention(query, key, value, **options)
"""


def test_a_seed_draws_the_same_examples_again(tmp_path, monkeypatch, capsys):
    """``--seed N`` under a random profile: two runs with one seed give the subject the same
    queries in the same order, another seed other queries, and the JSON and the summary
    line name the seed; a derandomized profile and an example database refuse a seed (it
    would be ignored, or turn the database off)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "records.py").write_text(RECORDS, encoding="utf-8")
    seen = tmp_path / "seen.txt"

    def queries(seed: str) -> list[str]:
        seen.unlink(missing_ok=True)
        argv = ["--impl", "./records.py", "--profile", "dev", "--jobs", "1", "--seed", seed]
        code = main(["check", *argv, "-k", "test_single_visible_key", "--json", "s.json"])
        assert code == 0 and json.loads((tmp_path / "s.json").read_text())["seed"] == int(seed)
        assert f"profile dev, seed {seed}\n" in capsys.readouterr().out
        return seen.read_text().split()

    first = queries("5")
    assert len(first) >= 10 and queries("5") == first
    assert queries("6") != first
    capsys.readouterr()
    with pytest.raises(SystemExit, match=r"--seed 5: profile 'ci' is derandomized"):
        main(["check", "--profile", "ci", "--seed", "5"])
    monkeypatch.setenv("ATTNPROPS_DATABASE", f"dir:{tmp_path / 'db'}")
    with pytest.raises(SystemExit, match=r"--seed 5 with ATTNPROPS_DATABASE set: a seeded run"):
        main(["check", "--profile", "dev", "--seed", "5"])
    with pytest.raises(SystemExit) as stop:
        main(["check", "--profile", "dev", "--seed", "-1"])
    assert stop.value.code == 2 and "invalid seed" in capsys.readouterr().err


def test_a_stopped_run_says_when_other_workers_failed_too():
    """-x under xdist: the other workers finish the properties they had started, so a
    summary can read 2 failed after stopping at 1; the note says where the second came from."""
    from attnprops.ci.check import _stop_note

    assert _stop_note(None, False, 3) == ""
    assert _stop_note(1, False, 0) == ""
    assert _stop_note(1, True, 1) == " (stopped after 1 failing: -x/--maxfail)"
    assert _stop_note(1, True, 2) == (
        " (stopped after 1 failing: -x/--maxfail; 1 more in properties other workers had started)"
    )
