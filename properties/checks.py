"""Assertion helpers of the property suite.

Each raises :class:`PropertyViolation` (an ``AssertionError``) with one message shape: what
was checked, the call, how many elements failed of how many, the largest absolute and relative
difference, and the worst points as ``index => got != wanted (bound)``. The mutation runner
counts a mutant as killed only by a ``PropertyViolation``; any other exception is an error.
"""

from __future__ import annotations

import numpy as np
from hypothesis import currently_in_test_context
from hypothesis import note


class PropertyViolation(AssertionError):
    """A property of attention does not hold for the subject."""


def _note(message: str) -> None:
    if currently_in_test_context():  # the helpers also work outside Hypothesis tests
        note(message)


def fail(message: str) -> None:
    __tracebackhide__ = True
    raise PropertyViolation(message)


def call_subject(fn, *args, what: str, **kwargs):
    """Call the subject on a *valid* input; an exception there is a property violation
    (valid inputs must be accepted), reported with the call."""
    __tracebackhide__ = True
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        if isinstance(exc, Warning):  # a warning that a warnings filter turned into an error
            fail(
                f"{what}: the subject warned {type(exc).__name__}: {exc} on a valid input, and "
                "a warnings filter of this run (-W or filterwarnings) made it an error"
            )
        fail(f"{what}: the subject raised {type(exc).__name__}: {exc} on a valid input")


def _worst(index_list, got, wanted, bound, limit=5) -> str:
    lines = []
    for idx in index_list[:limit]:
        t = tuple(int(i) for i in idx)
        lines.append(f"    {t} => {got[t]!r} != {wanted[t]!r} (bound {bound[t]:.3g})")
    return "\n".join(lines)


def _type_name(out) -> str:
    """``builtins.list``, ``numpy.float64``, ``torch.Tensor``: what a subject returned."""
    return f"{type(out).__module__}.{type(out).__qualname__}"


def describe_result(out) -> str:
    """What a subject returned, in words, for a message about a call that should have
    raised: ``"an array of shape (1, 2, 3, 4) with 3 NaN"``, ``"None"``, ``"a list"`` (not
    converted: ``numpy.asarray(None)`` would be a NaN)."""
    if out is None:
        return "None"
    if not isinstance(out, np.ndarray):
        return f"a {_type_name(out)}"
    nan = int(np.isnan(out).sum()) if np.issubdtype(out.dtype, np.inexact) else 0
    return f"an array of shape {out.shape}" + (f" with {nan} NaN" if nan else "")


def assert_shape_dtype(*, out, shape, dtype, what: str) -> np.ndarray:
    """``out`` is an ndarray of ``shape`` and ``dtype``, with no NaN (a list, a tensor or
    ``None`` is a violation of the subject contract, not converted)."""
    __tracebackhide__ = True
    if not isinstance(out, np.ndarray):
        fail(f"{what}: the subject returned {_type_name(out)}, expected a numpy.ndarray")
    if out.shape != tuple(shape):
        fail(f"{what}: shape {out.shape}, expected {tuple(shape)}")
    if out.dtype != dtype:
        fail(f"{what}: dtype {out.dtype}, expected {np.dtype(dtype)}")
    if np.isnan(out).any():
        first = tuple(int(i) for i in np.argwhere(np.isnan(out))[0])
        fail(f"{what}: {int(np.isnan(out).sum())} NaN of {out.size} elements, the first at {first}")
    return out


def assert_within(*, out, expected, bound, what: str, case=None) -> None:
    """``|out - expected| <= bound`` element by element (NaN fails)."""
    __tracebackhide__ = True
    got = np.asarray(out).astype(np.float64)
    wanted = np.asarray(expected, dtype=np.float64)
    bound = np.broadcast_to(np.asarray(bound, dtype=np.float64), wanted.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(got - wanted)
        bad = ~(diff <= bound)
    if not bad.any():
        return
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        excess = np.where(bad, np.nan_to_num(diff / np.maximum(bound, 1e-300), nan=np.inf), -1)
        rel = np.where(wanted != 0, diff / np.abs(wanted), np.inf)
    order = np.argsort(-excess, axis=None)[: int(bad.sum())]
    worst = np.array(np.unravel_index(order, wanted.shape)).T
    message = (
        f"{what}: {int(bad.sum())} of {bad.size} elements outside the bound; "
        f"max abs diff {np.where(np.isnan(diff), np.inf, diff).max():.3g}, "
        f"max rel diff {np.where(bad, np.where(np.isnan(rel), np.inf, rel), 0).max():.3g}"
        f"{' (a wanted value is 0)' if (bad & (wanted == 0) & (diff > 0)).any() else ''}\n"
        f"  worst points (index => got != wanted (bound)):\n{_worst(worst, got, wanted, bound)}"
    )
    if case is not None:
        message += f"\n  call: {case.describe()}"
    _note(message)
    fail(message)


def assert_equal(*, out, expected, what: str, case=None) -> None:
    """Exact equality: same shape and the same value in every element (NaN equals NaN in
    the same place, so an unchanged NaN input compares equal; ``-0.0 == 0.0``)."""
    __tracebackhide__ = True
    got, wanted = np.asarray(out), np.asarray(expected)
    if got.shape != wanted.shape:
        fail(f"{what}: shape {got.shape} != {wanted.shape}")
    floats = np.issubdtype(got.dtype, np.floating) and np.issubdtype(wanted.dtype, np.floating)
    if not np.array_equal(got, wanted, equal_nan=floats):
        bad = (got != wanted) & ~(np.isnan(got) & np.isnan(wanted)) if floats else got != wanted
        worst = np.argwhere(bad)
        zero = np.zeros(wanted.shape)
        message = (
            f"{what}: {int(bad.sum())} of {bad.size} elements differ (bitwise equality "
            f"required)\n{_worst(worst, got, wanted, zero)}"
        )
        if case is not None:
            message += f"\n  call: {case.describe()}"
        _note(message)
        fail(message)
