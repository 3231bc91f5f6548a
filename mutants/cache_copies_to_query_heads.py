"""Mutant: ``cached_attention`` repeats K/V to the query heads before caching them (GQA/MQA).

What is broken: on a grouped-query call (``Hq = G * Hkv``, ``G > 1``) ``cached_attention``
widens the cache so that every K/V head is stored ``G`` times (``np.repeat(..., G, axis=1)``),
and appends repeated copies from then on. Outputs stay right (the attention over repeated K/V is
multi-head attention with the same numbers) and the rollback on failure is kept, but
``cache.keys``/``cache.values`` have ``Hq`` heads and the cache takes ``G`` times
``kv_cache_bytes``: GQA/MQA's memory saving is gone.

Real-world mistake: calling ``repeat_kv`` before ``past_key_value.update(...)`` instead of after
it (seen in ports of Llama-style attention). 003 fault table: "GQA cache 没减少 → 缓存前是否把
K/V 物理复制到 Hq"; its shape reference: "缓存前不应无意义地物理复制 K/V".
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant
from attnprops.oracle.rules import check_cache_append
from attnprops.oracle.rules import check_cached_query


class KVCache(impl.KVCache):
    """impl's cache, able to hold each K/V head ``copies`` times (the fault's storage)."""

    def __init__(
        self, batch, num_kv_heads, head_dim, value_dim=None, *, dtype=np.float64, capacity: int = 16
    ):
        super().__init__(batch, num_kv_heads, head_dim, value_dim, dtype=dtype, capacity=capacity)
        self._copies = 1

    def _repeat_heads(self, copies: int) -> None:
        """Store every K/V head ``copies`` times from now on (existing entries included)."""
        if copies > self._copies == 1:
            self._keys = np.repeat(self._keys, copies, axis=1)
            self._values = np.repeat(self._values, copies, axis=1)
            self._copies = copies

    def append(self, key, value) -> int:
        key, value = check_cache_append(self, key, value)  # impl's rules: Hkv heads
        key = np.repeat(key, self._copies, axis=1)
        value = np.repeat(value, self._copies, axis=1)
        start, new = self._length, key.shape[2]
        if start + new > self.capacity:  # impl's doubling growth, unchanged
            capacity = max(2 * self.capacity, start + new)
            for name in ("_keys", "_values"):
                old = getattr(self, name)
                grown = np.zeros(old.shape[:2] + (capacity,) + old.shape[3:], self.dtype)
                grown[:, :, :start] = old[:, :, :start]
                setattr(self, name, grown)
        self._keys[:, :, start : start + new] = key
        self._values[:, :, start : start + new] = value
        self._length = start + new
        return start

    def _snapshot(self):
        return super()._snapshot(), self._copies

    def _restore(self, snapshot) -> None:
        inner, self._copies = snapshot
        super()._restore(inner)


class _Steps(impl.Attention):
    def cached_attention(self, query, key, value, cache, *, attn_mask=None, scale=None):
        """impl's cached_attention, except that K/V are stored once per query head."""
        check_cached_query(query, key)
        snapshot = cache._snapshot()
        try:
            heads = np.shape(query)[1]
            if heads % cache.num_kv_heads == 0:
                # FAULT: repeat_kv BEFORE the cache update: the cache holds Hq heads.
                cache._repeat_heads(heads // cache.num_kv_heads)
            start = cache.append(key, value)
            return self.attention(
                query,
                cache.keys,
                cache.values,
                attn_mask=attn_mask,
                is_causal=True,
                query_start=start,
                scale=scale,
            )
        except BaseException:
            cache._restore(snapshot)
            raise


MUTANT = Mutant(
    name="cache_copies_to_query_heads",
    description="cached_attention stores K/V repeated to the Hq query heads: outputs right, but "
    "cache.keys has Hq heads and the cache is G times kv_cache_bytes",
    models="repeat_kv before past_key_value.update in a GQA/MQA port (003 fault table: GQA "
    "cache not smaller -> K/V physically copied to Hq before caching)",
    killed_by=("test_cache_holds_kv_heads",),
    steps=_Steps,
    cache=KVCache,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
