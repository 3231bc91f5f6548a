"""Mutant: a block-sparse chunked-attention kernel ends a query tile's keys at the end of its
first row's chunk, from 97 queries on.

What is broken: with ``chunk_size=C``, the tiled kernel (query tiles of 96 rows, key tiles of
32) reads for each query tile the key tiles up to the end of the chunk of the tile's *first*
row, rounded up to a key tile. Rows of the tile in a later chunk lose the keys of their own
chunk past that end (all of them, and the row is empty, when the chunk edge is a multiple of
32). Right when no query tile straddles a chunk edge, when the rounded-up end still covers
the later rows' keys (in a causal call, a chunk edge in the query tile's last key tile), and
on every call of at most 96 queries (impl runs there).

Real-world mistake: a per-tile key range (a block mask, a varlen kernel's ``kv_end``) computed
once per query tile from its first row, which holds while tiles never straddle a chunk edge:
kernels tested with chunk sizes that are multiples of the tile and prefills that start at
position 0 never show it (Llama 4's chunks of 8192 positions against chunked prefill whose
calls start anywhere).
"""

from attnprops.mutants import Mutant
from attnprops.mutants._tiled import TILED_CAPABILITIES
from attnprops.mutants._tiled import TiledKernel

ATTNPROPS_CAPABILITIES = {**TILED_CAPABILITIES, "chunk_size": True}


class _Kernel(TiledKernel):
    q_tile = 96
    k_tile = 32
    min_query_len = 97

    def key_range(self, problem, rows):
        lo, hi = super().key_range(problem, rows)
        C = problem.call.chunk_size
        if C is None:
            return lo, hi
        first = problem.query_start + rows.start
        end = (first // C + 1) * C  # FAULT: the first row's chunk end stands for every row
        return lo, min(hi, -(-end // self.k_tile) * self.k_tile)


MUTANT = Mutant(
    name="chunk_tile_keys_end_at_its_first_rows_chunk_end",
    description="block-sparse chunked attention (96-row query tiles, from 97 queries on) "
    "ends each query tile's keys at its first row's chunk end, so its rows in a later chunk "
    "lose keys",
    models="a per-tile key range of chunked attention computed from the tile's first row",
    killed_by=(
        "test_kernel_sized_chunked_attention_chunk_equals_rows_of_full",
        "test_kernel_sized_chunks_match_reference",
    ),
    steps=_Kernel,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
