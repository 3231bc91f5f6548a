"""Mutant: the blocked path starts a windowed tile at the block *after* its first key.

What is broken: a query tile's first visible key ``p - left`` (``p`` the tile's first
position) is rounded *up* to a block start instead of down, so when it is not a multiple of
``block_size`` the block holding it is skipped: the keys from ``p - left`` to the next block
start are lost for the tile's first rows (their weight goes to the other keys; a row whose
window lay wholly in the skipped block comes out NaN). Right whenever ``p - left`` falls on a
block start, so for every window when ``block_size=1``; the dense path and calls without a
left window are impl's.

Real-world mistake: ``n_block_min = cdiv(m_block * BLOCK_M - window_left, BLOCK_N)`` where the
kernel needs a floor division: the first KV block of a sliding-window tile computed with the
rounding of the last one.
"""

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _FirstBlockRoundedUp(impl.Attention):
    def tile_key_range(self, call, rows, block_size):
        first, stop = super().tile_key_range(call, rows, block_size)
        if call.window is None or call.window[0] is None:
            return first, stop
        key = max(0, call.query_start + rows.start - call.window[0])
        # FAULT: ceiling instead of floor: the block holding the first visible key is skipped.
        return min(stop, -(-key // block_size) * block_size), stop


MUTANT = Mutant(
    name="window_first_block_rounded_up",
    description="blocked path: a windowed query tile starts at the key block after the one "
    "holding its first visible key",
    models="the first KV block of a sliding-window tile computed with a ceiling division "
    "(n_block_min = cdiv(...)) instead of a floor",
    killed_by=("test_windowed_output_matches_oracle", "test_kernel_sized_window_matches_reference"),
    steps=_FirstBlockRoundedUp,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
