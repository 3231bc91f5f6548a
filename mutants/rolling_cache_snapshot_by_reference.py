"""Mutant: the rolling cache's rollback keeps references to the ring it writes in place.

What is broken: ``RollingKVCache._snapshot`` returns the ring arrays themselves, not copies.
``cached_attention`` appends before it attends; when the attention step fails it restores the
snapshot, which puts the length back but not the slot the append overwrote, so once the ring
has wrapped the oldest held position now holds the failed call's key and value. Caches that
never wrapped, and every call that succeeds, are exact.

Real-world mistake: a rollback written for an append-only cache (where restoring the length
is enough: nothing held is overwritten) reused for a ring buffer, which overwrites in place.
"""

from attnprops import impl
from attnprops.mutants import Mutant


class RollingKVCache(impl.RollingKVCache):
    """impl's rolling cache whose snapshot shares the ring."""

    def _snapshot(self):
        return self._keys, self._values, self._length  # FAULT: no copies of the ring


MUTANT = Mutant(
    name="rolling_cache_snapshot_by_reference",
    description="RollingKVCache's rollback snapshot shares the ring it overwrites in place: a "
    "failed cached_attention after a wrap leaves the failed key in the oldest slot",
    models="an append-only cache's rollback (restore the length) reused for a ring buffer",
    killed_by=("test_failed_rolling_attention_changes_nothing",),
    rolling_cache=RollingKVCache,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
