"""``attnprops audit --compare``: the committed reference, what a comparison reports, and the
folders the audit refuses to write."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attnprops.ci.audit import compare as comparing
from attnprops.ci.audit import files
from attnprops.ci.audit import schema
from attnprops.ci.tests.conftest import read_csv
from attnprops.ci.tests.conftest import run_cli

ROOT = files.ROOT


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
    header = "query," + ",".join(f"key_{i}" for i in range(len(cells)))
    for path, column in ((fresh, 0), (ref, 1)):
        row = ",".join(cell[column] for cell in cells)
        path.write_text(f"{header}\n0,{row}\n", encoding="utf-8")
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
