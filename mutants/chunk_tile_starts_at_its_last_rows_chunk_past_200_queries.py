"""Mutant: chunked attention on the blocked path, from 200 queries on: a query tile's first key
block is the one holding its last row's chunk start.

What is broken: with ``chunk_size=C``, a tile of query rows that straddles a chunk edge
visits the key blocks from the start of its *last* row's chunk on, not its first row's: the
rows of the tile in the earlier chunk lose the keys of their chunk before that block (all of
them, and the row is empty, when their chunk ends before it). Right when no query tile
straddles a chunk edge whose earlier chunk starts a block or more before it (``C`` a
multiple of the block size, chunks shorter than a block), on the dense path, and for calls
of fewer than 200 queries (impl runs there).

Real-world mistake: a block-sparse chunked-attention kernel (Llama 4's
``attention_chunk_size`` of 8192 against tiles of 128 rows) that computes the tile's key
range ``[chunk_start(row), ...)`` once per tile, from the row it also takes the causal stop
from, the tile's last. Rare in the chunks property's draws: it differs from impl in 63 of
600 (the call needs 200 queries or more, impl's blocked path and a chunk edge inside a query
tile). The chunk law of chunked attention meets it in 105 of 147 examples: its chunk calls
start one off the tile grid, with a chunk edge among their rows.
"""

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES
MIN_QUERIES = 200


class _Steps(impl.Attention):
    def tile_key_range(self, call, rows, block_size):
        first, stop = super().tile_key_range(call, rows, block_size)
        if call.chunk_size is None or call.shape[2] < MIN_QUERIES:
            return first, stop
        C = call.chunk_size
        last_rows_chunk = (call.query_start + rows.stop - 1) // C * C  # FAULT: the last row's
        return max(first, min(stop, last_rows_chunk) // block_size * block_size), stop


MUTANT = Mutant(
    name="chunk_tile_starts_at_its_last_rows_chunk_past_200_queries",
    description="blocked chunked attention (>= 200 queries): a query tile's first key block "
    "from its last row's chunk, so its rows in the earlier chunk lose keys",
    models="a block-sparse chunked-attention kernel that takes a tile's key range from its "
    "last row (Llama 4 attention_chunk_size)",
    killed_by=(
        "test_kernel_sized_chunks_match_reference",
        "test_kernel_sized_chunked_attention_chunk_equals_rows_of_full",
    ),
    steps=_Steps,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
