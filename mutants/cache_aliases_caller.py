"""Mutant: the first append to an empty cache keeps the caller's arrays instead of copying them.

What is broken: a "zero-copy prefill" shortcut: when the cache is empty, ``append`` adopts the
(validated) ``key``/``value`` arrays themselves as its storage. Results are right, but the cache
now aliases the caller's memory: if the caller later writes into its prefill arrays (reuses a
buffer for the next batch, normalizes in place), the cached history changes with them. Later
appends outgrow the adopted arrays and copy, so only the prefill positions are aliased.
Validation and everything else are impl's.

Real-world mistake: storing references instead of copies in a cache (``self.k = k`` /
``list.append(k)`` without ``.copy()``; ``torch`` caches holding views of a reused projection
buffer). The source lab (000, section 5) checks that the history K/V are not changed.
"""

from attnprops import impl
from attnprops.mutants import Mutant
from attnprops.oracle.rules import check_cache_append


class KVCache(impl.KVCache):
    """impl's cache with a zero-copy first append."""

    def append(self, key, value) -> int:
        if self._length:
            return super().append(key, value)
        key, value = check_cache_append(self, key, value)
        # FAULT: the caller's arrays become the storage (no copy).
        self._keys, self._values, self._length = key, value, key.shape[2]
        return 0


MUTANT = Mutant(
    name="cache_aliases_caller",
    description="the first append to an empty KVCache stores the caller's key/value arrays "
    "themselves (no copy): later writes by the caller change the cache",
    models="a zero-copy prefill / `self.k = k` without .copy(): a cache holding references to "
    "buffers the caller reuses",
    killed_by=("test_cache_copies_caller_arrays",),
    cache=KVCache,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
