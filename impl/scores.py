"""The steps both of impl's paths share: the scaled scores and what hides a key from a query.

:class:`Scores` is a mixin of :class:`impl.attention.Attention` (its methods call the other
steps through ``self``, so a subclass that overrides one step changes every path that takes
it). Visibility is read one block of ``rows`` by ``keys`` at a time, never broadcast to
``(B, Hq, Tq, Tk)``: the mask's block (:meth:`Scores.mask_block`) AND causality
(:meth:`Scores.causal_hidden`: key ``j`` is hidden from local query ``i`` iff
``j > query_start + i``) AND the local window (:meth:`Scores.window_hidden`: hidden iff
``j < p - left`` or ``j > p + right``, ``p = query_start + i``) AND the document
(:meth:`Scores.segment_hidden`) AND the chunk (:meth:`Scores.chunk_hidden`). The "fully
masked row" rule is checked the same way (:meth:`Scores.check_rows`). Shape legend as in
:mod:`impl`; ``G = Hq // Hkv``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from attnprops.oracle.rules import AttentionCall
from attnprops.oracle.rules import alibi_bias
from attnprops.oracle.rules import chunk_visible
from attnprops.oracle.rules import raise_fully_masked_row
from attnprops.oracle.rules import raise_score_overflow
from attnprops.oracle.rules import segment_visible
from attnprops.oracle.rules import sink_catches
from attnprops.oracle.rules import sinks_within
from attnprops.oracle.rules import window_visible

__all__ = ["Scores"]

# Keys per chunk for the fully-masked-row check when the call itself is not blocked.
_ROW_CHECK_ELEMENTS = 1 << 22


class Scores:
    """Scaling, masking and the fully-masked-row rule, one method per step."""

    # -- the scale ------------------------------------------------------------------------
    def default_scale(self, call: AttentionCall) -> float:
        """``1/sqrt(D)`` (Vaswani et al. 2017, eq. 1), what ``scale=None`` stands for."""
        return 1.0 / np.sqrt(call.query.shape[3])

    def scale(self, call: AttentionCall) -> float:
        """The call's scale, or :meth:`default_scale` when it has none."""
        return self.default_scale(call) if call.scale is None else call.scale

    def scaled_query(self, call: AttentionCall, compute: np.dtype) -> np.ndarray:
        """``query * scale`` in the compute dtype, grouped ``(B, Hkv, G, Tq, D)``.

        The query is scaled before the product, so a dot product that only the scale brings
        back into range does not overflow (left: partial sums beyond the range)."""
        B, Hq, Tq, D = call.query.shape
        Hkv = call.key.shape[1]
        scale = self.scale(call)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            query = call.query.astype(compute, copy=False) * compute.type(scale)  # (B, Hq, Tq, D)
        return query.reshape(B, Hkv, Hq // Hkv, Tq, D)

    def scores_in_range(self, call: AttentionCall, compute: np.dtype) -> bool:
        """True when no visible scaled score plus mask entry can overflow ``compute``, so the
        per-block overflow scan can be skipped: ``|s_ij| <= scale * D * max|q| * max|k|``, plus
        the largest ``|mask|``, stays below half the dtype's maximum. Costs a few reductions
        over query and key, so it is only tried when the scores are much larger than the
        inputs; NaN, infinity or a ``-inf`` mask entry give False (the scan then runs)."""
        B, Hq, Tq, Tk = call.shape
        if B * Hq * Tq * Tk < 4 * (call.query.size + call.key.size):
            return False
        D = call.query.shape[3]
        scale = self.scale(call)
        with np.errstate(all="ignore"):
            bound = (
                scale
                * D
                * max(float(call.query.max()), -float(call.query.min()))
                * max(float(call.key.max()), -float(call.key.min()))
            )
            if call.float_mask:
                bound += max(abs(float(call.mask.min())), abs(float(call.mask.max())))
            if call.alibi is not None:  # |slope| times a bound on every |p - j|
                distance = abs(call.query_start) + call.shape[2] + call.shape[3]
                bound += float(np.abs(call.alibi).max()) * distance
        return bool(bound < 0.5 * float(ml_dtypes.finfo(compute).max))  # NaN compares False

    def alibi_block(
        self, call: AttentionCall, rows: slice, keys: slice, compute: np.dtype
    ) -> np.ndarray | None:
        """ALiBi's ``-slope * |p - j|`` for the block in the compute dtype (the product in
        float64, rounded once to it: a distance of 0 stays 0 whatever the slope),
        ``(B or 1, Hq, len(rows), len(keys))``; None without ``alibi_slopes``
        (:mod:`oracle.rules.alibi`). A bias beyond the compute dtype's range becomes
        ``-inf``/``inf`` and a visible one raises the score-overflow rule."""
        with np.errstate(over="ignore", invalid="ignore"):  # beyond the dtype: -inf, raised
            bias = alibi_bias(call.alibi, call.query_start, rows, keys)  # float64
            return None if bias is None else bias.astype(compute)

    def softcap_scores(self, scores: np.ndarray, call: AttentionCall, compute: np.dtype) -> None:
        """In place: ``c * tanh(s / c)`` on the scaled scores, in the compute dtype, before
        the mask and the biases (:mod:`oracle.rules.softcap`; Gemma 2, FlashAttention's
        ``softcap``); in float64, rounded once to the compute dtype, when ``c`` is outside its
        normal range (``1e39`` in float32 would be ``inf``, and ``s / inf * inf`` NaN)."""
        info = ml_dtypes.finfo(compute)
        if not info.tiny <= call.softcap <= info.max:  # a cap the compute dtype cannot hold
            capped = call.softcap * np.tanh(scores.astype(np.float64) / call.softcap)
            np.copyto(scores, capped.astype(compute))  # in float64, rounded once
            return
        cap = compute.type(call.softcap)
        np.divide(scores, cap, out=scores)
        np.tanh(scores, out=scores)
        np.multiply(scores, cap, out=scores)

    def sink_logits(self, call: AttentionCall, compute: np.dtype) -> np.ndarray:
        """Each query head's sink ``(Hq,)`` in the compute dtype (:mod:`oracle.rules.sinks`),
        clipped to its finite range first (:func:`oracle.rules.sinks_within`)."""
        return sinks_within(call.sinks, float(ml_dtypes.finfo(compute).max)).astype(compute)

    # -- visibility -----------------------------------------------------------------------
    def mask_block(self, call: AttentionCall, rows: slice, keys: slice) -> np.ndarray | None:
        """The mask entries of query rows ``rows`` and keys ``keys``: a view of the caller's
        mask, still broadcastable (axes of length 1 stay 1). ``None`` without a mask."""
        mask = call.mask
        if mask is None:
            return None
        return mask[
            :,
            :,
            rows if mask.shape[2] > 1 else slice(None),
            keys if mask.shape[3] > 1 else slice(None),
        ]

    def causal_hidden(self, call: AttentionCall, rows: slice, keys: slice) -> np.ndarray | None:
        """Bool ``(r, keys)`` for the first ``r <= len(rows)`` rows of the block: True where
        causality hides key ``j`` from local query ``i`` (``j > query_start + i``). The rows
        after the first ``r`` see every key of the block. ``None`` when nothing in the block
        is hidden."""
        if not call.is_causal:
            return None
        # Query i sees the whole block iff keys.stop - 1 <= query_start + i.
        stop = min(rows.stop, max(rows.start, keys.stop - 1 - call.query_start))
        if stop == rows.start:
            return None
        i = np.arange(rows.start, stop)[:, None]
        j = np.arange(keys.start, keys.stop)[None, :]
        return j > call.query_start + i

    def window_hidden(self, call: AttentionCall, rows: slice, keys: slice) -> np.ndarray | None:
        """Bool ``(len(rows), len(keys))``: True where the local window hides key ``j`` from
        local query ``i`` (``j < p - left`` or ``j > p + right``, ``p = query_start + i``;
        :func:`oracle.rules.check_window`). ``None`` without a window."""
        if call.window is None:
            return None
        start = call.query_start + rows.start
        visible = window_visible(
            call.window, start - keys.start, rows.stop - rows.start, keys.stop - keys.start
        )
        return ~visible

    def segment_hidden(self, call: AttentionCall, rows: slice, keys: slice) -> np.ndarray | None:
        """Bool ``(B or 1, 1, len(rows), len(keys))``: True where query and key are in
        different documents (``segment_ids``, :mod:`oracle.rules.packing`); None without."""
        same = segment_visible(call.segments, rows, keys)
        return None if same is None else ~same

    def chunk_hidden(self, call: AttentionCall, rows: slice, keys: slice) -> np.ndarray | None:
        """Bool ``(len(rows), len(keys))``: True where the query at ``p`` and key ``j`` are in
        different chunks (``p // C != j // C``); None without ``chunk_size``."""
        same = chunk_visible(call.chunk_size, call.query_start, rows, keys)
        return None if same is None else ~same

    def position_hidden(self, call: AttentionCall, rows: slice, keys: slice) -> list:
        """The hidden-key arrays of the rules by position and document (window, segments,
        chunks) for a block, each broadcastable to ``(B, Hq, len(rows), len(keys))``."""
        hidden = (
            self.window_hidden(call, rows, keys),
            self.segment_hidden(call, rows, keys),
            self.chunk_hidden(call, rows, keys),
        )
        return [h for h in hidden if h is not None]

    def visible_block(self, call: AttentionCall, rows: slice, keys: slice) -> np.ndarray | bool:
        """Visibility of a block (mask AND causality AND window AND document AND chunk),
        broadcastable to the block's shape."""
        visible = True
        mask = self.mask_block(call, rows, keys)
        if mask is not None:
            visible = mask if mask.dtype == np.bool_ else ~np.isneginf(mask)
        hidden = self.causal_hidden(call, rows, keys)
        if hidden is not None:
            below = np.zeros((rows.stop - rows.start - hidden.shape[0], hidden.shape[1]), bool)
            visible = visible & ~np.concatenate([hidden, below])
        for outside in self.position_hidden(call, rows, keys):
            visible = visible & ~outside
        return visible

    def window_rows_empty(self, call: AttentionCall) -> np.ndarray:
        """Bool ``(Tq,)``: True where a query sees no key through causality and the window
        alone (no mask): its window ``[p - left, p + right]`` misses ``[0, Tk)``, or lies
        after ``p`` under causality."""
        Tq, Tk = call.shape[2:]
        left, right = call.window
        p = call.query_start + np.arange(Tq)
        lo = np.zeros(Tq, dtype=int) if left is None else np.maximum(0, p - left)
        hi = np.full(Tq, Tk - 1) if right is None else np.minimum(Tk - 1, p + right)
        if call.is_causal:
            hi = np.minimum(hi, p)
        return lo > hi

    def check_rows(self, call: AttentionCall, block_size: int | None = None) -> None:
        """The rulebook's "fully masked row" rule (same message), one key block at a time.

        Without a mask, window, segments or chunks every row sees a key: key 0 is causally
        visible to every query because ``query_start >= 0`` whenever ``is_causal``. A window
        alone is checked by position (:meth:`window_rows_empty`), the rest block by block.
        The rows of a head with a finite sink are spared (:mod:`oracle.rules.sinks`).

        Raises:
            oracle.rules.FullyMaskedRowError naming the first such row and their count.
        """
        B, Hq, Tq, Tk = call.shape
        packed = call.segments is not None or call.chunk_size is not None
        if call.mask is None and not packed:
            if call.window is not None:
                empty = self.window_rows_empty(call) & ~sink_catches(call.sinks, Hq)
                if empty.any():
                    raise_fully_masked_row(np.broadcast_to(empty, (B, Hq, Tq)))
            return
        mb, mh = (1, 1) if call.mask is None else call.mask.shape[:2]
        if call.segments is not None:  # either id array may hold one row per batch element
            mb = max(mb, call.segments[0].shape[0], call.segments[1].shape[0])
        if block_size is None:
            block_size = max(1, _ROW_CHECK_ELEMENTS // (mb * mh * Tq))
        # rows differ by position (causality, window, chunks) or document
        by_position = call.is_causal or call.window is not None or packed
        rows = Tq if by_position or call.mask is None else call.mask.shape[2]
        seen = np.zeros((mb, mh, rows), dtype=bool)
        last = min(Tk, call.query_start + Tq) if call.is_causal else Tk
        broadcast_keys = call.mask is None or call.mask.shape[3] == 1
        span = Tk if broadcast_keys and not by_position else block_size
        all_rows = slice(0, Tq)
        for j0 in range(0, last, span):
            keys = slice(j0, min(j0 + span, last))
            visible = np.broadcast_to(
                self.visible_block(call, all_rows, keys), (mb, mh, rows, keys.stop - keys.start)
            )
            seen |= np.any(visible, axis=-1)
            if seen.all():
                return
        empty = ~np.broadcast_to(seen, (B, Hq, Tq)) & ~sink_catches(call.sinks, Hq)
        if empty.any():
            raise_fully_masked_row(empty)

    def mask_scores(
        self,
        scores: np.ndarray,
        call: AttentionCall,
        compute: np.dtype,
        rows: slice,
        keys: slice,
        in_range: bool = False,
    ) -> None:
        """In place on ``scores`` ``(B, Hq, len(rows), len(keys))``: cap them when the call has
        a ``softcap`` (:meth:`softcap_scores`), add the float mask and ALiBi's bias
        (:meth:`alibi_block`), raise on a visible score that overflows (not scanned when
        ``in_range``, see :meth:`scores_in_range`), set hidden keys (mask, causality, window,
        documents, chunks) to ``-inf``. Visible entries get exactly ``capped(scores) +
        mask.astype(compute) + alibi``.

        Raises:
            oracle.rules.ScoreOverflowError for a visible score that is not finite.
        """
        mask = self.mask_block(call, rows, keys)
        alibi = self.alibi_block(call, rows, keys, compute)
        with np.errstate(over="ignore", invalid="ignore"):
            if call.softcap is not None:  # the scaled score must fit before it is capped
                if not in_range and not np.isfinite(scores).all():
                    if np.any(~np.isfinite(scores) & self.visible_block(call, rows, keys)):
                        raise_score_overflow(call)
                self.softcap_scores(scores, call, compute)
            if mask is not None and mask.dtype != np.bool_:
                np.add(scores, mask.astype(compute, copy=False), out=scores)
            if alibi is not None:
                np.add(scores, alibi, out=scores)
            if not in_range:
                finite = np.isfinite(scores)
                if not finite.all():
                    if np.any(~finite & self.visible_block(call, rows, keys)):
                        raise_score_overflow(call)
                    np.copyto(scores, compute.type(-np.inf), where=~finite)  # only hidden keys
        # A float mask's -inf entries are -inf in the scores already (finite + -inf).
        if mask is not None and mask.dtype == np.bool_:
            np.copyto(scores, compute.type(-np.inf), where=~mask)
        hidden = self.causal_hidden(call, rows, keys)
        if hidden is not None:
            np.copyto(scores[:, :, : hidden.shape[0]], compute.type(-np.inf), where=hidden)
        for outside in self.position_hidden(call, rows, keys):
            np.copyto(scores, compute.type(-np.inf), where=outside)
