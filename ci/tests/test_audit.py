"""``attnprops audit``: the checks, the CSVs, audit.json and its schema, --compare, refusals."""

from __future__ import annotations

import csv
import hashlib
import inspect
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attnprops.ci.audit import compare as comparing
from attnprops.ci.audit import files, schema
from attnprops.ci.tests.conftest import run_cli
from attnprops.oracle import lab, rules
from attnprops.oracle.violations import examples

ROOT = files.ROOT


def read_csv(path) -> list[list[str]]:
    """All rows of a CSV file (header first)."""
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(f))


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


# --- reference and --compare ---------------------------------------------------------------


def test_compare_with_the_committed_reference_passes(tmp_path):
    run = run_cli(
        ["audit", "--out", str(tmp_path), "--compare", str(comparing.REFERENCE_DIR)], tmp_path
    )
    assert run.rc == 0, "\n".join(line for line in run.lines if line.startswith(("DIFF", "FAIL")))
    assert " 0 differences (tolerance abs 1e-15 + rel 1e-12 * |reference|)" in run.out
    assert run.lines[-1] == "ATTENTION_AUDIT_OK"
    # An untouched clone is silent: no source notes (nor any other) when every number matches,
    # however stale the reference's source hashes are.
    assert [line for line in run.lines if line.startswith("note:")] == []
    compare = run.audit_json()["compare"]
    assert compare["passed"] and compare["cells_compared"] > 1000
    assert compare["differences"] == [] and compare["notes"] == []
    assert compare["reference"] == str(comparing.REFERENCE_DIR)
    assert schema.validate_audit(run.audit_json()) == []


def _copy_reference(tmp_path):
    copy = tmp_path / "ref-copy"
    shutil.copytree(comparing.REFERENCE_DIR, copy)
    return copy


def _edit_cell(path, line: int, column: str, new: str) -> str:
    rows = read_csv(path)
    col = rows[0].index(column)
    old = rows[line - 1][col]
    rows[line - 1][col] = new
    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    return old


def _edit_source_hash(ref, path: str, digest: str) -> None:
    """Set (or add) ``sources[path]`` in the reference copy's audit.json."""
    doc = json.loads((ref / "audit.json").read_text(encoding="utf-8"))
    doc["sources"][path] = digest
    (ref / "audit.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def test_compare_fails_naming_the_broken_cell(tmp_path, monkeypatch):
    # A ./reference in the current folder wins over the package's for "--compare reference".
    ref = tmp_path / "reference"
    shutil.copytree(comparing.REFERENCE_DIR, ref)
    old = _edit_cell(ref / "example_weights.csv", 3, "key_1", "0.7211")
    assert old == "0.72111517802286307"
    _edit_source_hash(ref, "oracle/rules/attention.py", "0" * 64)
    _edit_source_hash(ref, "oracle/removed_since.py", "1" * 64)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    run = run_cli(["audit", "--out", str(out), "--compare", "reference"], out)
    assert run.rc == 1
    assert (
        "DIFF example_weights.csv: line 3 (query=1), column key_1: fresh "
        "0.72111517802286307 != reference 0.7211"
    ) in run.out
    n = len(run.audit_json()["checks"])
    assert run.lines[-1].startswith(
        f"ATTENTION_AUDIT_FAILED: all {n} checks passed, the comparison failed: compare "
    )
    assert "example_weights.csv: line 3 (query=1), column key_1" in run.lines[-1]
    assert "ATTENTION_AUDIT_OK" not in run.out
    compare = run.audit_json()["compare"]
    assert compare["passed"] is False and compare["reference"] == "reference"
    assert (
        f"compared {compare['cells_compared']} cells with reference: 1 differences" in run.out
    ) and compare["cells_compared"] > 1000
    assert compare["differences"] == [
        "example_weights.csv: line 3 (query=1), column key_1: fresh 0.72111517802286307 != "
        "reference 0.7211 (|diff| = 1.52e-05 > 1e-15 + 1e-12*|ref|)"
    ]
    # With a difference, the sources changed since the reference are noted as a hint.
    assert (
        "note: source oracle/rules/attention.py changed since the reference was made" in run.lines
    )
    assert "note: source oracle/removed_since.py changed since the reference was made" in run.lines
    ref_sources = json.loads((ref / "audit.json").read_text(encoding="utf-8"))["sources"]
    assert compare["notes"] == comparing.source_changes(ref_sources)
    assert [line for line in run.lines if line.startswith("note: ")] == [
        f"note: {n}" for n in compare["notes"]
    ]
    assert schema.validate_audit(run.audit_json()) == []


def test_compare_fails_on_a_broken_batch_cell_and_a_missing_file(tmp_path):
    ref = _copy_reference(tmp_path)
    _edit_cell(ref / "batch_cached_output.csv", 20, "dim_3", "1e-3")
    (ref / "kv_bytes.csv").unlink()
    out = tmp_path / "out"
    run = run_cli(["audit", "--out", str(out), "--compare", str(ref)], out)
    assert run.rc == 1
    assert (
        "DIFF batch_cached_output.csv: line 20 (batch=0, head=2, query=4), column dim_3" in run.out
    )
    assert "DIFF kv_bytes.csv: written by this audit but missing from the reference" in run.out


def test_compare_tolerates_last_bit_differences(tmp_path):
    ref = _copy_reference(tmp_path)
    old = _edit_cell(ref / "example_context.csv", 4, "dim_0", "0")
    nudged = np.nextafter(float(old), 0.0)  # one ulp away
    _edit_cell(ref / "example_context.csv", 4, "dim_0", "%.17g" % nudged)
    # A changed source hash alone is no note while every number agrees.
    _edit_source_hash(ref, "oracle/rules/attention.py", "0" * 64)
    out = tmp_path / "out"
    run = run_cli(["audit", "--out", str(out), "--compare", str(ref)], out)
    assert run.rc == 0 and run.lines[-1] == "ATTENTION_AUDIT_OK"
    assert [line for line in run.lines if line.startswith("note:")] == []
    assert run.audit_json()["compare"]["notes"] == []


def test_compare_with_a_missing_reference_says_it_is_missing(tmp_path):
    missing = tmp_path / "no-such-reference"
    out = tmp_path / "out"
    run = run_cli(["audit", "--out", str(out), "--compare", str(missing)], out)
    assert run.rc == 1
    n = len(run.audit_json()["checks"])
    assert [
        line for line in run.lines if line.startswith("DIFF")
    ] == []  # said once, in the last line
    assert run.lines[-1] == (
        f"ATTENTION_AUDIT_FAILED: reference folder {missing} is missing "
        f"(--compare {missing}), nothing was compared; all {n} checks "
        "passed"
    )
    assert " 0 of " not in run.lines[-1] and "ATTENTION_AUDIT_OK" not in run.out
    compare = run.audit_json()["compare"]
    assert compare["passed"] is False and compare["cells_compared"] == 0
    assert compare["differences"] == [f"{missing}: reference folder is missing"]
    assert compare["notes"] == []
    assert run.audit_json()["passed"] is False
    assert schema.validate_audit(run.audit_json()) == []


def test_resolve_reference(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # No ./reference here: the literal name means the package's reference.
    for name in ("reference", "reference/", "./reference", Path("reference")):
        assert comparing.resolve_reference(name) == comparing.REFERENCE_DIR, name
    # Any other missing path stays as given, so the comparison reports it missing.
    assert comparing.resolve_reference("elsewhere/reference") == Path("elsewhere/reference")
    assert comparing.resolve_reference("refs") == Path("refs")
    # A folder relative to the current one wins.
    (tmp_path / "reference").mkdir()
    assert comparing.resolve_reference("reference") == Path("reference")
    assert comparing.resolve_reference("./reference/") == Path("reference")
    assert comparing.REFERENCE_DIR == files.ROOT / "reference" and comparing.REFERENCE_DIR.is_dir()


def test_source_changes_names_changed_removed_and_new_files():
    fresh = {"impl/a.py": "1" * 64, "impl/new.py": "2" * 64}
    ref = {"impl/a.py": "3" * 64, "impl/gone.py": "4" * 64}
    assert comparing.source_changes(ref, fresh) == [
        "source impl/a.py changed since the reference was made",
        "source impl/gone.py changed since the reference was made",
        "source impl/new.py is new since the reference was made",
    ]
    assert comparing.source_changes(fresh, dict(fresh)) == []


def test_compare_cell_rule(tmp_path):
    """|fresh - ref| <= 1e-15 + 1e-12 * |ref| per number; infinities and text exactly."""
    fresh, ref = tmp_path / "fresh.csv", tmp_path / "ref.csv"
    cells = [
        ("-inf", "-inf", None),
        ("-inf", "0", "non-finite differs"),
        ("1", "1.0000000000005", None),
        ("1", "1.00000000001", "|diff|"),
        ("0", "1e-16", None),
        ("MHA", "GQA", "text differs"),
    ]
    fresh.write_text(
        "query,"
        + ",".join(f"key_{i}" for i in range(len(cells)))
        + "\n0,"
        + ",".join(a for a, _, _ in cells)
        + "\n",
        encoding="utf-8",
    )
    ref.write_text(
        "query,"
        + ",".join(f"key_{i}" for i in range(len(cells)))
        + "\n0,"
        + ",".join(b for _, b, _ in cells)
        + "\n",
        encoding="utf-8",
    )
    count, differences = comparing.compare_csv(fresh, ref)
    assert count == len(cells) + 1
    wanted = [(i, why) for i, (_, _, why) in enumerate(cells) if why]
    assert len(differences) == len(wanted), differences
    for (i, why), text in zip(wanted, differences):
        assert text.startswith(f"ref.csv: line 2 (query=0), column key_{i}: fresh "), text
        assert f"({why}" in text, text


@pytest.mark.parametrize("sub", ["", "nested/deeper"])
def test_refuses_to_write_into_the_reference(sub, tmp_path):
    target = comparing.REFERENCE_DIR / sub if sub else comparing.REFERENCE_DIR
    before = sorted((p.name, p.stat().st_mtime_ns) for p in comparing.REFERENCE_DIR.iterdir())
    run = run_cli(["audit", "--out", str(target)], tmp_path)
    assert run.rc == 2
    assert "refusing to write into" in run.err and "reference folder" in run.err
    assert "--out results" in run.err
    assert not (comparing.REFERENCE_DIR / "nested").exists()
    assert (
        sorted((p.name, p.stat().st_mtime_ns) for p in comparing.REFERENCE_DIR.iterdir()) == before
    )


def test_refuses_relative_reference_and_the_compare_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    run = run_cli(["audit", "--out", "reference/."], tmp_path)
    assert run.rc == 2 and "refusing to write into reference:" in run.err
    ref = _copy_reference(tmp_path)
    run = run_cli(["audit", "--out", str(ref), "--compare", str(ref)], tmp_path)
    assert run.rc == 2 and "refusing to write into" in run.err


def test_reference_folder_is_complete():
    names = {p.name for p in comparing.REFERENCE_DIR.iterdir()}
    assert "audit.json" in names and "README.md" in names
    doc = __import__("json").loads((comparing.REFERENCE_DIR / "audit.json").read_text("utf-8"))
    assert schema.validate_audit(doc) == [] and doc["passed"] is True
    assert set(doc["files"]) == {n for n in names if n.endswith(".csv")}


def test_command_line_entry_point_from_another_folder_finds_the_reference(tmp_path):
    # Started outside the repository, "--compare reference" is the package's reference.
    assert not (tmp_path / "reference").exists()
    proc = subprocess.run(
        [sys.executable, "-m", "attnprops.ci.cli", "audit", "--out", "X", "--compare", "reference"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-2000:])
    lines = proc.stdout.splitlines()
    doc = json.loads((tmp_path / "X" / "audit.json").read_text(encoding="utf-8"))
    assert lines[-1] == "ATTENTION_AUDIT_OK"
    assert lines[-2] == (
        f"compared {doc['compare']['cells_compared']} cells with "
        f"{comparing.REFERENCE_DIR}: 0 differences (tolerance abs 1e-15 + rel "
        "1e-12 * |reference|)"
    )
    assert doc["compare"]["cells_compared"] > 1000
    assert [line for line in lines if line.startswith(("note:", "DIFF", "FAIL"))] == []
    assert doc["passed"] is True and doc["oracle_digits"] == 50
    assert doc["compare"]["reference"] == str(comparing.REFERENCE_DIR)
    assert doc["compare"]["passed"] and doc["compare"]["notes"] == []
    assert not (tmp_path / "reference").exists()
