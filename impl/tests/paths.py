"""Comparing two computations of one attention call in impl's tests: what a call gave (its
result or its error) and whether two paths' results agree within rounding."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from attnprops.oracle.rules import AttentionInputError
from attnprops.oracle.rules import compute_dtype

__all__ = ["close", "outcome"]


def outcome(fn):
    """``("ok", result)``, or ``(error class, message)`` for an AttentionInputError."""
    try:
        return "ok", fn()
    except AttentionInputError as exc:
        return type(exc), str(exc)


def close(blocked, dense, value, dtype):
    """|blocked - dense| <= a few dozen roundings of the compute dtype times max |v|, plus one
    rounding of the output dtype (the two paths round differently)."""
    eps_c = ml_dtypes.finfo(compute_dtype(dtype)).eps
    eps_o = ml_dtypes.finfo(dtype).eps
    vmax = float(np.abs(value.astype(np.float64)).max())
    got, want = blocked.astype(np.float64), dense.astype(np.float64)
    bound = 64 * eps_c * vmax + eps_o * np.abs(want) + ml_dtypes.finfo(dtype).smallest_subnormal
    assert np.all(np.abs(got - want) <= bound), np.max(np.abs(got - want) - bound)
