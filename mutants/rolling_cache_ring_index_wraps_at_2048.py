"""Mutant: the rolling cache's ring index wraps at 2048 slots, whatever its capacity.

What is broken: position ``t`` goes to slot ``t % 2048`` (``t & 2047``) instead of ``t %
capacity`` once the capacity passes 2048, on writes and reads alike. With a capacity of at
most 2048 (every small case, and most windows people test with) nothing changes; past it,
positions 2048 apart share a slot, so the newer one overwrites the older while the cache still
claims to hold both: a window of more than 2048 keys reads the newest key twice and loses the
one 2048 positions before it.

Real-world mistake: a ring buffer indexed with a fixed mask (``t & (N - 1)``, a power of two
``N`` the buffer was first written for), kept when the window, and so the capacity, grew past
``N`` (Mistral 7B's first window is 4096 keys).
"""

from attnprops import impl
from attnprops.mutants import Mutant

RING = 2048  # the power of two the ring index was written for


class RollingKVCache(impl.RollingKVCache):
    """impl's rolling cache with its slot index masked to 2048 slots."""

    def slot_of(self, positions):
        return positions % min(self.capacity, RING)  # FAULT: t & 2047 past a capacity of 2048


MUTANT = Mutant(
    name="rolling_cache_ring_index_wraps_at_2048",
    description="RollingKVCache puts position t in slot t % 2048 once its capacity passes "
    "2048: positions 2048 apart overwrite each other",
    models="a ring index taken with a fixed power-of-two mask (t & 2047) after the window "
    "grew past the buffer it was written for",
    killed_by=("test_kernel_sized_rolling_cache_equals_full_windowed_attention",),
    rolling_cache=RollingKVCache,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
