"""``attnprops audit --compare REFERENCE_DIR``: the fresh CSVs and checks against a reference.

Numbers agree when ``|fresh - ref| <= COMPARE_ABS + COMPARE_REL * |ref|`` (abs 1e-15, rel
1e-12: cross-platform BLAS/libm may change the last bits, which the lab says must not be
required to match; ``numpy.isclose``'s rule, so equal infinities and NaNs agree), text cells
exactly. Every difference is named with its file, line, index values and column. The
reference's ``audit.json`` must name the same checks.

``--compare``'s argument is a path, taken relative to the current folder; only the literal
name ``reference`` (also ``reference/``, ``./reference``) falls back, when no such folder exists
there, to the reference shipped with the package (:data:`REFERENCE_DIR`), so ``--compare
reference`` works from any folder (:func:`resolve_reference`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from attnprops.ci.audit.files import ROOT
from attnprops.ci.audit.files import source_hashes

REFERENCE_DIR = ROOT / "reference"  # the committed reference, shipped with the package
REFERENCE_NAME = "reference"  # the --compare name that falls back to REFERENCE_DIR
COMPARE_ABS = 1e-15
COMPARE_REL = 1e-12
INDEX_COLUMNS = ("batch", "head", "query", "attention")  # named in a difference's location


def _read(path: Path) -> tuple[list[str], np.ndarray]:
    """Header and body (a 2-D array of the cells' text) of one of the audit's CSVs."""
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split(",")
    body = np.loadtxt(path, delimiter=",", skiprows=1, dtype=str, ndmin=2, encoding="utf-8")
    return header, body


def _numbers(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cells as float64 (NaN where a cell is text) and where they are numbers."""
    values = np.full(cells.shape, np.nan)
    numeric = np.zeros(cells.shape, dtype=bool)
    for index, text in np.ndenumerate(cells):
        try:
            values[index], numeric[index] = float(text), True
        except ValueError:
            pass
    return values, numeric


def compare_csv(
    fresh: Path, ref: Path, abs_tol: float = COMPARE_ABS, rel_tol: float = COMPARE_REL
) -> tuple[int, list[str]]:
    """Compare two CSV files cell by cell; return ``(cells compared, differences)``.

    Each difference names the file, the line (1 = header), the row's index values and the
    column: ``example_weights.csv: line 3 (query=1), column key_1: fresh 0.72111517802286307
    != reference 0.7211 (|diff| = 1.52e-05 > 1e-15 + 1e-12*|ref|)``.
    """
    name = ref.name
    try:
        (head_a, a), (head_b, b) = _read(fresh), _read(ref)
    except ValueError as exc:  # rows of different lengths
        return 0, [f"{name}: unreadable as a table ({exc})"]
    if head_a != head_b:
        return 0, [f"{name}: header {head_a} != reference {head_b}"]
    if a.shape != b.shape:
        return 0, [
            f"{name}: {a.shape[0]} data rows of {a.shape[1]} cells != reference's "
            f"{b.shape[0]} of {b.shape[1]}"
        ]
    (x, x_numeric), (y, y_numeric) = _numbers(a), _numbers(b)
    numbers = x_numeric & y_numeric
    agree = np.where(numbers, np.isclose(x, y, rtol=rel_tol, atol=abs_tol, equal_nan=True), a == b)
    index = [i for i, h in enumerate(head_b) if h in INDEX_COLUMNS]
    out = []
    for row, col in zip(*np.nonzero(~agree)):
        where = ", ".join(f"{head_b[i]}={b[row, i]}" for i in index)
        if not numbers[row, col]:
            why = "text differs"
        elif not (np.isfinite(x[row, col]) and np.isfinite(y[row, col])):
            why = "non-finite differs"
        else:
            why = f"|diff| = {abs(x[row, col] - y[row, col]):.3g} > {abs_tol:g} + {rel_tol:g}*|ref|"
        out.append(
            f"{name}: line {row + 2} ({where}), column {head_b[col]}: fresh "
            f"{a[row, col]} != reference {b[row, col]} ({why})"
        )
    return int(a.size), out


def source_changes(ref_sources: dict, fresh_sources: dict | None = None) -> list[str]:
    """Notes naming every source file whose SHA-256 differs from ``ref_sources`` (a reference
    audit.json's ``sources``) or that is new since the reference, sorted by path.

    ``fresh_sources`` defaults to :func:`.files.source_hashes` of the installed package. A
    file that the reference lists but that no longer exists counts as changed.
    """
    fresh_sources = source_hashes() if fresh_sources is None else fresh_sources
    notes = [
        f"source {path} changed since the reference was made"
        for path, digest in sorted(ref_sources.items())
        if fresh_sources.get(path) != digest
    ]
    notes += [
        f"source {path} is new since the reference was made"
        for path in sorted(set(fresh_sources) - set(ref_sources))
    ]
    return notes


def compare_dirs(
    fresh_dir: Path,
    ref_dir: Path,
    written: list[str],
    check_names: list[str],
    abs_tol: float = COMPARE_ABS,
    rel_tol: float = COMPARE_REL,
) -> dict:
    """Compare a fresh audit's CSVs (``written``) and check names with ``ref_dir``'s.

    Returns the ``compare`` object of audit.json; ``passed`` is true exactly when there are no
    ``differences``. A differing cell, a CSV present on one side only, a check named on one side
    only, a missing or unreadable reference ``audit.json`` and a missing ``ref_dir`` (the single
    difference ``"<ref_dir>: reference folder is missing"``) are differences.

    ``notes`` never fail the comparison: a check that failed in the reference itself is always
    noted; source files changed or new since the reference (:func:`source_changes`) are noted
    *only when there are differences*, as a hint to why the numbers differ. Design decision:
    the sources are edited far more often than the reference is regenerated (a refactoring, a
    new mutant or test does not move a number), so noting every stale hash would make an
    untouched clone that reproduces every number noisy; what the reference pins are the numbers
    and the set of checks, and both audit.json files keep their full ``sources``.
    """
    ref_dir = Path(ref_dir)
    differences, notes, cells = [], [], 0
    source_notes: list[str] = []
    if not ref_dir.is_dir():
        differences.append(
            f"{ref_dir}: reference folder is missing"
            + (" (a file of that name exists)" if ref_dir.exists() else "")
        )
    else:
        ref_files = sorted(p.name for p in ref_dir.glob("*.csv"))
        for name in sorted(set(ref_files) - set(written)):
            differences.append(f"{name}: in the reference but not written by this audit")
        for name in sorted(set(written) - set(ref_files)):
            differences.append(f"{name}: written by this audit but missing from the reference")
        for name in sorted(set(written) & set(ref_files)):
            n, diffs = compare_csv(fresh_dir / name, ref_dir / name, abs_tol, rel_tol)
            cells += n
            differences += diffs
        ref_json = ref_dir / "audit.json"
        if not ref_json.is_file():
            differences.append("audit.json: missing from the reference")
        else:
            try:
                ref_doc = json.loads(ref_json.read_text(encoding="utf-8"))
                ref_names = {c["name"] for c in ref_doc["checks"]}
                for n in sorted(ref_names - set(check_names)):
                    differences.append(f"audit.json: check {n} is in the reference but not run")
                for n in sorted(set(check_names) - ref_names):
                    differences.append(f"audit.json: check {n} is not in the reference")
                for n in ref_doc.get("failed", []):
                    notes.append(f"audit.json: check {n} failed in the reference itself")
                source_notes = source_changes(ref_doc.get("sources", {}))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                differences.append(f"audit.json: unreadable reference ({exc})")
    if differences:
        notes += source_notes
    return {
        "reference": str(ref_dir),
        "abs_tolerance": abs_tol,
        "rel_tolerance": rel_tol,
        "cells_compared": cells,
        "differences": differences,
        "notes": notes,
        "passed": not differences,
    }


def resolve_reference(name: str | Path) -> Path:
    """The folder ``--compare NAME`` compares with.

    ``NAME`` as a path (relative to the current folder) when it exists, or when it is anything
    but the literal :data:`REFERENCE_NAME` (``reference``, ``reference/``, ``./reference``): a
    missing explicit path is returned unchanged, so the comparison reports it missing. Only
    ``reference`` with no such folder here resolves to the package's :data:`REFERENCE_DIR`.
    """
    path = Path(name)
    if path.exists() or path != Path(REFERENCE_NAME):
        return path
    return REFERENCE_DIR


def inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or lies under it (both resolved)."""
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents
