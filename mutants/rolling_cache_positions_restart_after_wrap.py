"""Mutant: the rolling cache hands out its ring in slot order, so positions restart after a wrap.

What is broken: ``RollingKVCache.keys``/``values`` return the ring's slots ``0 .. n - 1`` as
they are instead of unrolled into position order. Until the ring first wraps, slot order is
position order and everything is exact; after it, the newest positions come first, so the
window and causality, which count positions from the order of the keys, hide the wrong keys.

Real-world mistake: a rolling buffer read as ``cache[:, :, :n]`` (Mistral's reference code
unrolls it with ``torch.roll``; forgetting that step makes positions restart at 0 after every
wrap).
"""

from attnprops import impl
from attnprops.mutants import Mutant


class RollingKVCache(impl.RollingKVCache):
    """impl's rolling cache read in slot order."""

    def _unrolled(self, ring):
        held = ring[:, :, : len(self.positions)].copy()  # FAULT: slot order, not position order
        held.flags.writeable = False
        return held


MUTANT = Mutant(
    name="rolling_cache_positions_restart_after_wrap",
    description="RollingKVCache returns its ring in slot order (not unrolled): after the first "
    "wrap the keys' order no longer follows their positions",
    models="a rolling buffer read as cache[:, :, :n] without unrolling it (torch.roll in "
    "Mistral's reference), so positions restart at 0 after each wrap",
    killed_by=("test_rolling_cache_equals_full_windowed_attention",),
    rolling_cache=RollingKVCache,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
