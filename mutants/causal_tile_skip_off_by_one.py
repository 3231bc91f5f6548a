"""Mutant: the causal kernel skips a key tile that the last row of a query tile may see.

What is broken: with more than 64 queries, causal attention runs in 64 x 64 tiles and skips a
key tile when ``j0 >= query_start + t1 - 1`` instead of ``j0 > ...``: the key tile that starts
exactly at the last row's own position is dropped, so that row loses its diagonal key (and the
tile's other keys, which only it could see anyway). That happens only when
``query_start + t1 - 1`` is a multiple of 64: a partial last query tile, or a chunk whose
``query_start`` is not aligned to the tile. Calls with at most 64 queries run impl.

Real-world mistake: an off-by-one in the causal early exit of a tiled kernel (``n_block_max``
computed from ``m_block * BLOCK_M + BLOCK_M - 1`` without the ``+ 1``), invisible when
``query_start`` and the sequence length are multiples of the tile.
"""

from attnprops.mutants import Mutant
from attnprops.mutants._tiled import TILED_CAPABILITIES
from attnprops.mutants._tiled import TiledKernel

ATTNPROPS_CAPABILITIES = TILED_CAPABILITIES


class _Kernel(TiledKernel):
    q_tile = 64
    k_tile = 64
    min_query_len = 65

    def skips(self, j0, last_row_position):
        return j0 >= last_row_position  # FAULT: >= (the last row sees key j0 == its position)


MUTANT = Mutant(
    name="causal_tile_skip_off_by_one",
    description="causal tiled kernel (64 x 64 tiles, from 65 queries on) skips the key tile "
    "that starts at the last row's own position",
    models="an off-by-one in a tiled kernel's causal early exit, hidden by tile-aligned "
    "lengths and query_start",
    killed_by=(
        # the cache laws: their full causal call is wrong (a prefill of 64k + 1 positions)
        "test_kernel_sized_paged_cache_run_equals_full_causal",
        "test_kernel_sized_cache_growth_equals_full_causal",
        "test_kernel_sized_chunk_equals_rows_of_full_causal",
        "test_kernel_sized_chunk_matches_reference",
        "test_kernel_sized_prefill_matches_reference",
    ),
    steps=_Kernel,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
