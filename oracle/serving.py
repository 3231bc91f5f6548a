"""The oracle's serving caches, deliberately simple: each sequence of a ragged or paged cache
gathered position by position (:func:`sequence_kv`) and attended alone
(:func:`attention_with_kvcache`); a paged cache whose pool is written one position at a time
(:class:`PagedKVCache`); a rolling cache that is a plain cache read from its last ``capacity``
positions (:class:`RollingKVCache`, attended by :func:`oracle.cached_attention`).

Same rules as every subject's (:mod:`oracle.rules.serving`, :mod:`oracle.rules.cache`); the
same constructors, methods and results as :mod:`impl`'s, by a different route.
"""

from __future__ import annotations

import numpy as np

from attnprops.oracle.cache import KVCache
from attnprops.oracle.reference import OracleResult
from attnprops.oracle.reference import attention
from attnprops.oracle.rules import CACHED_OPTIONS
from attnprops.oracle.rules import SERVING_OPTIONS
from attnprops.oracle.rules import IndependentCopy
from attnprops.oracle.rules import KVCacheCall
from attnprops.oracle.rules import check_cache_append
from attnprops.oracle.rules import check_cache_config
from attnprops.oracle.rules import check_free_pages
from attnprops.oracle.rules import check_kvcache_call
from attnprops.oracle.rules import check_paged_cached_call
from attnprops.oracle.rules import check_positive_int
from attnprops.oracle.rules import check_sequence_finite
from attnprops.oracle.rules import check_sequence_id
from attnprops.oracle.rules import check_sequence_ids
from attnprops.oracle.rules import pages_needed
from attnprops.oracle.rules import pool_call
from attnprops.oracle.rules import sequence_options
from attnprops.oracle.rules import takes_options

__all__ = [
    "PagedKVCache",
    "RollingKVCache",
    "attention_with_kvcache",
    "paged_cached_attention",
    "sequence_kv",
]


def sequence_kv(call: KVCacheCall, b: int) -> tuple[np.ndarray, np.ndarray]:
    """Sequence ``b``'s keys ``(1, Hkv, L_b, D)`` and values ``(1, Hkv, L_b, Dv)``, one position
    at a time: position ``t`` from row ``b`` (contiguous) or from page ``block_table[b, t //
    S]``, slot ``t % S`` (:mod:`oracle.rules.serving`)."""
    keys, values = [], []
    for t in range(int(call.lengths[b])):
        if call.block_table is None:
            where = (b, slice(None), t)
        else:
            page, slot = divmod(t, call.page_size)
            where = (int(call.block_table[b, page]), slice(None), slot)
        keys.append(call.key_cache[where])
        values.append(call.value_cache[where])
    return np.stack(keys, axis=1)[None], np.stack(values, axis=1)[None]


@takes_options(only=SERVING_OPTIONS)
def attention_with_kvcache(
    query,
    key_cache,
    value_cache,
    cache_seqlens,
    *,
    block_table=None,
    fully_masked_rows="raise",
    attend=None,
    **options,
) -> OracleResult:
    """Each sequence's queries over its own cached positions: shapes and rules as
    ``impl.attention_with_kvcache`` (:func:`oracle.rules.check_kvcache_call`); row ``b`` of the
    result is ``attend`` (default :func:`attention`) over :func:`sequence_kv`'s keys of
    sequence ``b`` alone, its queries at positions ``L_b - Tq ..``. ``options``: those of
    :data:`oracle.rules.SERVING_OPTIONS` (``alibi_slopes`` ``(B, Hq)``: row ``b`` for
    sequence ``b``).
    Returns the rows stacked, ``(B, Hq, Tq, Dv)`` (``exact`` None when ``attend`` gives no
    50-digit values, as the ball reference)."""
    is_causal = options.pop("is_causal")
    call = check_kvcache_call(query, key_cache, value_cache, cache_seqlens, block_table, is_causal)
    attend = attention if attend is None else attend
    rows = []
    per_sequence = sequence_options(options, call.query.shape[0], call.query.shape[1])
    for b, extra in enumerate(per_sequence):
        keys, values = sequence_kv(call, b)
        check_sequence_finite(keys, values, b)
        rows.append(
            attend(
                call.query[b : b + 1],
                keys,
                values,
                is_causal=is_causal,
                fully_masked_rows=fully_masked_rows,
                **extra,
            )
        )
    exact = [getattr(r, "exact", None) for r in rows]  # the ball reference has no digits
    return OracleResult(
        exact=None if any(e is None for e in exact) else np.concatenate(exact, axis=0),
        value=np.concatenate([r.value for r in rows], axis=0),
    )


class PagedKVCache(IndependentCopy):
    """The oracle's paged cache: each sequence an :class:`oracle.KVCache` of its own, plus the
    pages it owns (impl's allocation order: a page from the front of the free list when its
    last page is full; a freed sequence's pages back at the front, in order); the pool is
    written out on read, position by position (pages no live sequence owns read as 0)."""

    def __init__(
        self, num_pages, page_size, num_kv_heads, head_dim, value_dim=None, *, dtype=np.float64
    ):
        self.num_pages = check_positive_int(num_pages, "num_pages")
        self.page_size = check_positive_int(page_size, "page_size")
        self._config = check_cache_config(1, num_kv_heads, head_dim, value_dim, dtype)
        self.num_kv_heads, self.head_dim, self.value_dim, self.dtype = self._config[1:]
        self._free = list(range(self.num_pages))
        self._owned: dict[int, tuple[KVCache, list[int]]] = {}

    free_pages = property(lambda self: len(self._free))
    sequences = property(lambda self: tuple(sorted(self._owned)))

    def _pool(self, values: bool) -> np.ndarray:
        last = self.value_dim if values else self.head_dim
        pool = np.zeros((self.num_pages, self.num_kv_heads, self.page_size, last), self.dtype)
        for cache, pages in self._owned.values():
            held = cache.values if values else cache.keys
            for t in range(held.shape[2]):
                pool[pages[t // self.page_size], :, t % self.page_size] = held[0, :, t]
        pool.flags.writeable = False
        return pool

    key_pages = property(lambda self: self._pool(values=False))
    value_pages = property(lambda self: self._pool(values=True))

    def add_sequence(self) -> int:
        seq = min(set(range(len(self._owned) + 1)) - set(self._owned))
        self._owned[seq] = (KVCache(*self._config[:4], dtype=self.dtype), [])
        return seq

    def free(self, seq) -> None:
        seq = check_sequence_id(seq, self._owned)
        self._free = self._owned.pop(seq)[1] + self._free

    def seqlens(self, seqs) -> np.ndarray:
        ids = check_sequence_ids(seqs, self._owned)
        return np.array([len(self._owned[s][0]) for s in ids], dtype=np.int64)

    def block_table(self, seqs) -> np.ndarray:
        rows = [self._owned[s][1] for s in check_sequence_ids(seqs, self._owned)]
        width = max([1] + [len(row) for row in rows])
        return np.array([row + [-1] * (width - len(row)) for row in rows], dtype=np.int64)

    def _snapshot(self):
        owned = {s: (list(cache._blocks), list(pages)) for s, (cache, pages) in self._owned.items()}
        return list(self._free), owned

    def _restore(self, snapshot) -> None:
        self._free, owned = snapshot
        for seq, (blocks, pages) in owned.items():
            self._owned[seq][0]._blocks = blocks
            self._owned[seq] = (self._owned[seq][0], pages)

    def append(self, seqs, key, value) -> np.ndarray:
        ids = check_sequence_ids(seqs, self._owned)
        batch = KVCache(len(ids), *self._config[1:4], dtype=self.dtype)  # the rule for B rows
        key, value = check_cache_append(batch, key, value)
        starts = self.seqlens(ids)
        new, size = key.shape[2], self.page_size
        more = [pages_needed(n + new, size) - len(self._owned[s][1]) for s, n in zip(ids, starts)]
        check_free_pages(sum(more), len(self._free), self.num_pages, size, new, ids)
        for row, (seq, count) in enumerate(zip(ids, more)):
            cache, pages = self._owned[seq]
            pages += [self._free.pop(0) for _ in range(count)]
            cache.append(key[row : row + 1], value[row : row + 1])
        return starts


class RollingKVCache(KVCache):
    """The oracle's rolling cache: the plain cache of every appended block, read from its last
    ``capacity`` positions (no ring); ``len`` counts every position."""

    def __init__(
        self, batch, num_kv_heads, head_dim, value_dim=None, *, capacity, dtype=np.float64
    ):
        super().__init__(batch, num_kv_heads, head_dim, value_dim, dtype=dtype)
        self.capacity = check_positive_int(capacity, "capacity")

    @property
    def positions(self) -> np.ndarray:
        return np.arange(max(0, len(self) - self.capacity), len(self), dtype=np.int64)

    def _read(self, index: int, last: int) -> np.ndarray:
        out = super()._read(index, last)[:, :, len(self) - len(self.positions) :].copy()
        out.flags.writeable = False
        return out


@takes_options(only=CACHED_OPTIONS)
def paged_cached_attention(
    query,
    key,
    value,
    cache: PagedKVCache,
    seqs,
    *,
    fully_masked_rows="raise",
    attend=None,
    **options,
) -> OracleResult:
    """:func:`oracle.cached_attention` on a :class:`PagedKVCache`: append row ``b`` to sequence
    ``seqs[b]``, then :func:`attention_with_kvcache` over the pool, causal; on any error the
    append is undone. The rules of ``impl``'s (``seqs`` required, no ``attn_mask``)."""
    attn_mask = options.pop("attn_mask")
    check_paged_cached_call(query, key, cache, isinstance(cache, PagedKVCache), seqs, attn_mask)
    snapshot = cache._snapshot()
    cache.append(seqs, key, value)
    try:
        args, call = pool_call(cache, seqs)
        return attention_with_kvcache(
            query, *args, **call, fully_masked_rows=fully_masked_rows, attend=attend, **options
        )
    except BaseException:
        cache._restore(snapshot)
        raise
