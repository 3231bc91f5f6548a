"""The audit's record: each check with what was measured, what it was compared to and how.

A :class:`Check` is one item of ``audit.json``'s ``checks`` (:mod:`.schema`); an
:class:`Audit` collects them, and the arrays to write as CSV (:mod:`.files`), while the
sections of :mod:`.figures` and :mod:`.rejects` run.

Tolerances: a figure printed to ``n`` decimals, half a unit of its last place
(:attr:`oracle.lab.Printed.tolerance`); a float64 value against the 50-digit oracle,
:data:`ULPS` units in the last place of the largest magnitude involved
(:func:`ulp_tolerance`); counts, bytes, error classes and bitwise comparisons, exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

ULPS = 4  # float64 vs the 50-digit oracle: 4 units in the last place of the largest magnitude


@dataclass
class Check:
    """One audited number (or array, or error) with what it was compared to and how:
    ``comparison`` is ``"abs"`` (elementwise ``|measured - expected| <= tolerance``),
    ``"equal"`` (exactly) or ``"raises"`` (impl and oracle raise the expected class, same
    message)."""

    name: str
    group: str
    description: str
    comparison: str
    expected: Any
    measured: Any
    tolerance: float | None
    passed: bool
    source: str
    note: str | None = None

    def to_json(self) -> dict:
        """The check as an audit.json ``checks`` item (:data:`.schema.CHECK_SCHEMA`)."""
        doc = {
            "name": self.name,
            "group": self.group,
            "description": self.description,
            "comparison": self.comparison,
            "expected": jsonable(self.expected),
            "measured": jsonable(self.measured),
            "tolerance": self.tolerance,
            "passed": bool(self.passed),
            "source": self.source,
        }
        if self.note:
            doc["note"] = self.note
        return doc


def jsonable(x):
    """Arrays and numbers as JSON values; non-finite floats become "-inf"/"inf"/"nan"."""
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return x if math.isfinite(x) else repr(x)  # 'inf', '-inf', 'nan'
    return x


def within(measured, expected, tolerance: float) -> bool:
    """Elementwise ``|measured - expected| <= tolerance``; shapes must match and non-finite
    entries must be equal (``-inf`` where ``-inf`` is expected)."""
    m = np.asarray(measured, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if m.shape != e.shape:
        return False
    finite = np.isfinite(e)
    if not np.array_equal(m[~finite], e[~finite]) or not np.isfinite(m[finite]).all():
        return False
    return bool(np.all(np.abs(m[finite] - e[finite]) <= tolerance))


def ulp_tolerance(*arrays) -> float:
    """:data:`ULPS` units in the last place of the largest finite magnitude in ``arrays``."""
    top = max(
        (
            float(np.max(np.abs(a[np.isfinite(a)]), initial=0.0))
            for a in (np.asarray(x, dtype=np.float64) for x in arrays)
        ),
        default=0.0,
    )
    return float(ULPS * np.spacing(max(top, ml_dtypes.finfo(np.float64).tiny)))


def max_abs_error(values, exact) -> float:
    """``max |values - exact|`` computed at the oracle's 50 digits, rounded to float64.

    ``values``: float array; ``exact``: same-shape object array of ``mpmath.mpf`` (an
    :class:`oracle.OracleResult`'s ``exact``). Equal infinities count as error 0; an infinity
    against a finite value as ``inf``. Raises ``ValueError`` when the shapes differ.
    """
    import mpmath

    from attnprops import oracle

    values = np.asarray(values, dtype=np.float64)
    if values.shape != exact.shape:
        raise ValueError(f"shape {values.shape} differs from the oracle's {exact.shape}")
    worst = mpmath.mpf(0)
    with mpmath.workdps(oracle.DIGITS):
        for v, x in zip(values.ravel().tolist(), exact.ravel().tolist()):
            if mpmath.isinf(x) or not math.isfinite(v):
                if mpmath.mpf(v) != x:
                    return math.inf
                continue
            worst = max(worst, abs(mpmath.mpf(v) - x))
        return float(worst)


class Audit:
    """Collects the checks (:attr:`checks`) and the arrays to write as CSV (:attr:`arrays`:
    file name -> ``(float64 array, layout)``, see :func:`.files.array_rows`)."""

    def __init__(self):
        self.checks: list[Check] = []
        self.arrays: dict[str, tuple[np.ndarray, dict]] = {}

    def add(self, check: Check) -> Check:
        """Record ``check``; raises ValueError if its name is already used."""
        if any(c.name == check.name for c in self.checks):
            raise ValueError(f"duplicate check name {check.name!r}")
        self.checks.append(check)
        return check

    def near(self, name, group, description, measured, expected, tolerance, source, note=None):
        """An ``"abs"`` check: elementwise ``|measured - expected| <= tolerance``."""
        return self.add(
            Check(
                name,
                group,
                description,
                "abs",
                expected,
                measured,
                float(tolerance),
                within(measured, expected, tolerance),
                source,
                note,
            )
        )

    def printed(self, name, group, description, measured, figure, note=None):
        """An ``"abs"`` check against a figure of the lab (:class:`oracle.lab.Printed`),
        within half a unit of its last printed decimal."""
        return self.near(
            name,
            group,
            description,
            measured,
            figure.value,
            figure.tolerance,
            f"{figure.source} (printed to {figure.decimals} decimals)",
            note,
        )

    def equal(self, name, group, description, measured, expected, source, note=None):
        """An ``"equal"`` check: ``measured == expected`` exactly."""
        passed = bool(measured == expected)
        return self.add(
            Check(name, group, description, "equal", expected, measured, None, passed, source, note)
        )

    def failed(self, name, group, description, expected, error: BaseException, source):
        """A check whose measurement itself raised: recorded as a failed ``"equal"`` check
        with the error as its measured value."""
        measured = {"error": type(error).__name__, "message": str(error)}
        note = "the measurement raised"
        return self.add(
            Check(name, group, description, "equal", expected, measured, None, False, source, note)
        )

    def array(self, filename: str, array, **layout):
        """Register ``array`` to be written as ``filename`` (:func:`.files.write_array_csv`)."""
        self.arrays[filename] = (np.asarray(array, dtype=np.float64), layout)
