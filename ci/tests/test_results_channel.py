"""The structured result channel (properties/results.py): every distinct counterexample of
every failing property reaches attnprops check and attnprops mutants, with the subject's
frame, and subjects are found from the caller's folder or by file path."""

from __future__ import annotations

import os
import textwrap

from attnprops.ci.suite_runner import run_suite
from attnprops.properties.results import BaseExceptionGroup
from attnprops.properties.results import failures_of

TWO_BUGS = textwrap.dedent("""\
    from attnprops import impl
    from attnprops.impl import KVCache, attention_weights, cached_attention, kv_cache_bytes

    def attention(query, key, value, **kwargs):
        if key.shape[-1] % 2 and float(query.reshape(-1)[0]) >= 0:
            raise RuntimeError("bug one: crashes on an odd head_dim, first query entry >= 0")
        out = impl.attention(query, key, value, **kwargs)
        return out * 1.5 if key.shape[-1] % 2 else out  # bug two: wrong values, odd head_dim
""")
# Both bugs need an odd head_dim (most draws; the explicit examples, head_dim 2 and 4, would
# stop the property before any generated input) and split on the sign of the first query
# entry. Whether the ten or so inputs Hypothesis tries after its first failure meet both is a
# matter of the draws (over 8 random seeds of the thorough profile, half the runs found both,
# as for a split on the query length's parity): under the ci profile's pinned seed
# (properties.draws.pin_seeds) this split meets both; a change of the strategies may need
# another. The crash is on line 6 of the file.


def _raise(message: str, note: str):
    exc = AssertionError(message)
    exc.__notes__ = [
        f"Falsifying example: test_x(\n    case={note},\n)",
        "Draw 1 (n): 3",
        "case: a note",
    ]  # as Hypothesis adds them (add_note from Python 3.11)
    return exc


def test_every_failure_of_an_exception_group_keeps_its_counterexample():
    group = BaseExceptionGroup(
        "Hypothesis found 2 distinct failures", [_raise("first", "1"), ValueError("second crash")]
    )
    first, second = failures_of(group, ())
    assert first == {
        "type": "AssertionError",
        "violation": True,
        "message": "first",
        "counterexample": "Falsifying example: test_x(\n    case=1,\n)\nDraw 1 (n): 3",
        "explicit": False,
        "notes": ["case: a note"],
        "subject_frame": "",
    }
    assert (second["type"], second["violation"], second["counterexample"]) == (
        "ValueError",
        False,
        "",
    )


def test_subject_with_two_bugs_shows_both_counterexamples_and_its_frame(tmp_path):
    """One property, two distinct bugs: both come back, each with its own shrunk
    counterexample; the crash names the subject's file and line. The subject is a file
    given by path, outside this repository."""
    path = tmp_path / "two_bugs.py"
    path.write_text(TWO_BUGS, encoding="utf-8")
    result = run_suite(
        str(path), tmp_path / "work", tests=["test_output_matches_oracle"], profile="ci"
    )
    assert result.returncode == 1, result.output_tail
    failures = [f for f in result.failures if f.test == "test_output_matches_oracle"]
    assert len(failures) == 2, failures
    messages = sorted(f.message for f in failures)
    assert "bug one" in messages[0] and "outside the bound" in messages[1], messages
    assert all(f.is_property_violation for f in failures)
    assert all(
        f.falsifying_example.startswith(("Falsifying example:", "Failing test case:"))
        for f in failures
    ), failures
    crash = next(f for f in failures if "bug one" in f.message)
    assert crash.subject_frame == f"{path}:6 in attention", crash.subject_frame


def test_a_module_in_the_callers_folder_imports(tmp_path, monkeypatch):
    """attnprops check --impl NAME from the folder holding NAME.py (no PYTHONPATH), and
    PYTHONPATH=. meaning the caller's folder, not this repository."""
    (tmp_path / "here_subject.py").write_text(
        "from impl import *  # noqa\nfrom impl import attention\n", encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    for pythonpath in (None, "."):
        if pythonpath is None:
            monkeypatch.delenv("PYTHONPATH", raising=False)
        else:
            monkeypatch.setenv("PYTHONPATH", pythonpath)
        result = run_suite(
            "here_subject",
            tmp_path / "work",
            tests=["test_single_visible_key_returns_its_value"],
            profile="dev",
        )
        assert result.returncode == 0 and result.tests_run == 1, result.output_tail
    assert os.getcwd() == str(tmp_path)


def test_robustness_tier_failures_are_reported_apart(tmp_path):
    """A robustness-tier property the subject fails (a non-strict xfail under the default
    --attn-robustness=report) is counted as xfailed and listed apart, not as a failure."""
    import json

    from attnprops.ci.suite_runner import _read_results
    from attnprops.properties.options import ROBUSTNESS_REASON

    failure = {
        "type": "PropertyViolation",
        "violation": True,
        "message": "inf",
        "counterexample": "Falsifying example: test_r(\n    case=1,\n)",
        "explicit": False,
        "notes": [],
        "subject_frame": "",
    }
    records = [
        {
            "nodeid": "a::test_r",
            "test": "test_r",
            "outcome": "xfailed",
            "when": "call",
            "reason": f"{ROBUSTNESS_REASON}: why",
            "failures": [failure],
        },
        {
            "nodeid": "a::test_known",
            "test": "test_known",
            "outcome": "xfailed",
            "when": "call",
            "reason": "known deviation of x: y",
            "failures": [failure],
        },
        {
            "nodeid": "a::test_p",
            "test": "test_p",
            "outcome": "passed",
            "when": "call",
            "reason": "",
            "failures": [],
        },
    ]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    counts = _read_results(path)
    robust = counts.pop("robustness")
    assert counts == dict(tests_run=1, skipped=0, xfailed=2, failures=[], skips=[], examples={})
    assert [(f.test, f.falsifying_example) for f in robust] == [
        ("test_r", "Falsifying example: test_r(\n    case=1,\n)")
    ]


def test_example_counts(tmp_path):
    """Each record carries the examples its property ran (the plugin wraps Hypothesis's
    inner test): a passing derandomized property without explicit examples (profile
    mutation) runs exactly its settings' max_examples (100; an oracle-backed one half of
    that, profiles.COSTLY_MARKERS); a failing one, the examples up to its first failure."""
    from attnprops.properties.profiles import ORACLE_FRACTION

    result = run_suite(
        "attnprops.impl",
        tmp_path / "work",
        profile="mutation",
        tests=["test_single_visible_key_returns_its_value", "test_weight_rows_sum_to_one"],
    )
    assert result.returncode == 0, result.output_tail
    assert result.examples == {
        "test_single_visible_key_returns_its_value": 100,
        "test_weight_rows_sum_to_one": 100 // ORACLE_FRACTION,
    }
    killed = run_suite(
        "attnprops.mutants.column_softmax",
        tmp_path / "work",
        profile="mutation",
        tests=["test_weight_rows_sum_to_one"],
    )
    first = killed.examples["test_weight_rows_sum_to_one"]
    assert killed.returncode == 1 and 1 <= first < 100 // ORACLE_FRACTION, killed.examples
