"""Which query rows the kernel-sized reference computes: the rows at tile boundaries, and a
case cut to them for the bounds.

The ball reference (:mod:`oracle.ball`) costs ``len(rows) * Tk`` per head; a kernel-sized
property checks the rows where tiled kernels break (:func:`boundary_rows`) against it, with
the bounds of :func:`rows_of`'s case.
"""

from __future__ import annotations

import numpy as np

from attnprops.properties.sizes import TILES
from attnprops.properties.strategies import AttentionCase

__all__ = ["boundary_rows", "rows_of"]


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
    """``case`` restricted to the query rows ``rows`` for the bounds of a reference computed
    on those rows (the query and the mask's query axis; visibility comes from the
    reference's scores)."""
    mask = case.attn_mask
    Tq = case.query.shape[2]
    if mask is not None and mask.ndim >= 2 and mask.shape[-2] == Tq:
        mask = mask[..., rows, :]
    return case._replace(query=case.query[:, :, rows], attn_mask=mask)
