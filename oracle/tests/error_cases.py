"""One table of rule violations (oracle/rules.py), shared by the oracle's and impl's tests.

Each case builds fresh inputs, names the function to call (``attention`` or
``attention_weights``), the exact error class the rulebook prescribes and the argument name the
message must contain. Depends on NumPy and :mod:`oracle.rules` only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attnprops.oracle.rules import (
    DtypeError,
    FullyMaskedRowError,
    NonFiniteInputError,
    QueryStartError,
    ScaleError,
    ScoreOverflowError,
    ShapeError,
)


def _qkv(tq=3, tk=3, d=4, dv=2, dtype=np.float64, b=None, hq=None, hkv=None):
    """Small deterministic inputs; 2-D unless ``b`` is given (then 4-D with hq/hkv heads)."""
    rng = np.random.default_rng(7)
    if b is None:
        shapes = (tq, d), (tk, d), (tk, dv)
    else:
        shapes = (b, hq, tq, d), (b, hkv, tk, d), (b, hkv, tk, dv)
    return tuple(rng.standard_normal(s).astype(dtype) for s in shapes)


@dataclass
class Case:
    """A rule violation: call ``func(query, key, [value,] **kwargs)``, expect ``exc`` naming ``arg``."""

    id: str
    exc: type
    arg: str
    arrays: dict  # query, key, value (value None for attention_weights) and optional attn_mask
    kwargs: dict = field(default_factory=dict)
    func: str = "attention"

    def call(self, module):
        a = self.arrays
        kw = dict(self.kwargs)
        if "attn_mask" in a:
            kw["attn_mask"] = a["attn_mask"]
        fn = getattr(module, self.func)
        if self.func == "attention":
            return fn(a["query"], a["key"], a["value"], **kw)
        return fn(a["query"], a["key"], **kw)

    def snapshot(self):
        return {k: np.array(v, copy=True) for k, v in self.arrays.items()}


def _case(id, exc, arg, *, query=None, key=None, value=None, attn_mask=None, func="attention",
          **kwargs):
    q, k, v = _qkv()
    arrays = {
        "query": q if query is None else query,
        "key": k if key is None else key,
        "value": v if value is None else value,
    }
    if attn_mask is not None:
        arrays["attn_mask"] = attn_mask
    return Case(id, exc, arg, arrays, kwargs, func)


def _with(array, index, x):
    out = np.array(array, copy=True)
    out[index] = x
    return out


def build_cases() -> list[Case]:
    """Every error class of the rulebook, at least one case each (fresh arrays per call)."""
    q, k, v = _qkv()
    q4, k4, v4 = _qkv(b=1, hq=2, hkv=1)
    big = np.full((3, 4), 1e200)
    cases = [
        # ShapeError
        _case("ndim-3d-query", ShapeError, "query", query=q[None]),
        _case("ndim-mismatch", ShapeError, "key", query=q4, key=k, value=v),
        _case("batch-mismatch-key", ShapeError, "key", query=q4,
              key=np.concatenate([k4, k4]), value=np.concatenate([v4, v4])),
        _case("batch-mismatch-value", ShapeError, "value", query=q4, key=k4,
              value=np.concatenate([v4, v4])),
        _case("head-dim-mismatch", ShapeError, "key", key=k[:, :3]),
        _case("kv-length-mismatch", ShapeError, "value", value=v[:2]),
        _case("hq-not-multiple-of-hkv", ShapeError, "num_kv_heads",
              query=np.concatenate([q4[:, :1]] * 3, axis=1),
              key=np.concatenate([k4] * 2, axis=1), value=np.concatenate([v4] * 2, axis=1)),
        _case("zero-size-query", ShapeError, "query", query=np.zeros((0, 4))),
        _case("zero-size-key", ShapeError, "key", key=np.zeros((3, 0))),
        _case("mask-not-broadcastable", ShapeError, "attn_mask",
              attn_mask=np.ones((2, 3), dtype=bool)),
        _case("mask-too-many-dims", ShapeError, "attn_mask",
              attn_mask=np.ones((2, 3, 3), dtype=bool)),
        _case("weights-ndim", ShapeError, "query", query=q[None], value=None,
              func="attention_weights"),
        # DtypeError
        _case("dtype-mismatch-key", DtypeError, "key", key=k.astype(np.float32)),
        _case("dtype-mismatch-value", DtypeError, "value", value=v.astype(np.float16)),
        _case("int-mask", DtypeError, "attn_mask", attn_mask=np.ones((3, 3), dtype=np.int64)),
        _case("unsupported-int-query", DtypeError, "query",
              query=np.ones((3, 4), dtype=np.int64)),
        _case("unsupported-complex-key", DtypeError, "key", key=k.astype(np.complex128)),
        # NonFiniteInputError
        _case("nan-query", NonFiniteInputError, "query", query=_with(q, (1, 2), np.nan)),
        _case("inf-key", NonFiniteInputError, "key", key=_with(k, (0, 0), np.inf)),
        _case("neg-inf-value", NonFiniteInputError, "value", value=_with(v, (2, 1), -np.inf)),
        _case("nan-float-mask", NonFiniteInputError, "attn_mask",
              attn_mask=_with(np.zeros((3, 3)), (0, 1), np.nan)),
        _case("posinf-float-mask", NonFiniteInputError, "attn_mask",
              attn_mask=_with(np.zeros((3, 3)), (2, 2), np.inf)),
        # QueryStartError (Tq=1, Tk=3: valid range [0, 2])
        _case("query-start-negative", QueryStartError, "query_start", query=q[2:],
              is_causal=True, query_start=-1),
        _case("query-start-too-large", QueryStartError, "query_start", query=q[2:],
              is_causal=True, query_start=3),
        _case("query-start-bool", QueryStartError, "query_start", query=q[2:],
              is_causal=True, query_start=True),
        _case("query-start-float", QueryStartError, "query_start", query=q[2:],
              is_causal=True, query_start=2.0),
        _case("query-start-noncausal", QueryStartError, "query_start", query=q[2:],
              is_causal=False, query_start=3),
        _case("query-start-noncausal-neg", QueryStartError, "query_start", is_causal=False,
              query_start=-1),
        _case("query-start-none-tq-gt-tk", QueryStartError, "query_start", key=k[:2],
              value=v[:2], is_causal=True),
        # ScaleError
        _case("scale-nan", ScaleError, "scale", scale=float("nan")),
        _case("scale-inf", ScaleError, "scale", scale=float("inf")),
        _case("scale-zero", ScaleError, "scale", scale=0.0),
        _case("scale-negative", ScaleError, "scale", scale=-0.5),
        _case("scale-bool", ScaleError, "scale", scale=True),
        _case("scale-str", ScaleError, "scale", scale="0.5"),
        # ScoreOverflowError
        _case("overflow-float64", ScoreOverflowError, "query", query=big, key=big),
        _case("overflow-float32", ScoreOverflowError, "query",
              query=np.full((3, 4), 1e30, np.float32), key=np.full((3, 4), 1e30, np.float32),
              value=v.astype(np.float32)),
        _case("overflow-float-mask", ScoreOverflowError, "attn_mask",
              query=_with(np.zeros((3, 4)), (slice(None), 0), 1e154),
              key=_with(np.zeros((3, 4)), (slice(None), 0), 1e154),
              attn_mask=np.full((3, 3), 1.5e308)),
        _case("overflow-weights", ScoreOverflowError, "query", query=big, key=big, value=None,
              func="attention_weights"),
        # FullyMaskedRowError
        _case("bool-mask-row", FullyMaskedRowError, "attn_mask",
              attn_mask=_with(np.ones((3, 3), dtype=bool), 1, False)),
        _case("float-mask-row", FullyMaskedRowError, "attn_mask",
              attn_mask=_with(np.zeros((3, 3)), 0, -np.inf)),
        _case("causal-and-mask-row", FullyMaskedRowError, "is_causal",
              attn_mask=_with(np.ones((3, 3), dtype=bool), (slice(None), 0), False),
              is_causal=True),
    ]
    return cases


CASE_IDS = [c.id for c in build_cases()]
