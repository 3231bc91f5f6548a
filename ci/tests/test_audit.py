"""``attnprops audit``: the checks, the CSVs, audit.json and its schema (--compare and the
reference: test_audit_compare.py)."""

from __future__ import annotations

import hashlib
import inspect
import math
import sys

import numpy as np
import pytest

from attnprops.ci.audit import files
from attnprops.ci.audit import schema
from attnprops.ci.tests.conftest import read_csv
from attnprops.ci.tests.conftest import run_cli
from attnprops.oracle import lab
from attnprops.oracle import rules
from attnprops.oracle.violations import examples

ROOT = files.ROOT


# --- the run and its checks ------------------------------------------------------------------


def test_audit_passes_and_prints_ok_last(audit_run):
    assert audit_run.rc == 0, audit_run.out[-3000:]
    assert audit_run.lines[-1] == "ATTENTION_AUDIT_OK"
    assert "FAIL " not in audit_run.out
    assert "PASS mutants.reversed_mask.forbidden_weight: measured 0.87256911" in audit_run.out
    assert "PASS decode.offset0.max_error.impl: measured 1.43901522" in audit_run.out


def _checks(audit_run) -> dict[str, dict]:
    return {c["name"]: c for c in audit_run.audit_json()["checks"]}


def test_published_figures_are_checked_with_stated_tolerances(audit_run):
    """Each figure of the lab (oracle.lab) is checked within half a unit of its last printed
    decimal: 5e-7 for the 6-decimal figures, 5e-4 for the 3-decimal scores, 0.005 for the
    2-decimal GiB."""
    checks = _checks(audit_run)
    expected = {
        "example.weights.impl_vs_published": lab.WEIGHTS,
        "example.context.oracle_vs_published": lab.CONTEXT,
        "example.scaled_scores.numpy_vs_published": lab.SCALED_SCORES,
        "decode.offset2.impl": lab.DECODE,
        "decode.kv_cache.impl": lab.DECODE,
        "decode.offset0.oracle": lab.OFFSET_ZERO_DECODE,
        "decode.offset0.max_error.oracle": lab.OFFSET_ZERO_MAX_ERROR,
        "mutants.reversed_mask.forbidden_weight": lab.REVERSED_MASK_FORBIDDEN_WEIGHT,
        "mutants.column_softmax.row_sum_error": lab.COLUMN_SOFTMAX_ROW_SUM_ERROR,
        "kv_bytes.weights_7e9_fp16_gib": lab.WEIGHTS_GIB,
    }
    assert {f.tolerance for f in expected.values()} == {5e-7, 5e-4, 0.005}
    for name, figure in expected.items():
        value, tol = figure.value, figure.tolerance
        check = checks[name]
        assert check["passed"] and check["comparison"] == "abs", name
        assert np.allclose(check["expected"], value, rtol=0, atol=1e-12), name
        assert check["tolerance"] == pytest.approx(tol), name
        assert np.all(np.abs(np.asarray(check["measured"]) - np.asarray(value)) <= tol), name
    masked = checks["example.masked_scores.numpy_vs_published"]["measured"]
    assert masked[0][1:] == ["-inf", "-inf"] and masked[1][2] == "-inf"


def test_impl_vs_oracle_errors_are_a_few_ulps(audit_run):
    checks = _checks(audit_run)
    for name in (
        "oracle.scaled_scores.max_abs_error",
        "oracle.weights.max_abs_error",
        "oracle.context.max_abs_error",
        "batch.full_vs_oracle",
        "batch.cached_vs_oracle",
        "batch.cached_vs_full",
    ):
        check = checks[name]
        assert check["passed"], name
        assert 0 <= check["measured"] <= check["tolerance"] <= 4 * 2 * np.spacing(2.0), name
    # The lab reports about 1.1e-16 for the scores.
    assert checks["oracle.scaled_scores.max_abs_error"]["measured"] < 2.3e-16
    assert "1.1e-16" in checks["oracle.scaled_scores.max_abs_error"]["note"]


def test_the_batch_inputs_are_recorded(audit_run):
    inputs = audit_run.audit_json()["inputs"]["batch"]
    assert (
        inputs["seed"],
        inputs["batch"],
        inputs["heads"],
        inputs["length"],
        inputs["head_dim"],
        inputs["value_dim"],
    ) == (42, 2, 3, 7, 4, 5)


def test_every_error_class_of_the_rulebook_is_rejected(audit_run):
    rejects = [c for c in audit_run.audit_json()["checks"] if c["group"] == "rejects"]
    classes = {rules.AttentionInputError.__name__} | {
        cls.__name__
        for _, cls in inspect.getmembers(rules, inspect.isclass)
        if issubclass(cls, rules.AttentionInputError)
    }
    assert classes <= {c["expected"]["error"] for c in rejects}
    for c in rejects:
        assert c["passed"], c["name"]
        assert c["measured"]["impl"]["error"] == c["expected"]["error"]
        assert c["measured"]["impl"]["message"] == c["measured"]["oracle"]["message"]
        assert c["measured"]["impl"]["message"]
    # one check per fixed example of the registry (oracle/violations.py), nothing else
    assert [c["name"] for c in rejects] == [f"rejects.{e.id.replace('-', '_')}" for e in examples()]
    # The printed line carries the error message.
    assert (
        "PASS rejects.query_start_too_large: impl QueryStartError, oracle QueryStartError: "
        "query_start: 1 is outside [0, Tk - Tq] = [0, 0]"
    ) in audit_run.out


def test_kv_byte_table_and_small_fp16_pair(audit_run):
    checks = _checks(audit_run)
    assert checks["kv_bytes.mha.bytes"]["measured"] == 5_242_880_000
    assert checks["kv_bytes.gqa.bytes"]["measured"] == 1_310_720_000
    assert checks["kv_bytes.mqa.bytes"]["measured"] == 163_840_000
    assert checks["kv_bytes.mha.gib"]["measured"] == 4.8828125
    assert checks["kv_bytes.small_fp16_pair.nbytes"]["measured"] == 480
    assert checks["kv_bytes.small_fp16_pair.formula"]["measured"] == 480
    rows = read_csv(audit_run.folder / "kv_bytes.csv")
    assert rows[0] == ["attention", "num_kv_heads", "bytes", "gib"]
    assert rows[1] == ["MHA", "32", "5242880000", "4.8828125"]
    assert [r[0] for r in rows[1:]] == ["MHA", "GQA", "MQA"]


def test_a_wrong_published_value_fails_naming_the_check(tmp_path, monkeypatch):
    monkeypatch.setattr(
        lab,
        "REVERSED_MASK_FORBIDDEN_WEIGHT",
        lab.REVERSED_MASK_FORBIDDEN_WEIGHT._replace(value=0.9),
    )
    run = run_cli(["audit", "--out", str(tmp_path)], tmp_path)
    assert run.rc == 1
    assert "ATTENTION_AUDIT_OK" not in run.out
    assert run.lines[-1].startswith("ATTENTION_AUDIT_FAILED: 1 of ")
    assert run.lines[-1].endswith("mutants.reversed_mask.forbidden_weight")
    assert "FAIL mutants.reversed_mask.forbidden_weight: measured 0.87256911" in run.out
    doc = run.audit_json()
    assert doc["passed"] is False and doc["failed"] == ["mutants.reversed_mask.forbidden_weight"]
    assert schema.validate_audit(doc) == []


def test_a_missing_mutant_fails_with_the_import_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "attnprops.mutants.column_softmax", None)  # import raises
    run = run_cli(["audit", "--out", str(tmp_path)], tmp_path)
    assert run.rc == 1
    assert "FAIL mutants.column_softmax.row_sum_error" in run.out
    assert (
        "import of attnprops.mutants.column_softmax halted" in run.out
    )  # ModuleNotFoundError text
    assert "mutants.column_softmax.row_sum_error" in run.lines[-1]


# --- files -------------------------------------------------------------------------------


def test_csvs_have_headers_and_17_significant_digits(audit_run):
    files = sorted(audit_run.folder.glob("*.csv"))
    assert {f.name for f in files} == set(audit_run.audit_json()["files"])
    assert {
        "example_scaled_scores.csv",
        "example_masked_scores.csv",
        "example_weights.csv",
        "example_context.csv",
        "reversed_mask_weights.csv",
        "column_softmax_weights.csv",
        "batch_cached_output.csv",
        "batch_full_output.csv",
        "decode_offset2_context.csv",
    } <= {f.name for f in files}
    seventeen = 0
    for path in files:
        rows = read_csv(path)
        head = rows[0]
        assert head[0] in ("query", "batch", "attention"), path.name
        assert all(len(r) == len(head) for r in rows), path.name
        values = [h for h in head if h.startswith(("key_", "dim_"))]
        if head[0] != "attention":
            assert values and head[-1] in (f"key_{len(values) - 1}", f"dim_{len(values) - 1}")
        for row in rows[1:]:
            for cell in row:
                if cell in ("MHA", "GQA", "MQA"):
                    continue
                x = float(cell)
                assert cell == "%.17g" % x, (path.name, cell)  # written with '%.17g'
                if math.isfinite(x) and x != 0:
                    digits = len(
                        cell.lower().split("e")[0].lstrip("-").replace(".", "").lstrip("0")
                    )
                    seventeen += digits == 17
                    assert digits <= 17
    assert seventeen > 100  # full precision, not rounded
    weights = read_csv(audit_run.folder / "example_weights.csv")
    assert weights[0] == ["query", "key_0", "key_1", "key_2"]
    assert weights[2] == ["1", "0.27888482197713688", "0.72111517802286307", "0"]
    masked = read_csv(audit_run.folder / "example_masked_scores.csv")
    assert masked[1][2:] == ["-inf", "-inf"]
    decode = read_csv(audit_run.folder / "decode_offset2_context.csv")
    assert decode[0] == ["query", "dim_0", "dim_1"] and decode[1][0] == "2"
    batch = read_csv(audit_run.folder / "batch_cached_output.csv")
    assert batch[0] == ["batch", "head", "query", "dim_0", "dim_1", "dim_2", "dim_3", "dim_4"]
    assert len(batch) == 1 + 2 * 3 * 7


def test_audit_json_validates_against_the_documented_schema(audit_run):
    doc = audit_run.audit_json()
    assert schema.validate_audit(doc) == []
    assert doc["schema_version"] == 1 and doc["passed"] is True and doc["failed"] == []
    assert set(doc["environment"]) >= {"python", "numpy", "mpmath", "gmpy2"}
    assert doc["environment"]["numpy"] == np.__version__
    for package in ("oracle", "impl", "mutants"):
        for path in (ROOT / package).rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            key = path.relative_to(ROOT).as_posix()
            assert doc["sources"][key] == hashlib.sha256(path.read_bytes()).hexdigest(), key
    for name, digest in doc["files"].items():
        assert hashlib.sha256((audit_run.folder / name).read_bytes()).hexdigest() == digest
    for check in doc["checks"]:
        assert check["passed"] is True
        assert check["comparison"] in ("abs", "equal", "raises")
        assert ("tolerance" in check) and ("expected" in check) and ("measured" in check)


def test_schema_validator_reports_what_is_wrong(audit_run):
    doc = audit_run.audit_json()
    broken = dict(doc)
    del broken["sources"]
    assert "audit.json: 'sources' is a required property" in schema.validate_audit(broken)
    broken = dict(doc, checks=[dict(doc["checks"][0], passed="yes")] + doc["checks"][1:])
    assert any("checks[0].passed" in e and "boolean" in e for e in schema.validate_audit(broken))
    broken = dict(doc, sources={"oracle/rules/attention.py": "not-a-hash"})
    assert any("does not match" in e for e in schema.validate_audit(broken))
    broken = dict(doc, failed=["example.weights.impl_vs_published"])
    assert any("audit.json.failed" in e for e in schema.validate_audit(broken))
    broken = dict(doc, checks=[dict(doc["checks"][0], tolerance=None)] + doc["checks"][1:])
    assert any("tolerance" in e for e in schema.validate_audit(broken))


def test_schema_is_a_valid_json_schema(audit_run):
    import jsonschema

    validator = jsonschema.Draft202012Validator
    validator.check_schema(schema.AUDIT_SCHEMA)
    validator(schema.AUDIT_SCHEMA).validate(audit_run.audit_json())
