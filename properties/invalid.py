"""Strategies for invalid attention inputs, one per rule of :mod:`oracle.rules`.

Each draw is a valid :class:`~properties.strategies.AttentionCase` broken in exactly one way,
returned as an :class:`InvalidCase` naming the rule and the argument that breaks it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from hypothesis import strategies as st

from attnprops.properties.strategies import AttentionCase, attention_cases

# rule -> argument the rule is about (what a good error message names)
INVALID_KINDS = {
    "query ndim": "query",
    "key ndim differs": "key",
    "batch mismatch": "key",
    "head_dim mismatch": "key",
    "key/value length mismatch": "value",
    "dtype mismatch": "key",
    "heads not divisible": "key",
    "zero-size axis": "query",
    "non-finite query": "query",
    "non-finite key": "key",
    "non-finite value": "value",
    "mask not broadcastable": "attn_mask",
    "integer mask": "attn_mask",
    "NaN in float mask": "attn_mask",
    "+inf in float mask": "attn_mask",
    "query_start negative": "query_start",
    "query_start too large": "query_start",
    "query_start bool": "query_start",
    "query_start float": "query_start",
    "scale not finite": "scale",
    "scale not positive": "scale",
    "score overflow": "query",
    "fully masked row": "attn_mask",
}


class InvalidCase(NamedTuple):
    """A call that breaks one rule: ``query``/``key``/``value`` and ``kwargs`` to pass."""

    query: np.ndarray
    key: np.ndarray
    value: np.ndarray
    kwargs: dict
    kind: str
    argument: str

    def describe(self) -> str:
        mask = self.kwargs.get("attn_mask")
        mask = None if mask is None else f"{mask.dtype} {mask.shape}"
        rest = {k: v for k, v in self.kwargs.items() if k != "attn_mask"}
        return (f"[{self.kind}] query {self.query.shape} {self.query.dtype} key {self.key.shape} "
                f"{self.key.dtype} value {self.value.shape} attn_mask {mask} {rest}")


def _other_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if dtype == np.float64 else np.dtype(np.float64)


@st.composite
def fully_masked_cases(draw, *, dtypes=("float64", "float32", "float16"),
                       float_masks: bool = True) -> AttentionCase:
    """A case (otherwise valid) in which at least one query row sees no key.

    Drawn three ways: a bool or float mask row hidden completely (per-query mask), a key
    padding mask hiding every key of one batch element, or causality plus a mask hiding
    key 0 from the first query (which causally sees only key 0 when ``query_start=0``).
    """
    case = draw(attention_cases(dtypes=dtypes, masks_allowed=False))
    B, Hq, Tq, _ = case.query.shape if case.query.ndim == 4 else (1, 1) + case.query.shape
    Tk = case.key.shape[-2]
    how = draw(st.sampled_from(["row", "key padding", "causal"]))
    kind = draw(st.sampled_from(["bool", "float"])) if float_masks else "bool"
    is_causal, query_start = case.is_causal, case.query_start
    if how == "row":
        mask = np.ones((B, Hq, Tq, Tk), dtype=bool)
        b, h, i = draw(st.integers(0, B - 1)), draw(st.integers(0, Hq - 1)), draw(st.integers(0, Tq - 1))
        mask[b, h, i, :] = False
    elif how == "key padding":
        mask = np.ones((B, 1, 1, Tk), dtype=bool)
        mask[draw(st.integers(0, B - 1))] = False
    else:
        if Tq > Tk:
            is_causal, query_start = False, None
            mask = np.ones((B, 1, Tq, Tk), dtype=bool)
            mask[:, :, 0, :] = False
        else:
            is_causal, query_start = True, 0
            mask = np.ones((1, 1, Tq, Tk), dtype=bool)
            mask[..., 0, 0] = False
    if case.query.ndim == 2:
        mask = np.broadcast_to(mask, (B, Hq, Tq, Tk))[0, 0].copy()
    if kind == "float":
        mask = np.where(mask, 0.0, -np.inf).astype(case.query.dtype)
    return case._replace(attn_mask=mask, is_causal=is_causal, query_start=query_start,
                         mask_layout=f"fully masked ({how}, {kind})")


@st.composite
def invalid_cases(draw, *, dtypes=("float64", "float32", "float16"),
                  kinds=tuple(INVALID_KINDS), float_masks: bool = True) -> InvalidCase:
    """A call breaking exactly one rule; ``kinds`` restricts which rules are drawn."""
    kind = draw(st.sampled_from(kinds))
    if kind == "fully masked row":
        case = draw(fully_masked_cases(dtypes=dtypes, float_masks=float_masks))
        return InvalidCase(case.query, case.key, case.value, case.kwargs(), kind, "attn_mask")
    if kind == "score overflow":
        dtypes = tuple(d for d in dtypes if d != "float16") or ("float64",)
    case = draw(attention_cases(dtypes=dtypes, masks_allowed=False, causal=False))
    q, k, v = case.query, case.key, case.value
    kwargs = dict(attn_mask=None, is_causal=False, query_start=None, scale=None)
    if q.ndim == 2:
        q, k, v = q[None, None], k[None, None], v[None, None]
    B, Hq, Tq, D = q.shape
    Tk = k.shape[2]
    bad = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    if kind == "query ndim":
        q = q[0]
    elif kind == "key ndim differs":
        k = k[0]
    elif kind == "batch mismatch":
        k = np.concatenate([k, k], axis=0)
        v = np.concatenate([v, v], axis=0)
    elif kind == "head_dim mismatch":
        k = np.concatenate([k, k[..., :1]], axis=-1)
    elif kind == "key/value length mismatch":
        v = np.concatenate([v, v[:, :, :1]], axis=2)
    elif kind == "dtype mismatch":
        k = k.astype(_other_dtype(q.dtype))
    elif kind == "heads not divisible":
        k = np.concatenate([k] * (Hq + 1), axis=1)
        v = np.concatenate([v] * (Hq + 1), axis=1)
    elif kind == "zero-size axis":
        q = q[:, :, :0]
    elif kind.startswith("non-finite"):
        target = {"query": q, "key": k, "value": v}[INVALID_KINDS[kind]].copy()
        target[tuple(draw(st.integers(0, n - 1)) for n in target.shape)] = bad
        if kind.endswith("query"):
            q = target
        elif kind.endswith("key"):
            k = target
        else:
            v = target
    elif kind == "mask not broadcastable":
        kwargs["attn_mask"] = np.ones((B, Hq, Tq, Tk + 1), dtype=bool)
    elif kind == "integer mask":
        kwargs["attn_mask"] = np.ones((Tq, Tk), dtype=draw(st.sampled_from([np.int64, np.int8, np.uint8])))
    elif kind in ("NaN in float mask", "+inf in float mask"):
        mask = np.zeros((B, Hq, Tq, Tk), dtype=q.dtype)
        mask[draw(st.integers(0, B - 1)), 0, 0, draw(st.integers(0, Tk - 1))] = (
            np.nan if kind.startswith("NaN") else np.inf)
        kwargs["attn_mask"] = mask
    elif kind == "query_start negative":
        kwargs["query_start"] = draw(st.integers(-5, -1))
        kwargs["is_causal"] = draw(st.booleans()) and Tq <= Tk
    elif kind == "query_start too large":
        kwargs["query_start"] = Tk - Tq + draw(st.integers(1, 5))
        kwargs["is_causal"] = draw(st.booleans()) and Tq <= Tk
    elif kind == "query_start bool":
        kwargs["query_start"] = draw(st.booleans())
    elif kind == "query_start float":
        kwargs["query_start"] = float(draw(st.integers(0, max(0, Tk - Tq))))
    elif kind == "scale not finite":
        kwargs["scale"] = float(bad)
    elif kind == "scale not positive":
        kwargs["scale"] = draw(st.sampled_from([0.0, -0.0, -1.0, -1e-3]))
    elif kind == "score overflow":
        big = 1e200 if q.dtype == np.float64 else 1e30
        q = np.full_like(q, big)
        k = np.full_like(k, big)
    else:  # pragma: no cover - INVALID_KINDS and this chain are kept in step
        raise AssertionError(f"unhandled invalid kind {kind!r}")
    return InvalidCase(q, k, v, kwargs, kind, INVALID_KINDS[kind])
