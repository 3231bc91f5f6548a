"""The kernel-sized attention call that Hypothesis draws (:func:`properties.kernel_cases.
kernel_specs`) and how it turns into arrays.

A :class:`KernelSpec` holds sizes, flags and a seed; :meth:`KernelSpec.build` makes the
:class:`~properties.strategies.AttentionCase` with NumPy's ``default_rng(seed)``, so a
counterexample reads as sizes and shrinking acts on them, not on single elements.

Masks: ``none``; ``key padding`` ``(B, 1, 1, Tk)`` bool, the first ``L_b`` keys of batch ``b``
visible with ``L_b`` itself a boundary size (padding on the right); ``random bool`` ``(Tq, Tk)``
at density 1/2 with key 0 always visible; ``alibi float mask`` a float ``(1, Hq, Tq, Tk)`` bias
``-slope_h |i + start - j|`` (Press et al. 2022), for subjects that take float masks; ``left
padding`` ``(B, 1, 1, Tk)`` bool, the last ``L_b`` keys visible (Hugging Face pads a batch on
the left for generation; a kernel that turns a padding mask into lengths, FlashAttention's
varlen ``seqlens_k``, assumes the right), with ``L_b >= Tk - start`` in a causal call. Every
query sees a key in every kind: key 0, or under left padding key ``Tk - L_b`` (at or before
the first query's position ``start`` in a causal call), so no row is fully masked. One more
kind, drawn only where asked for (:data:`PER_HEAD_MASK`, not in :data:`MASK_KINDS`): ``random
bool (B, Hq)``, a ``(B, Hq, Tq, Tk)`` bool mask of its own for every batch element and query
head, at density 1/2 with key 0 always visible.
"""

from __future__ import annotations

from collections import namedtuple

import ml_dtypes
import numpy as np

from attnprops.oracle.rules import sinks_within
from attnprops.properties.bounds import grouped_matmul
from attnprops.properties.strategies import BFLOAT16
from attnprops.properties.strategies import BFLOAT16_LARGE
from attnprops.properties.strategies import AttentionCase
from attnprops.properties.strategies import Dims
from attnprops.properties.variant_draws import anchor_in_window
from attnprops.properties.variant_draws import press_slopes

# "alibi float mask": ALiBi's bias given as attn_mask (the spec's alibi flag: as alibi_slopes)
MASK_KINDS = ("none", "key padding", "random bool", "alibi float mask", "left padding")
PADDING_KINDS = ("key padding", "left padding")  # (B, 1, 1, Tk) masks of padding lengths
PER_HEAD_MASK = "random bool (B, Hq)"  # its own mask per (batch, head); asked for, not drawn

# The fields: the shape kind, the sizes of :class:`~properties.strategies.Dims` (one list of
# them), then the rest of the call; every field after ``seed`` has a default (absent).
_Fields = namedtuple(
    "KernelSpec",
    [
        "shape",
        *Dims._fields,
        *("is_causal", "query_start", "mask", "dtype", "magnitude", "scale", "seed"),
        *("padding", "block_size", "window", "sinks", "alibi", "softcap", "documents"),
        *("chunk_size", "batch_documents", "batch_slopes"),
    ],
    defaults=((), None, None, False, False, None, (), None, (), False),
)


class KernelSpec(_Fields):
    """A kernel-sized attention call, drawn by :func:`~properties.kernel_cases.kernel_specs`.

    Fields: ``shape`` (a :data:`~properties.kernel_cases.SHAPE_KINDS` kind); the sizes
    ``batch``, ``num_heads``, ``num_kv_heads``, ``query_len``, ``key_len``, ``head_dim``,
    ``value_dim`` (as :class:`~properties.strategies.Dims`); ``is_causal``, ``query_start``
    (int or None), ``mask`` (a :data:`MASK_KINDS` kind), ``dtype`` and ``magnitude`` (names),
    ``scale`` (float or None), ``seed`` (int); and, absent by default: ``padding`` (key or
    left padding: the visible keys per batch element), ``block_size``, ``window`` (local
    window ``(left, right)``), ``sinks`` (one sink logit per query head, from
    ``default_rng(seed + 2)``), ``alibi`` (ALiBi's slopes, Press et al.'s geometric ones),
    ``softcap`` (``c``: scores become ``c tanh(s / c)``), ``documents`` (packed documents: the
    key position where each starts), ``chunk_size`` (chunked attention: chunks of this many
    positions), ``batch_documents`` (batch elements 1..B-1: their own document starts),
    ``batch_slopes`` (ALiBi slopes ``(B, Hq)``: batch element b's divided by b + 1)."""

    __slots__ = ()

    @property
    def start(self) -> int:
        """The first query's absolute position: ``query_start``, or ``Tk - Tq`` for None."""
        return self.key_len - self.query_len if self.query_start is None else self.query_start

    def segment_ids(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Packed documents as 1-D ``segment_ids`` (every batch element alike, one packed row
        as FlashAttention's ``cu_seqlens`` gives it): key ``j``'s id counts the document
        starts at or before ``j`` (a start drawn twice is a document of length zero); each
        query takes the id of its own position ``query_start + i``; None without. With
        :attr:`batch_documents`, 2-D ids ``(B, Tq)``, ``(B, Tk)``: batch element 0 packed at
        :attr:`documents`, element ``b >= 1`` at :attr:`batch_documents` moved ``b - 1``
        positions on (each row its own, so a row index that wraps or strides wrong reads
        another packing)."""
        if not self.documents:
            return None
        Tq, Tk = self.query_len, self.key_len
        rows = [self.documents]
        if self.batch_documents:
            rows += [tuple(s + b for s in self.batch_documents) for b in range(self.batch - 1)]
        key_ids = np.stack(
            [np.searchsorted(np.array(r), np.arange(Tk), side="right") for r in rows]
        )
        ids = key_ids[:, self.start + np.arange(Tq)], key_ids
        return ids if self.batch_documents else (ids[0][0], ids[1][0])

    def build(self) -> AttentionCase:
        """The call as an AttentionCase (arrays from ``default_rng(seed)``; the sinks, when
        drawn, from ``default_rng(seed + 2)``: a quarter ``-inf`` but never head 0's, the
        rest the log-sum-exp of the head's scores on the last query row plus 2 N(0, 1), so
        the sink takes between 2% and 98% of that row's weight (19 draws in 20) whatever the
        regime or the length: a sink of a few units weighs nothing against thousands of keys
        or the ``large`` regime's scores, and hides every sink fault there; ``alibi``: Press
        et al.'s slopes ``2**(-8 k / Hq)`` as ``alibi_slopes``)."""
        rng = np.random.default_rng(self.seed)
        B, Hq, Hkv = self.batch, self.num_heads, self.num_kv_heads
        Tq, Tk, D, Dv = self.query_len, self.key_len, self.head_dim, self.value_dim
        query = _values(rng, (B, Hq, Tq, D), self.dtype, self.magnitude)
        key = _values(rng, (B, Hkv, Tk, D), self.dtype, self.magnitude)
        value = _values(rng, (B, Hkv, Tk, Dv), self.dtype, self.magnitude)
        case = AttentionCase(
            query,
            key,
            value,
            self.attn_mask(rng),
            self.is_causal,
            self.query_start,
            self.scale,
            self.mask,
            self.magnitude,
            self.block_size,
            self.window,
        )
        if self.alibi:
            slopes = press_slopes(Hq, B if self.batch_slopes else None)
            case = case._replace(alibi_slopes=slopes)
        if self.chunk_size is not None:
            case = case._replace(chunk_size=self.chunk_size)
        if self.softcap is not None:
            case = case._replace(softcap=self.softcap)
        if self.documents:
            case = case._replace(segment_ids=self.segment_ids())
        if not self.sinks:
            return case
        draws = np.random.default_rng(self.seed + 2)
        hidden = draws.random(Hq) < 0.25
        hidden[0] = False  # one sink at least: a call whose sinks are all -inf has none
        logits = np.where(hidden, -np.inf, _last_row_lse(case) + 2 * draws.standard_normal(Hq))
        logits = sinks_within(logits, float(ml_dtypes.finfo(self.dtype).max))
        return case._replace(sinks=logits.astype(self.dtype))

    def attn_mask(self, rng: np.random.Generator | None = None) -> np.ndarray | None:
        """The mask of :attr:`mask` (``random bool`` draws from ``rng``)."""
        Hq, Tq, Tk = self.num_heads, self.query_len, self.key_len
        if self.mask == "none":
            return None
        if self.mask == "key padding":  # the first L_b keys
            return (np.arange(Tk) < np.array(self.padding)[:, None])[:, None, None, :]
        if self.mask == "left padding":  # the last L_b keys
            return (np.arange(Tk) >= Tk - np.array(self.padding)[:, None])[:, None, None, :]
        if self.mask in ("random bool", PER_HEAD_MASK):
            rng = np.random.default_rng(self.seed + 1) if rng is None else rng
            each = (self.batch, Hq) if self.mask == PER_HEAD_MASK else ()
            mask = rng.random((*each, Tq, Tk)) < 0.5
            mask[..., 0] = True
            if self.window is not None:  # key 0 may be outside the window: show its own key
                anchor_in_window(mask, self.start, Tq, Tk)
            return mask
        if self.mask == "alibi float mask":
            start = self.start
            slopes = press_slopes(Hq)
            distance = np.abs(start + np.arange(Tq)[:, None] - np.arange(Tk)[None, :])
            return (-slopes[:, None, None] * distance)[None]  # (1, Hq, Tq, Tk)
        raise ValueError(f"mask: unknown kind {self.mask!r}; known: {(*MASK_KINDS, PER_HEAD_MASK)}")


def _last_row_lse(case: AttentionCase) -> np.ndarray:
    """``(Hq,)``: each query head's log-sum-exp of its scores (soft-capped; no mask or bias)
    on the last query row of batch 0 over every key, in float64."""
    query = case.query[:1, :, -1:].astype(np.float64)  # (1, Hq, 1, D)
    key = case.key[:1].astype(np.float64)  # (1, Hkv, Tk, D)
    scale = 1 / np.sqrt(query.shape[-1]) if case.scale is None else case.scale
    scores = scale * grouped_matmul(query, key.swapaxes(-1, -2))[0, :, 0]  # (Hq, Tk)
    if case.softcap is not None:
        scores = case.softcap * np.tanh(scores / case.softcap)
    top = scores.max(axis=1)
    return top + np.log(np.exp(scores - top[:, None]).sum(axis=1))


def _values(rng: np.random.Generator, shape, dtype: str, magnitude: str) -> np.ndarray:
    """Entries of a regime: ``unit`` standard normal, ``ties`` a coarse grid (exact ties and
    zeros), ``large`` uniform in [-200, 200] (scores far beyond ``exp``'s range), for
    bfloat16 in [-1e5, 1e5] (past float16's range: :data:`~properties.strategies.BFLOAT16_LARGE`),
    ``positive`` uniform in [0.25, 1] (sums of one sign: ``test_kernel_wide_heads.py``)."""
    if magnitude == "positive":
        x = rng.uniform(0.25, 1.0, size=shape)
    elif magnitude == "ties":
        x = rng.choice(np.array([0.0, 0.5, -0.5, 1.0, -1.0, 2.0]), size=shape)
    elif magnitude == "large":
        wide = BFLOAT16_LARGE if np.dtype(dtype) == BFLOAT16 else 200
        x = rng.uniform(-wide, wide, size=shape)
    else:
        x = rng.standard_normal(shape)
    return x.astype(dtype)
