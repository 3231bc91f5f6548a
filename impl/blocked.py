"""impl's blocked path (``block_size=n``): tiles of ``n`` queries by ``n`` keys with an online
softmax (Milakov & Gimelshein 2018, "Online normalizer calculation for softmax"; Dao et al.
2022, "FlashAttention").

A running row maximum ``m`` and running sum ``l``; the running output is rescaled by
``exp(m_old - m_new)`` whenever the maximum grows. Peak extra memory is O(B Hq n (n + Dv))
instead of O(B Hq Tq Tk), and each tile's scores stay in cache. Key blocks that no query of a
tile may see (causal) are skipped, and query rows that see nothing of a key block are left out
of it; so are the key blocks outside every row's local window. Masks are read one block at a
time (:class:`impl.scores.Scores`); each head's sink is folded in once per query tile, after
its last key block. Results agree with the dense path up to rounding (within the suite's error bounds). :class:`BlockedPath` is a mixin
of :class:`impl.attention.Attention`, one method per step. Shape legend as in :mod:`impl`.
"""

from __future__ import annotations

import numpy as np

from attnprops.oracle.rules import AttentionCall

__all__ = ["BlockedPath"]


class BlockedPath:
    """The blocked path, one method per step."""

    def key_block_starts(self, stop: int, block_size: int) -> range:
        """First key of each block: ``0, n, 2n, ...`` below ``stop``; the last block may be
        short."""
        return range(0, stop, block_size)

    def tile_key_range(self, call: AttentionCall, rows: slice, block_size: int) -> tuple[int, int]:
        """``(first, stop)``: the key blocks a tile of query ``rows`` visits start at
        ``first`` (a multiple of ``block_size``: the block holding the first key the window
        lets the tile's first query see, and the start of its chunk) and end before ``stop``
        (causality: no key after the tile's last query position; the window: none after its
        ``p + right``; chunks: none after the last row's chunk). Blocks outside
        are seen by no row of the tile and skipped, as tiled kernels skip them."""
        Tk = call.shape[3]
        start = call.query_start
        stop = min(Tk, start + rows.stop) if call.is_causal else Tk
        first = 0
        if call.window is not None:
            left, right = call.window
            if right is not None:
                stop = max(0, min(stop, start + rows.stop + right))
            if left is not None:
                first = max(0, start + rows.start - left)
        if call.chunk_size is not None:  # keys of the chunks of the tile's first and last rows
            C = call.chunk_size
            first = max(first, (start + rows.start) // C * C)
            stop = max(0, min(stop, ((start + rows.stop - 1) // C + 1) * C))
        return min(stop, first) // block_size * block_size, stop

    def online_softmax_step(
        self, m: np.ndarray, l: np.ndarray, acc: np.ndarray, s: np.ndarray, value: np.ndarray
    ) -> None:
        """Fold one key block into the running state, in place.

        ``m``, ``l`` ``(..., n, 1)``: running max and running sum of ``exp(s - m)``; ``acc``
        ``(..., n, Dv)``: running sum of ``exp(s - m) * v``; ``s`` ``(..., n, nk)``: the
        block's masked scores (``-inf`` where hidden; overwritten); ``value`` ``(..., nk,
        Dv)``. When the maximum grows from ``m`` to ``m_new``, what was summed under ``m`` is
        rescaled by ``exp(m - m_new)`` (Milakov & Gimelshein 2018, alg. 3; Dao et al. 2022,
        alg. 1).
        """
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
        # A row that has seen no visible key yet keeps m = -inf; subtract 0 there (-inf stays).
        shift = np.where(m_new == -np.inf, s.dtype.type(0), m_new)
        alpha = np.exp(m - shift)  # <= 1; 0 while the row had seen nothing
        p = np.exp(np.subtract(s, shift, out=s), out=s)  # exp(-inf) == 0 for hidden keys
        l *= alpha
        l += p.sum(axis=-1, keepdims=True)
        acc *= alpha
        acc += np.matmul(p, value)
        m[...] = m_new

    def fold_sinks(
        self, m: np.ndarray, l: np.ndarray, acc: np.ndarray, call: AttentionCall
    ) -> None:
        """Fold each head's sink into a tile's running state, in place, once, after its last
        key block: one more online-softmax step (:meth:`online_softmax_step`) over a key of
        score ``sigma_h`` and value 0 (:mod:`oracle.rules.sinks`). ``m``, ``l``, ``acc`` as
        there, grouped ``(B, Hkv, G, n, 1)`` / ``(..., n, Dv)``. A sink of ``-inf`` changes
        nothing; a row that saw no key gets ``l = 1``, ``acc = 0``."""
        B, Hkv, G, n, _ = m.shape
        s = np.empty(m.shape, dtype=m.dtype)
        s[...] = self.sink_logits(call, m.dtype).reshape(1, Hkv, G, 1, 1)
        self.online_softmax_step(m, l, acc, s, np.zeros((1, 1, 1, 1, acc.shape[-1]), m.dtype))

    def tile_lse(self, m: np.ndarray, l: np.ndarray) -> np.ndarray:
        """A tile's log-sum-exp from its running state before the sinks are folded in:
        ``m + log(l)`` (``-inf`` for a row that saw no key: ``l = 0``), ``(..., n)``."""
        with np.errstate(divide="ignore", invalid="ignore"):
            shift = np.where(np.isneginf(m), m.dtype.type(0), m)
            return (shift + np.log(l))[..., 0]

    def blocked_output(
        self,
        call: AttentionCall,
        compute: np.dtype,
        block_size: int,
        lse: np.ndarray | None = None,
    ) -> np.ndarray:
        """``softmax(scores) @ value`` ``(B, Hq, Tq, Dv)`` in the compute dtype, in tiles of
        ``block_size`` queries by ``block_size`` keys with an online softmax (running max
        ``m``, running sum ``l`` per query row). Peak extra memory O(B Hq (block_size**2 + Tq
        Dv)).

        Also applies the finiteness rule to query, key and value, which ``call`` was
        validated without (:meth:`Attention.check_finite`): each key/value block is scanned
        when it is first used (while it is in cache), the keys no query sees at the end.
        Raises NonFiniteInputError on the first bad block (the caller then reruns the full
        validation for the rulebook's first error). ``lse``: an array ``(B, Hq, Tq)`` to fill
        with each row's log-sum-exp (:meth:`tile_lse`), or None."""
        B, Hq, Tq, Tk = call.shape
        Hkv, Dv = call.key.shape[1], call.value.shape[3]
        G = Hq // Hkv
        start = call.query_start
        self.check_finite(call.query, "query")
        query = self.scaled_query(call, compute)  # (B, Hkv, G, Tq, D)
        key = call.key.astype(compute, copy=False)  # (B, Hkv, Tk, D)
        value = call.value.astype(compute, copy=False)  # (B, Hkv, Tk, Dv)
        out = np.empty((B, Hkv, G, Tq, Dv), dtype=compute)
        in_range = self.scores_in_range(call, compute)
        scanned = 0  # keys/values [0, scanned) are known to be finite

        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            for t0 in range(0, Tq, block_size):  # one tile of query rows at a time
                t1 = min(Tq, t0 + block_size)
                m = np.full((B, Hkv, G, t1 - t0, 1), -np.inf, dtype=compute)  # running max
                l = np.zeros((B, Hkv, G, t1 - t0, 1), dtype=compute)  # running sum of exp(s - m)
                acc = np.zeros((B, Hkv, G, t1 - t0, Dv), dtype=compute)  # ... of exp(s - m) v
                # Keys outside [first, last) are seen by none of the tile's rows (causality,
                # the window): their blocks are skipped.
                first, last = self.tile_key_range(call, slice(t0, t1), block_size)
                for j0 in self.key_block_starts(last, block_size):
                    if j0 < first:
                        continue
                    keys = slice(j0, min(j0 + block_size, last))
                    fresh = slice(scanned, keys.stop)  # first use of these keys: scan them
                    if fresh.stop > fresh.start:  # (each block right before its product reads it)
                        self.check_finite(call.key[:, :, fresh], "key")
                    # Causal: query i sees key j0 iff j0 <= start + i; earlier rows skip it.
                    i0 = min(t1, max(t0, j0 - start)) if call.is_causal else t0
                    rows, local = slice(i0, t1), slice(i0 - t0, t1 - t0)
                    k_t = key[:, :, None, keys].swapaxes(-1, -2)  # (B, Hkv, 1, D, nk)
                    s = np.matmul(query[:, :, :, rows], k_t)  # (B, Hkv, G, n, nk)
                    self.mask_scores(
                        s.reshape(B, Hq, t1 - i0, -1), call, compute, rows, keys, in_range
                    )
                    if fresh.stop > fresh.start:
                        self.check_finite(call.value[:, :, fresh], "value")
                        scanned = fresh.stop
                    self.online_softmax_step(
                        m[:, :, :, local],
                        l[:, :, :, local],
                        acc[:, :, :, local],
                        s,
                        value[:, :, None, keys],
                    )
                if lse is not None:
                    lse.reshape(B, Hkv, G, Tq)[:, :, :, t0:t1] = self.tile_lse(m, l)
                if call.sinks is not None:
                    self.fold_sinks(m, l, acc, call)
                # every row has a visible key or a finite sink (checked), so l >= 1
                np.divide(acc, l, out=out[:, :, :, t0:t1])
        if scanned < Tk:  # keys that no query sees are inputs too: the rule covers them
            self.check_finite(call.key[:, :, scanned:], "key")
            self.check_finite(call.value[:, :, scanned:], "value")
        return out.reshape(B, Hq, Tq, Dv)
