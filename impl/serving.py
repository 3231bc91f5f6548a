"""Attention over serving-side KV caches (:class:`ServingAttention`, a mixin of
:class:`impl.attention.Attention`): one length per sequence (``cache_seqlens``) over contiguous
storage or a pool of pages addressed by a block table (:mod:`oracle.rules.serving`).

Each sequence is gathered to its own contiguous ``(1, Hkv, L_b, D)`` keys (a page gather is one
fancy index of the pool and a reshape, no Python loop over positions) and attended alone, its
queries the last ``Tq`` of its ``L_b`` positions; the outputs are stacked. Lengths differ, so
the sequences are not stacked into one call: padding them to one length would need the padded
keys masked, which is the very bug class this API exists to rule out.
"""

from __future__ import annotations

import numpy as np

from attnprops.impl.paged_cache import PagedKVCache
from attnprops.oracle.rules import CACHED_OPTIONS
from attnprops.oracle.rules import SERVING_OPTIONS
from attnprops.oracle.rules import KVCacheCall
from attnprops.oracle.rules import check_kvcache_call
from attnprops.oracle.rules import check_paged_cached_call
from attnprops.oracle.rules import check_sequence_finite
from attnprops.oracle.rules import pages_needed
from attnprops.oracle.rules import pool_call
from attnprops.oracle.rules import sequence_options
from attnprops.oracle.rules import takes_options

__all__ = ["ServingAttention"]


class ServingAttention:
    """:meth:`attention_with_kvcache`, as a step of :class:`impl.attention.Attention` (it calls
    ``self.attention`` once per sequence)."""

    def sequence_kv(self, call: KVCacheCall, b: int) -> tuple[np.ndarray, np.ndarray]:
        """Sequence ``b``'s keys ``(1, Hkv, L_b, D)`` and values ``(1, Hkv, L_b, Dv)``: the
        first ``L_b`` positions of its row (contiguous), or of its pages in block-table order
        (paged; position ``t`` in page ``block_table[b, t // S]``, slot ``t % S``)."""
        length = int(call.lengths[b])
        if call.block_table is None:
            return call.key_cache[b : b + 1, :, :length], call.value_cache[b : b + 1, :, :length]
        pages = call.block_table[b, : pages_needed(length, call.page_size)]
        gathered = []
        for pool in (call.key_cache, call.value_cache):
            heads, last = pool.shape[1], pool.shape[3]
            rows = (
                pool[pages].transpose(1, 0, 2, 3).reshape(heads, pages.size * call.page_size, last)
            )
            gathered.append(rows[None, :, :length])
        return gathered[0], gathered[1]

    @takes_options(only=SERVING_OPTIONS)
    def attention_with_kvcache(
        self, query, key_cache, value_cache, cache_seqlens, *, block_table=None, **options
    ):
        """Attention of each sequence's queries over its own cached positions.

        Args:
            query: ``(B, Hq, Tq, D)``; sequence ``b``'s queries are its positions
                ``L_b - Tq .. L_b - 1``.
            key_cache, value_cache: contiguous ``(B, Hkv, T, D)`` / ``(B, Hkv, T, Dv)`` when
                ``block_table`` is None, else a page pool ``(P, Hkv, S, D)`` / ``(P, Hkv, S,
                Dv)`` of pages of ``S`` positions (e.g. :class:`impl.PagedKVCache`'s
                ``key_pages``/``value_pages``); the query's dtype.
            cache_seqlens: ``(B,)`` integers, ``L_b`` = positions cached for sequence ``b``
                (``Tq <= L_b``); storage past ``L_b`` is never read.
            block_table: ``None`` or ``(B, M)`` integers, position ``t`` of sequence ``b`` in
                page ``block_table[b, t // S]`` (FlashAttention's ``block_table``).
            is_causal: bottom-right causal per sequence (query ``i`` sees ``0 ..= L_b - Tq +
                i``); default False, as FlashAttention's ``flash_attn_with_kvcache``.
            scale, window, chunk_size, alibi_slopes, softcap, sinks: as in
                :func:`impl.attention`, over each sequence's absolute positions
                (``alibi_slopes`` ``(B, Hq)`` gives sequence ``b`` its row ``b``); the
                options of :data:`oracle.rules.SERVING_OPTIONS`.

        Returns:
            ``(B, Hq, Tq, Dv)`` in the query's dtype: row ``b`` equals :func:`impl.attention`
            over sequence ``b``'s gathered keys alone.

        Raises:
            oracle.rules.AttentionInputError (the serving rules of
            :func:`oracle.rules.check_kvcache_call`, then each sequence's attention rules).
            Nothing is modified.

        Source: Kwon et al. 2023, "Efficient Memory Management for Large Language Model
        Serving with PagedAttention" (the block table); Dao 2023 (``flash_attn_with_kvcache``'s
        ``cache_seqlens``/``block_table``); Vaswani et al. 2017 per sequence.
        """
        is_causal, scale = options.pop("is_causal"), options.pop("scale")
        call = check_kvcache_call(
            query, key_cache, value_cache, cache_seqlens, block_table, is_causal
        )
        batch, heads = call.query.shape[:2]
        outputs = []
        # each option only when given, as the plain call (sequence_options drops the Nones)
        for b, options in enumerate(sequence_options(options, batch, heads)):
            keys, values = self.sequence_kv(call, b)
            check_sequence_finite(keys, values, b)
            outputs.append(
                self.attention(
                    call.query[b : b + 1], keys, values, is_causal=is_causal, scale=scale, **options
                )
            )
        return np.concatenate(outputs, axis=0)

    @takes_options(only=CACHED_OPTIONS)
    def paged_cached_attention(self, query, key, value, cache, seqs, **options):
        """:meth:`cached_attention` on a :class:`impl.PagedKVCache`: append row ``b`` of
        ``key``/``value`` ``(B, Hkv, Tnew, D)`` to sequence ``seqs[b]``, then
        :meth:`attention_with_kvcache` of ``query`` ``(B, Hq, Tnew, D)`` over the pool, causal,
        each sequence over its own positions (vLLM's order: write the new K/V, then attend).

        Raises:
            oracle.rules.PagedCacheError (no ``seqs``, or ``seqs`` with another cache),
            oracle.rules.AttentionInputError (``attn_mask``, which a page pool does not take:
            hide keys by the lengths, a window or chunks), and whatever the append or the
            attention raises; the cache is then exactly as before the call.
        """
        paged = isinstance(cache, PagedKVCache)
        check_paged_cached_call(query, key, cache, paged, seqs, options.pop("attn_mask"))
        snapshot = cache._snapshot(seqs, np.shape(key)[2] if np.ndim(key) == 4 else 0)
        cache.append(seqs, key, value)
        try:
            args, call = pool_call(cache, seqs)
            return self.attention_with_kvcache(query, *args, **call, **options)
        except BaseException:
            cache._restore(snapshot)
            raise
