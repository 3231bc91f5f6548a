"""Mutant: with three or more rows of document ids, the tiled kernel reads row ``b % 2``.

What is broken: from 128 keys on, the kernel (impl's tiles) takes batch element ``b``'s
``segment_ids`` from row ``b % 2``: element 2 is packed as element 0, element 3 as element 1.
Right with one row of ids (every element packed alike), with two rows, and on calls of fewer
than 128 keys (impl runs there).

Real-world mistake: a pointer into per-sequence metadata (``cu_seqlens``, segment ids) advanced
with the stride of a buffer sized for the batch the kernel was first tested with, or indexed
``b & 1`` by a double-buffered load.
"""

from attnprops.mutants import Mutant
from attnprops.mutants._tiled import TILED_CAPABILITIES
from attnprops.mutants._tiled import TiledKernel
from attnprops.mutants._tiled import seen_as

ATTNPROPS_CAPABILITIES = TILED_CAPABILITIES
ROWS = 2  # rows of ids the kernel's pointer cycles through


class _Kernel(TiledKernel):
    min_key_len = 128

    def tiled_output(self, problem):
        if problem.segments is not None and problem.segments[1].shape[0] > ROWS:
            query_ids, key_ids = problem.segments
            rows = [b % ROWS for b in range(key_ids.shape[0])]  # FAULT: row b % 2
            problem = seen_as(problem, segments=(query_ids[rows], key_ids[rows]))
        return super().tiled_output(problem)


MUTANT = Mutant(
    name="documents_of_batch_row_b_mod_2",
    description="tiled kernel (from 128 keys on) reads batch element b's document ids from "
    "row b % 2: elements past the second take another element's packing",
    models="a per-sequence metadata pointer with the stride of a two-sequence buffer",
    killed_by=("test_kernel_sized_documents_match_reference",),
    steps=_Kernel,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
