"""Which query rows (and, with many heads, which query heads) the kernel-sized reference
computes: the rows at tile boundaries, the heads at the head counts kernels are written for,
and a case cut to them for the bounds.

The ball reference (:mod:`oracle.ball`) costs ``len(rows) * Tk`` per head; a kernel-sized
property checks the rows where tiled kernels break (:func:`boundary_rows`) against it, with
the bounds of :func:`rows_of`'s case; with dozens of query heads, on the heads of
:func:`boundary_heads` only (:func:`heads_of`).
"""

from __future__ import annotations

import numpy as np

from attnprops.properties.sizes import TILES
from attnprops.properties.strategies import AttentionCase

__all__ = ["boundary_heads", "boundary_rows", "heads_of", "rows_of"]

# Head counts kernels are written for: a block of heads, a table of per-head parameters.
HEAD_BLOCKS = (16, 32, 64)


def boundary_rows(case: AttentionCase, *, limit: int = 24) -> list[int]:
    """Query rows where tiled kernels go wrong, at most ``limit`` of them: the first and last
    rows; rows at and next to a query-tile edge (``k t - 1``, ``k t``); rows whose causally
    visible keys end at or just past a key-tile edge (``query_start + i + 1`` equal to ``k t``
    or ``k t + 1``); rows whose window starts at or just past one (``query_start + i - left``
    equal to ``k t`` or ``k t + 1``); the last and first rows of each packed document (1-D
    ``segment_ids``); larger tiles first (they are also edges of the smaller ones)."""
    Tq, Tk = case.query.shape[-2], case.key.shape[-2]
    start = case.start
    left = None if case.window is None else case.window[0]
    rows = [0, Tq - 1]
    if case.segment_ids is not None and case.segment_ids[0].ndim == 1:
        changes = np.flatnonzero(np.diff(case.segment_ids[0])) + 1  # first rows of a document
        rows += [int(i) for c in changes for i in (c - 1, c)]
    for t in sorted(TILES, reverse=True):
        for k in range(1, max(Tq, Tk) // t + 2):
            rows += [k * t - 1, k * t]
            if case.is_causal:
                rows += [k * t - 1 - start, k * t - start]
            if left is not None:  # the window's first key at a key-tile edge
                rows += [k * t + left - start, k * t + left + 1 - start]
    picked = []
    for i in rows:
        if 0 <= i < Tq and i not in picked:
            picked.append(i)
    return sorted(picked[:limit])


def rows_of(case: AttentionCase, rows: list[int]) -> AttentionCase:
    """``case`` restricted to the query rows ``rows`` (the query and the mask's query axis):
    for the bounds of a reference computed on those rows (visibility comes from the
    reference's scores), or, with its query position and documents set, as a call of its
    own (:func:`properties._support.last_row_alone`)."""
    mask = case.attn_mask
    Tq = case.query.shape[2]
    if mask is not None and mask.ndim >= 2 and mask.shape[-2] == Tq:
        mask = mask[..., rows, :]
    return case._replace(query=case.query[:, :, rows], attn_mask=mask)


def boundary_heads(num_heads: int) -> list[int]:
    """Query heads where a head index that wraps at a count of :data:`HEAD_BLOCKS` goes
    wrong, and the ends: ``0``, ``n - 1`` and ``n`` for each count ``n``, and the last head
    (at most 8 heads, ascending)."""
    heads = {0, num_heads - 1}
    for n in HEAD_BLOCKS:
        heads |= {n - 1, n}
    return sorted(h for h in heads if h < num_heads)


def heads_of(case: AttentionCase, heads: list[int]) -> AttentionCase:
    """``case`` cut to the query heads ``heads`` (in that order), each with its own K/V head
    (``h // G``, so the cut case has ``Hq = Hkv = len(heads)``), its slice of a per-head mask,
    its sink and its ALiBi slope: what the reference computes for those heads of ``case``."""
    Hq = case.query.shape[1]
    index = np.asarray(heads)
    kv = index // (Hq // case.key.shape[1])
    mask = case.attn_mask
    if mask is not None and mask.ndim >= 3 and mask.shape[-3] == Hq:
        mask = mask[..., index, :, :]
    slopes = case.alibi_slopes
    return case._replace(
        query=case.query[:, index],
        key=case.key[:, kv],
        value=case.value[:, kv],
        attn_mask=mask,
        alibi_slopes=None if slopes is None else slopes[..., index],
        sinks=None if case.sinks is None else case.sinks[index],
    )
