"""Mutant: ``KVCache.append`` stores the key half before checking the value (not atomic).

What is broken: ``append`` validates and stores ``key`` (and advances the length) first, then
validates ``value``. When the value is invalid (wrong shape, dtype, length, NaN) the error is
raised as in impl, but the cache is left half-written: one position longer per new token, the
new keys stored and zeros where their values should be. Valid appends are exactly impl's.

Real-world mistake: ``self.k = concat(self.k, k); self.v = concat(self.v, v)`` where the second
line fails, i.e. updating state before all inputs are checked (no commit point). The source lab
(000, section 5): "缓存追加失败后，原有 K/V 必须保持不变".
"""

import types

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant
from attnprops.oracle.rules import check_cache_append


class KVCache(impl.KVCache):
    """impl's cache with a two-phase (non-atomic) append."""

    def append(self, key, value) -> int:
        # The key alone is checked with impl's rule (a view of the cache whose values look
        # like keys, so the rule checks `key` twice and names it "key").
        keys_only = types.SimpleNamespace(
            batch=self.batch,
            num_kv_heads=self.num_kv_heads,
            head_dim=self.head_dim,
            value_dim=self.head_dim,
            dtype=self.dtype,
        )
        key, _ = check_cache_append(keys_only, key, key)
        placeholder = np.zeros(key.shape[:3] + (self.value_dim,), self.dtype)
        # FAULT: commit the key (and the new length) now, the value's checks come after.
        start = super().append(key, placeholder)
        key, value = check_cache_append(self, key, value)
        self._values[:, :, start : start + key.shape[2]] = value
        return start


MUTANT = Mutant(
    name="non_atomic_append",
    description="KVCache.append stores the key and advances the length before validating the "
    "value: a failed append leaves the cache half-written",
    models="`self.k = concat(self.k, k); self.v = concat(self.v, v)` with the second step "
    "failing: state updated before every input is checked",
    killed_by=("test_failed_append_changes_nothing",),
    cache=KVCache,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
