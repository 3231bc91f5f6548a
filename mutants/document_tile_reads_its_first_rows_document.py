"""Mutant: a block-sparse kernel reads, for each query tile, only the keys of the document of
the tile's first row.

What is broken: with packed documents (``segment_ids``) and at least 33 queries, the tiled
kernel (query tiles of 32 rows, key tiles of 64) limits each query tile to the key span of the
document its *first* row belongs to. Rows of a later document in the same tile (a document
boundary that is not a multiple of 32) lose their own keys: they see none of them, and the
tile's empty rows give NaN (0 / 0), or, where the first document's keys are theirs too,
nothing changes. Right whenever every document boundary is a multiple of 32, and on every
call with at most 32 queries (impl runs there).

Real-world mistake: a block mask (FlexAttention's ``BlockMask``, a varlen kernel's per-tile
key range) computed from one representative row of each query block instead of any row of
it, so blocks that only the block's later rows need are skipped; packed-sequence kernels
tested with documents aligned to the block size never show it (HunyuanVideo PR#310 and
jax#23349 are of this family: documents attending across, or ignored).
"""

import numpy as np

from attnprops.mutants import Mutant
from attnprops.mutants._tiled import TILED_CAPABILITIES
from attnprops.mutants._tiled import TiledKernel

ATTNPROPS_CAPABILITIES = {**TILED_CAPABILITIES, "segment_ids": True}


class _Kernel(TiledKernel):
    q_tile = 32
    k_tile = 64
    min_query_len = 33

    def key_range(self, problem, rows):
        if problem.segments is None:
            return super().key_range(problem, rows)
        query_ids, key_ids = problem.segments  # (B or 1, Tq), (B or 1, Tk)
        first = query_ids[0, rows.start]  # FAULT: the tile's first row stands for every row
        keys = np.flatnonzero(key_ids[0] == first)
        return (int(keys[0]), int(keys[-1]) + 1) if keys.size else (0, 0)


MUTANT = Mutant(
    name="document_tile_reads_its_first_rows_document",
    description="block-sparse kernel (32-row query tiles, from 33 queries on) reads for each "
    "query tile only the keys of its first row's document",
    models="a per-block key range (block mask) computed from the block's first query row",
    killed_by=("test_kernel_sized_documents_match_reference",),
    steps=_Kernel,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
