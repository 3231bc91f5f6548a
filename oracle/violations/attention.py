"""The rules of an attention call (:func:`oracle.rules.check_attention_call`), each with its
break function: ``query_start``, ``scale``, score overflow, fully masked rows and ``is_causal``;
with the arrays' rules (:mod:`oracle.violations.arrays`) and the variants' rules
(:mod:`oracle.violations.variants`) in :data:`ATTENTION`, in the registry's order."""

from __future__ import annotations

import numpy as np

from attnprops.oracle.rules import AttentionInputError
from attnprops.oracle.rules import FullyMaskedRowError
from attnprops.oracle.rules import QueryStartError
from attnprops.oracle.rules import ScaleError
from attnprops.oracle.rules import ScoreOverflowError
from attnprops.oracle.violations.arrays import ARRAYS
from attnprops.oracle.violations.calls import Example
from attnprops.oracle.violations.calls import Violation
from attnprops.oracle.violations.calls import changed
from attnprops.oracle.violations.calls import lengths
from attnprops.oracle.violations.calls import score_shape
from attnprops.oracle.violations.variants import VARIANTS


def _causal_or_not(call, pick, allowed: bool) -> dict:
    """``is_causal`` chosen by ``pick`` where causality is allowed, else left False."""
    return {"kw_is_causal": bool(allowed and pick.choice([True, False]))}


def _query_start_negative(call, pick):
    tq, tk = lengths(call)
    return changed(call, kw_query_start=-pick.integer(1, 5), **_causal_or_not(call, pick, tq <= tk))


def _query_start_too_large(call, pick):
    tq, tk = lengths(call)
    return changed(
        call, kw_query_start=tk - tq + pick.integer(1, 5), **_causal_or_not(call, pick, tq <= tk)
    )


def _query_start_bool(call, pick):
    return changed(call, kw_query_start=pick.choice([True, False]))


def _query_start_float(call, pick):
    tq, tk = lengths(call)
    return changed(call, kw_query_start=float(pick.integer(0, max(0, tk - tq))))


def _more_queries_than_keys(call, pick):
    tq, tk = lengths(call)
    copies = tk // tq + 1  # Tq * copies > Tk: with query_start None, Tk - Tq < 0
    q = call.query
    return changed(
        call,
        query=np.concatenate([q] * copies, axis=-2),
        kw_is_causal=True,
        kw_query_start=None,
        kw_attn_mask=None,
    )


def _scale_not_finite(call, pick):
    # 10**400: an int past float64's range, an infinite scale
    return changed(call, kw_scale=pick.choice([float("nan"), float("inf"), float("-inf"), 10**400]))


def _scale_not_positive(call, pick):
    return changed(call, kw_scale=pick.choice([0.0, -0.5, -0.0, -1e-3]))


def _scale_not_a_number(call, pick):
    # a np.timedelta64 is a NumPy integer subclass, a duration, not a number
    return changed(call, kw_scale=pick.choice([True, "0.5", [0.5], np.timedelta64(2, "D")]))


def _score_overflow(call, pick):
    dtype = call.query.dtype
    if dtype == np.float64 and pick.choice(["inputs", "float mask"]) == "float mask":
        # scores near 1e308 plus a finite mask of 1.5e308: the sum overflows
        q = np.zeros(call.query.shape)
        k = np.zeros(call.key.shape)
        q[..., 0], k[..., 0] = 1e154, 1e154
        return changed(
            call, query=q, key=k, kw_scale=1.0, kw_attn_mask=np.full(score_shape(call), 1.5e308)
        )
    big = 1e200 if dtype == np.float64 else 1e30  # float32: max 3.4e38
    return changed(call, query=np.full_like(call.query, big), key=np.full_like(call.key, big))


def _fully_masked_row(call, pick):
    """Hide every key of one query row: a bool or float mask row, a key padding mask of one
    batch element, or causality with ``query_start=0`` plus a mask hiding key 0 (which the
    first query alone would see)."""
    shape = score_shape(call)
    four = shape if len(shape) == 4 else (1, 1) + shape
    B, H, Tq, Tk = four
    how = pick.choice(["row", "key padding", "causal"])
    kind = pick.choice(["bool", "float"])
    changes = {}
    if how == "row":
        mask = np.ones(four, dtype=bool)
        mask[pick.integer(0, B - 1), pick.integer(0, H - 1), pick.integer(0, Tq - 1), :] = False
    elif how == "key padding":
        mask = np.ones((B, 1, 1, Tk), dtype=bool)
        mask[pick.integer(0, B - 1)] = False
    elif Tq > Tk:  # no causal row can be emptied: hide query 0's keys without causality
        mask = np.ones((B, 1, Tq, Tk), dtype=bool)
        mask[:, :, 0, :] = False
        changes = {"kw_is_causal": False, "kw_query_start": None}
    else:
        mask = np.ones((1, 1, Tq, Tk), dtype=bool)
        mask[..., 0, 0] = False
        changes = {"kw_is_causal": True, "kw_query_start": 0}
    if len(shape) == 2:
        mask = np.broadcast_to(mask, four)[0, 0].copy()
    if kind == "float":
        mask = np.where(mask, 0.0, -np.inf).astype(call.query.dtype)
    return changed(call, kw_attn_mask=mask, **changes)


def _is_causal_not_bool(call, pick):
    return changed(call, kw_is_causal=pick.choice(["yes", 1, None]))


E = Example
ATTENTION: tuple[Violation, ...] = (
    *ARRAYS,  # shapes, dtypes, non-finite values
    # QueryStartError
    Violation(
        "query_start negative",
        QueryStartError,
        "query_start",
        _query_start_negative,
        (E("query-start-negative"), E("query-start-noncausal-neg", answers=(1, False))),
    ),
    Violation(
        "query_start too large",
        QueryStartError,
        "query_start",
        _query_start_too_large,
        (E("query-start-too-large"), E("query-start-noncausal", answers=(1, False))),
    ),
    Violation(
        "query_start bool",
        QueryStartError,
        "query_start",
        _query_start_bool,
        (E("query-start-bool"),),
    ),
    Violation(
        "query_start float",
        QueryStartError,
        "query_start",
        _query_start_float,
        (E("query-start-float"),),
    ),
    Violation(
        "causal with more queries than keys",
        QueryStartError,
        "query_start",
        _more_queries_than_keys,
        (E("query-start-none-tq-gt-tk"),),
    ),
    # ScaleError
    Violation(
        "scale not finite",
        ScaleError,
        "scale",
        _scale_not_finite,
        (E("scale-nan"), E("scale-inf", answers=(float("inf"),))),
    ),
    Violation(
        "scale not positive",
        ScaleError,
        "scale",
        _scale_not_positive,
        (E("scale-zero"), E("scale-negative", answers=(-0.5,))),
    ),
    Violation(
        "scale not a number",
        ScaleError,
        "scale",
        _scale_not_a_number,
        (E("scale-bool"), E("scale-str", answers=("0.5",))),
    ),
    # ScoreOverflowError (float16 cannot overflow: its inputs are bounded by 65504)
    Violation(
        "score overflow",
        ScoreOverflowError,
        "query",
        _score_overflow,
        (
            E("overflow-float64"),
            E("overflow-float32", "2d-float32"),
            E("overflow-float-mask", answers=("float mask",)),
            E("overflow-weights", func="attention_weights"),
        ),
        dtypes=("float32", "float64"),
    ),
    # FullyMaskedRowError
    Violation(
        "fully masked row",
        FullyMaskedRowError,
        "attn_mask",
        _fully_masked_row,
        (
            E("bool-mask-row", answers=("row", "bool", 0, 0, 1)),
            E("float-mask-row", answers=("row", "float")),
            E("causal-and-mask-row", answers=("causal", "bool")),
        ),
    ),
    *VARIANTS,  # window .. sinks (here: the registry's order is the draws')
    Violation(
        "is_causal not a bool",
        AttentionInputError,
        "is_causal",
        _is_causal_not_bool,
        (E("is-causal-not-bool"),),
    ),
)
del E
