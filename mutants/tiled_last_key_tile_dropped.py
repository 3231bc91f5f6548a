"""Mutant: past 128 keys, the tiled kernel drops the last, partial key tile.

What is broken: with ``Tk >= 129`` the kernel (tiles of 64 keys) loops over
``(stop - start) // 64`` full tiles (floor instead of ceiling), so the last ``Tk % 64`` keys
never enter the softmax. Right whenever 64 divides the key span a row sees, and on every call
with at most 128 keys (impl runs there).

Real-world mistake: ``num_blocks = seqlen_k // BLOCK_N`` instead of ``cdiv(seqlen_k,
BLOCK_N)`` in a tiled kernel, tested only at sequence lengths that are multiples of the tile
(FlashAttention tests seqlens 113, 203, 239 for this reason).
"""

from attnprops.mutants import Mutant
from attnprops.mutants._tiled import TILED_CAPABILITIES
from attnprops.mutants._tiled import TiledKernel

ATTNPROPS_CAPABILITIES = TILED_CAPABILITIES


class _Kernel(TiledKernel):
    k_tile = 64
    min_key_len = 129

    def key_tiles(self, start, stop):
        full = (stop - start) // self.k_tile  # FAULT: floor, the partial last tile is lost
        return [(start + n * self.k_tile, start + (n + 1) * self.k_tile) for n in range(full)]


MUTANT = Mutant(
    name="tiled_last_key_tile_dropped",
    description="tiled kernel (64-key tiles, from 129 keys on) drops the last partial key tile",
    models="`num_blocks = seqlen_k // BLOCK_N` instead of a ceiling division in a tiled kernel",
    killed_by=(
        "test_kernel_sized_prefill_matches_reference",
        "test_kernel_sized_cross_matches_reference",
        "test_kernel_sized_chunk_equals_rows_of_full_causal",
    ),
    steps=_Kernel,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
