"""What the audit writes besides its checks: the CSVs of its arrays and their provenance
(SHA-256 of every file, of every source under ``oracle/``, ``impl/``, ``mutants/``, the
versions used, the inputs).

CSV layout (:func:`array_rows`): a header row, index columns first (``batch``, ``head``,
``query`` = absolute query position), then one column per key position (``key_0, key_1,
...``) or per output component (``dim_0, ...``); every float written with ``'%.17g'`` (17
significant digits: round-trips binary64 exactly; ``-inf`` marks a hidden key). A table
(``header`` and ``labels``) has a text label first.
"""

from __future__ import annotations

import csv
import hashlib
import platform
from pathlib import Path

import numpy as np

from attnprops.oracle import lab

ROOT = Path(__file__).resolve().parents[2]  # the installed ``attnprops`` package folder
SOURCE_PACKAGES = ("oracle", "impl", "mutants")
CSV_FORMAT = "%.17g"


def array_rows(
    array: np.ndarray,
    *,
    columns: str | None = "key",
    query_positions=None,
    header=None,
    labels=None,
) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the CSV of ``array``.

    ``(T, N)``: ``query,<columns>_0..``; ``(B, H, T, N)``: ``batch,head,query,<columns>_0..``;
    ``query`` is the absolute position (``query_positions``, default ``0..T-1``). With
    ``header`` and ``labels`` (a table): the first column holds ``labels``, every other value
    is written with ``'%.17g'`` (integers exactly). Raises ``ValueError`` for another ndim.
    """
    if header is not None:
        rows = [
            [label] + [CSV_FORMAT % v for v in row] for label, row in zip(labels, array.tolist())
        ]
        return list(header), rows
    if array.ndim == 2:
        array = array[None, None]
        index = ["query"]
    elif array.ndim == 4:
        index = ["batch", "head", "query"]
    else:
        raise ValueError(f"cannot write a {array.ndim}-D array as CSV")
    B, H, T, N = array.shape
    positions = list(range(T)) if query_positions is None else list(query_positions)
    rows = []
    for b in range(B):
        for h in range(H):
            for t in range(T):
                ids = (
                    [str(positions[t])] if len(index) == 1 else [str(b), str(h), str(positions[t])]
                )
                rows.append(ids + [CSV_FORMAT % v for v in array[b, h, t].tolist()])
    return index + [f"{columns}_{j}" for j in range(N)], rows


def write_array_csv(path: Path, array: np.ndarray, **layout) -> None:
    """Write ``array`` as CSV (see :func:`array_rows`), ``\\n`` line endings."""
    head, rows = array_rows(array, **layout)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(head)
        writer.writerows(rows)


def sha256_file(path: Path) -> str:
    """SHA-256 hex digest of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def source_hashes(root: Path = ROOT) -> dict[str, str]:
    """SHA-256 of every file under ``oracle/``, ``impl/``, ``mutants/`` (``__pycache__`` and
    ``*.pyc`` excluded), keyed by POSIX path relative to ``root``, sorted."""
    hashes = {}
    for package in SOURCE_PACKAGES:
        base = root / package
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                hashes[path.relative_to(root).as_posix()] = sha256_file(path)
    return hashes


def environment() -> dict:
    """Versions of Python, NumPy, mpmath and gmpy2 (None when not installed), the mpmath
    backend and the platform."""
    import mpmath

    try:
        import gmpy2

        gmpy2_version = gmpy2.version()
    except ImportError:
        gmpy2_version = None
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "mpmath": mpmath.__version__,
        "gmpy2": gmpy2_version,
        "mpmath_backend": str(mpmath.libmp.BACKEND),
        "platform": platform.platform(),
    }


def recorded_inputs() -> dict:
    """The inputs, as recorded in audit.json (from :mod:`oracle.lab`)."""
    return {
        "example": {
            "query": lab.QUERY.tolist(),
            "key": lab.KEY.tolist(),
            "value": lab.VALUE.tolist(),
            "dtype": "float64",
        },
        "batch": {
            "generator": "numpy.random.default_rng",
            "draws": "standard_normal q, k, v",
            **lab.BATCH,
        },
        "kv_table": {
            **lab.KV_TABLE_CONFIG,
            "num_kv_heads": [h for _, h, _ in lab.KV_TABLE],
        },
        "small_fp16_pair": lab.SMALL_PAIR,
    }
