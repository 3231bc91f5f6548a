"""Mutant: when the KV cache grows past its 256 preallocated slots, it loses one position.

What is broken: the cache preallocates 256 positions; on growth it copies positions
``[0, length - 1)`` into the new buffers instead of ``[0, length)``, so the last position
cached before the growth reads as zeros from then on. Caches that never pass 256 positions
(every small case) are exact.

Real-world mistake: an off-by-one in the reallocation of a preallocated cache (``cache[:,
:, :seq_len - 1]`` where the newest token was already written), seen only on the first
growth, hundreds of tokens into a generation.
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant
from attnprops.oracle.rules import check_cache_append


class KVCache(impl.KVCache):
    """impl's cache with 256 preallocated slots and the faulty growth."""

    def __init__(
        self,
        batch,
        num_kv_heads,
        head_dim,
        value_dim=None,
        *,
        dtype=np.float64,
        capacity: int = 256,
    ):
        super().__init__(batch, num_kv_heads, head_dim, value_dim, dtype=dtype, capacity=capacity)

    def append(self, key, value) -> int:
        key, value = check_cache_append(self, key, value)
        start, new = self._length, key.shape[2]
        if start + new > self.capacity:
            capacity = max(2 * self.capacity, start + new)
            for name in ("_keys", "_values"):
                old = getattr(self, name)
                grown = np.zeros(old.shape[:2] + (capacity,) + old.shape[3:], self.dtype)
                kept = max(start - 1, 0)  # FAULT: one position short of start
                grown[:, :, :kept] = old[:, :, :kept]
                setattr(self, name, grown)
        self._keys[:, :, start : start + new] = key
        self._values[:, :, start : start + new] = value
        self._length = start + new
        return start


MUTANT = Mutant(
    name="cache_growth_drops_last_position",
    description="KV cache with 256 preallocated slots whose growth copies one position too "
    "few (the last one before growing reads as zeros)",
    models="an off-by-one in the reallocation of a preallocated KV cache, seen on its first growth",
    killed_by=("test_kernel_sized_cache_growth_equals_full_causal",),
    cache=KVCache,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
