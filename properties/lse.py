"""The log-sum-exp output, read from a subject and checked: ``attention(...,
return_lse=True)`` returns ``(output, lse)``, ``lse = log sum_j exp(s_j)`` over each row's
visible keys (natural log, the sink not counted, ``-inf`` for a row that sees no key), as
FlashAttention's ``softmax_lse`` and FlexAttention's ``return_lse``; and the merge law's exact
merge and its bound (split-KV, cascade and context-parallel kernels merge two parts' outputs by
their ``lse``). Shared by ``properties/test_lse.py`` and the kernel-sized properties.
"""

from __future__ import annotations

import mpmath
import numpy as np

from attnprops.properties.arithmetic import U64
from attnprops.properties.checks import assert_shape_dtype
from attnprops.properties.checks import assert_within
from attnprops.properties.checks import call_subject
from attnprops.properties.checks import fail

__all__ = [
    "assert_lse_within",
    "every_part_sees_a_key",
    "exact_merge",
    "merge_bounds",
    "output_and_lse",
]


def output_and_lse(subject, case, what: str):
    """The subject's ``attention(..., return_lse=True)`` for ``case``: the output (the
    case's shape and dtype, no NaN) and ``lse`` (``query.shape[:-1]``, a float dtype, no NaN),
    the latter as float64."""
    __tracebackhide__ = True
    got = call_subject(
        subject.attention,
        case.query,
        case.key,
        case.value,
        **case.subject_kwargs(),
        return_lse=True,
        what=what,
    )
    if not (isinstance(got, tuple) and len(got) == 2):
        fail(f"{what}: return_lse=True must return (output, lse); got {type(got).__name__}")
    out, lse = got
    shape = case.query.shape[:-1]
    out = assert_shape_dtype(
        out=out, shape=shape + case.value.shape[-1:], dtype=case.dtype, what=f"{what} output"
    )
    if not isinstance(lse, np.ndarray) or lse.dtype.kind != "f":
        got = f"dtype {lse.dtype}" if isinstance(lse, np.ndarray) else type(lse).__name__
        fail(
            f"{what}: lse must be a numpy.ndarray of a NumPy float dtype (float16, float32 "
            f"or float64); got {got}"
        )
    return out, assert_shape_dtype(out=lse, shape=shape, dtype=lse.dtype, what=f"{what} lse")


def assert_lse_within(lse, expected, bound, what: str, case) -> None:
    """``lse`` is ``-inf`` exactly where ``expected`` is, and within ``bound`` elsewhere."""
    __tracebackhide__ = True
    lse, expected = np.asarray(lse, np.float64), np.asarray(expected, np.float64)
    empty = np.isneginf(expected)
    if (np.isneginf(lse) != empty).any():
        where = np.argwhere(np.isneginf(lse) != empty)[0].tolist()
        fail(
            f"{what}: at row {where} lse is {lse[tuple(where)]!r}, expected "
            f"{expected[tuple(where)]!r} (-inf exactly where a row sees no key); "
            f"call: {case.describe()}"
        )
    assert_within(
        out=np.where(empty, 0.0, lse),
        expected=np.where(empty, 0.0, expected),
        bound=bound,
        what=what,
        case=case,
    )


def exact_merge(out_a, lse_a, out_b, lse_b):
    """The exact merge of two parts (at 60 digits, rounded to float64): ``L``, the weights
    ``e^{l_A - L}``, ``e^{l_B - L}`` and the output, each row (``(B, Hq, Tq)``, ``(B, Hq, Tq,
    Dv)``); a part with ``lse = -inf`` has weight 0 (both: ``L = -inf``, output 0)."""
    L = np.full(lse_a.shape, -np.inf)
    a, b = np.zeros(lse_a.shape), np.zeros(lse_a.shape)
    out = np.zeros(out_a.shape)
    with mpmath.workdps(60):
        for index in np.ndindex(lse_a.shape):
            la, lb = (mpmath.mpf(float(x[index])) for x in (lse_a, lse_b))
            if la == -mpmath.inf and lb == -mpmath.inf:
                continue
            total = mpmath.log(mpmath.exp(la) + mpmath.exp(lb))
            wa, wb = mpmath.exp(la - total), mpmath.exp(lb - total)
            L[index], a[index], b[index] = float(total), float(wa), float(wb)
            for c in range(out_a.shape[-1]):
                o = wa * mpmath.mpf(float(out_a[index + (c,)])) + wb * float(out_b[index + (c,)])
                out[index + (c,)] = float(o)
    return L, a, b, out


def merge_bounds(parts, merged, L, whole_output):
    """Bounds on the exact merge of two parts' computed results against the exact output and
    ``lse`` over their union: ``(output bound (B, Hq, Tq, Dv), lse bound (B, Hq, Tq))``.

    ``parts``: for each part, ``(a, out, beta, lam)``: its merged weight ``e^{l_P - L}``
    (:func:`exact_merge`), its computed output (float64), the output's bound ``beta``
    (:func:`properties.bounds.attention_bounds`) and its ``lse``'s bound ``lambda``
    (:func:`properties.bounds.lse_bounds`). ``merged`` and ``L``: :func:`exact_merge`'s;
    ``whole_output``: the exact output over the union (rounded to float64).

    Derivation: each computed ``l_P`` is within ``lambda_P`` of the exact one, so with
    ``kappa_P = lambda_P + max(lambda_A, lambda_B)`` the merged weight ``e^{l_P - L}`` is within
    a factor ``e^{kappa_P}`` of the exact weight, and the output errs by at most ``sum_P a_P
    (beta_P + e^{kappa_P} (e^{kappa_P} - 1) (|o_P| + beta_P))``, plus ``2**-53`` of the merged
    and of the exact value for their roundings to float64; ``L`` errs by at most ``max_P
    lambda_P`` plus its rounding. Both in float64 times ``1 + 2**-40``; NaN (from ``inf *
    0``) is no bound: inf."""
    lams = [lam for _, _, _, lam in parts]
    with np.errstate(over="ignore", invalid="ignore"):
        worst = np.maximum(*lams)
        bound = U64 * np.abs(merged)
        for a, out, beta, lam in parts:
            kappa = (lam + worst)[..., None]
            carried = beta + np.exp(kappa) * np.expm1(kappa) * (np.abs(out) + beta)
            bound = bound + np.where(a[..., None] > 0, a[..., None] * carried, 0.0)
        bound = (bound + U64 * np.abs(whole_output)) * (1 + 2.0**-40)
        lse_bound = (worst + U64 * np.abs(np.where(np.isfinite(L), L, 0.0))) * (1 + 2.0**-40)
    return np.where(np.isnan(bound), np.inf, bound), lse_bound


def every_part_sees_a_key(in_a: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """``in_a`` (bool ``(B, Hq, Tq, Tk)``: the keys of part A, the rest part B) with each
    row's first visible key given to A and its last to B, in place, so that under
    ``fully_masked_rows="raise"`` both parts see a key of every row that sees two."""
    Tk = visible.shape[-1]
    first = visible.argmax(axis=-1)[..., None]
    last = (Tk - 1 - visible[..., ::-1].argmax(axis=-1))[..., None]
    np.put_along_axis(in_a, first, True, axis=-1)
    np.put_along_axis(in_a, last, False, axis=-1)
    return in_a
