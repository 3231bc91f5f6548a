"""Mutant: ``cached_attention`` appends to the cache but attends only to the new tokens.

What is broken: the new K/V are appended (the cache grows exactly as impl's does), but the
attention runs over the new block only, causally from position 0, ignoring the cached history.
The first call on an empty cache (the prefill) is therefore exact; every decode step afterwards
reads only itself. ``attention`` and everything else is impl's.

Real-world mistake: passing the step's ``key_states``/``value_states`` to the attention instead
of the ones returned by ``past_key_value.update(...)`` (or discarding the concatenated tensors);
the source lab's opening lists "缓存里明明有历史信息却没有读取" among the right-shaped wrong results.
"""

from attnprops import impl
from attnprops.mutants import Mutant
from attnprops.oracle.rules import check_cached_query


class _CacheNotRead(impl.Attention):
    def cached_attention(self, query, key, value, cache, *, attn_mask=None, scale=None):
        """impl's cached_attention, except that the history in ``cache`` is not read."""
        check_cached_query(query, key)
        snapshot = cache._snapshot()
        cache.append(key, value)
        try:
            # FAULT: the step's own key/value, not cache.keys/cache.values.
            return self.attention(
                query, key, value, attn_mask=attn_mask, is_causal=True, scale=scale
            )
        except BaseException:
            cache._restore(snapshot)
            raise


MUTANT = Mutant(
    name="cache_not_read",
    description="cached_attention appends the new K/V but attends only to them (history in the "
    "cache ignored)",
    models="attention called with the step's key_states/value_states instead of the tensors "
    "returned by the cache update",
    killed_by=("test_cached_decode_equals_full_causal",),
    steps=_CacheNotRead,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
