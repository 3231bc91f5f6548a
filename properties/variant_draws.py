"""Draws of the attention variants and edits of drawn cases: local windows (their sides, fitted
to a negative first position, each query's own key kept visible), packed documents, ALiBi
slopes, sink logits, rows left to their sink, and keys hidden after the draw. The strategies
of :mod:`properties.strategies` and the variant properties build on them; what each draws
and where it shrinks is in its docstring."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

if TYPE_CHECKING:
    from attnprops.properties.strategies import AttentionCase

__all__ = [
    "alibi_slopes",
    "anchor_in_window",
    "attention_sinks",
    "documents",
    "press_slopes",
    "fit_window",
    "rows_left_to_the_sink",
    "window_sides",
    "with_keys_hidden",
]


def window_sides(max_side: int, sliding_window: bool = False):
    """The sides of a local window ``(left, right)`` (:func:`oracle.rules.check_window`):
    each an int in ``[0, max_side]`` (shrinks to 0: the query alone) or None (unbounded).
    ``sliding_window``: Hugging Face's convention, ``left`` an int and ``right`` None (its
    windows are causal, ``sliding_window = left + 1``)."""
    side = st.one_of(st.integers(0, max_side), st.none())
    if sliding_window:
        return st.tuples(st.integers(0, max_side), st.none())
    return st.tuples(side, side)


def fit_window(window, start: int):
    """``window`` with ``right`` raised to ``-start`` when the first query's position
    ``start`` is negative (``query_start=None`` with ``Tq > Tk``), so that every query's
    window reaches key 0; the strategies draw windows that leave no row without a key."""
    left, right = window
    if right is not None and start < 0:
        right = max(right, -start)
    return left, right


def anchor_in_window(mask: np.ndarray | None, start: int, Tq: int, Tk: int) -> None:
    """In place: make each query's own position (``start + i``, clipped to ``[0, Tk)``)
    visible in ``mask`` (True, or 0.0 for a float mask), in every broadcast row that serves
    it. That key is in every window (both sides >= 0; :func:`fit_window`) and causally
    visible, so a windowed case keeps a key in every row."""
    if mask is None:
        return
    keys = np.clip(start + np.arange(Tq), 0, Tk - 1)
    fill = True if mask.dtype == np.bool_ else 0.0
    if mask.shape[-1] == 1:  # one entry for every key: it must not hide
        if mask.dtype == np.bool_:
            mask[...] = True
        else:
            mask[np.isneginf(mask)] = 0.0
        return
    if mask.ndim >= 2 and mask.shape[-2] == Tq and Tq > 1:
        mask[..., np.arange(Tq), keys] = fill
    elif mask.ndim >= 2:
        mask[..., 0, keys] = fill
    else:
        mask[keys] = fill


@st.composite
def documents(draw, batch: int, Tq: int, Tk: int, start: int):
    """``segment_ids`` for packed documents: each key's document id, per batch element or
    one row for all (query and key ids choose apart, so ``(1, Tq)`` meets ``(B, Tk)``), or
    the 1-D form; non-decreasing with gaps (an id skipped is a document of length zero) or,
    a third of the time, any small id (FlexAttention allows documents that interleave).
    Each query gets the id of the key at its own position (clipped to ``[0, Tk)``) in every
    batch element, so every query has a key of its document at its position."""
    flat = draw(st.booleans()) and draw(st.booleans())  # the 1-D form, a quarter of the time
    rows_k = 1 if flat else draw(st.sampled_from([batch, 1]))
    rows_q = 1 if flat else draw(st.sampled_from([batch, 1]))
    keys = []
    for _ in range(rows_k):
        if draw(st.integers(0, 2)) == 0:
            ids = draw(hnp.arrays(np.int64, Tk, elements=st.integers(0, 3)))
        else:
            steps = draw(hnp.arrays(np.int64, Tk, elements=st.integers(0, 2)))
            ids = np.cumsum(steps) - steps[0]
        keys.append(ids)
    key_ids = np.stack(keys)  # (rows_k, Tk)
    own = np.clip(start + np.arange(Tq), 0, Tk - 1)  # each query's own key
    query_ids = np.broadcast_to(key_ids[:, own], (max(rows_q, rows_k), Tq))[:rows_q].copy()
    if rows_q == 1 and rows_k > 1:  # one row of query ids: every batch element's own key too
        key_ids[:, own] = query_ids[0]
    if flat:
        return query_ids[0], key_ids[0]
    return query_ids, key_ids


def press_slopes(num_heads: int, batch: int | None = None) -> np.ndarray:
    """Press et al.'s (2022) geometric ALiBi slopes ``2**(-8 k / Hq)``, ``k = 1 .. Hq``,
    float64 ``(Hq,)``; with ``batch``, ``(B, Hq)`` whose row ``b`` is divided by ``b + 1`` (every
    batch element its own slopes, so reading another's row shows)."""
    slopes = 2.0 ** (-8.0 * np.arange(1, num_heads + 1) / num_heads)
    return slopes if batch is None else slopes[None, :] / np.arange(1, batch + 1)[:, None]


@st.composite
def alibi_slopes(draw, batch: int, num_heads: int):
    """ALiBi slopes, ``(Hq,)`` or ``(B, Hq)`` float64: Press et al.'s geometric
    ``2**(-8 k / Hq)``, ``k = 1 .. Hq`` (half the time), else any in ``[-2, 2]`` (a negative
    slope, a slope of 0, per batch element)."""
    if draw(st.booleans()):
        slopes = press_slopes(num_heads)
    else:
        shape = draw(st.sampled_from([(num_heads,), (batch, num_heads)]))
        slopes = draw(hnp.arrays(np.float64, shape, elements=st.floats(-2, 2, width=32)))
    return slopes


@st.composite
def attention_sinks(draw, num_heads: int, dtype):
    """Sink logits ``(Hq,)`` in ``dtype`` (:mod:`oracle.rules.sinks`): each ``-inf`` (no sink),
    near the scores (``[-8, 8]``), far above them (the sink takes nearly all the weight) or
    far below (``-100``: nothing), a third of the time one value for every head."""
    logit = st.one_of(
        st.just(-np.inf),
        st.floats(-8, 8, width=16),
        st.sampled_from([0.0, 30.0, -100.0]),
        st.floats(-300, 300, width=16),
    )
    if draw(st.integers(0, 2)) == 0:
        return np.full(num_heads, draw(logit), dtype=dtype)
    return np.array(draw(st.lists(logit, min_size=num_heads, max_size=num_heads)), dtype=dtype)


@st.composite
def rows_left_to_the_sink(draw, case: AttentionCase) -> AttentionCase:
    """``case`` (with sinks) with some query rows of heads whose sink is finite hiding every
    key (a bool mask, or ``-inf`` in the float mask, now full ``(B, Hq, Tq, Tk)``): the rows a
    sink makes valid, whose weights and output are 0. Unchanged when no head has a finite
    sink, or (a third of the time) drawn so."""
    finite = np.flatnonzero(np.isfinite(case.sinks))
    if not finite.size or draw(st.integers(0, 2)) == 0:
        return case
    B, Hq, Tq, _ = (1, 1) + case.query.shape if case.query.ndim == 2 else case.query.shape
    hidden = np.zeros((B, Hq, Tq), dtype=bool)
    for b, h, i in draw(
        st.lists(
            st.tuples(
                st.integers(0, B - 1), st.sampled_from(finite.tolist()), st.integers(0, Tq - 1)
            ),
            min_size=1,
            max_size=3,
        )
    ):
        hidden[b, h, i] = True
    return with_keys_hidden(case, hidden[..., None])  # (B, Hq, Tq, 1): whole rows


def with_keys_hidden(case: AttentionCase, hidden, layout: str | None = None) -> AttentionCase:
    """``case`` with the keys where ``hidden`` (bool, broadcastable to ``(B, Hq, Tq, Tk)``)
    is True hidden too: its mask made full, a bool one AND-ed with ``~hidden``, a float one
    ``-inf`` there (in its dtype); a 2-D case keeps a ``(Tq, Tk)`` mask. ``layout``: the mask
    layout to record (default: the full mask's)."""
    two_d = case.query.ndim == 2
    B, Hq, Tq, _ = (1, 1) + case.query.shape if two_d else case.query.shape
    shape = (B, Hq, Tq, case.key.shape[-2])
    hidden = np.broadcast_to(hidden, shape)
    mask = case.attn_mask
    if mask is not None and mask.dtype != np.bool_:
        full = np.where(hidden, -np.inf, np.broadcast_to(mask, shape)).astype(mask.dtype)
    else:
        full = np.broadcast_to(True if mask is None else mask, shape) & ~hidden
    if two_d:
        return case._replace(attn_mask=full[0, 0], mask_layout=layout or "(Tq, Tk)")
    return case._replace(attn_mask=full, mask_layout=layout or "per-head (B, Hq, Tq, Tk)")
