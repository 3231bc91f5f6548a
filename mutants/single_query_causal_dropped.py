"""Mutant: one query from 96 keys on attends as if causality were a no-op.

What is broken: with ``Tq == 1`` the kernel turns ``is_causal`` off, on the reasoning that a
lone query is the last position and sees every key. That holds for the default alignment
(``query_start = Tk - 1``: a decode step, a KV cache's call), not for an explicit
``query_start < Tk - 1``: a decode step at its position in a preallocated (static) cache, whose
slots past it are not written yet, or a chunk of one query. The query then also reads the keys
after its position. Calls with more than one query, or fewer than 96 keys, run impl.

Real-world mistake: FlashAttention 2's ``if seqlen_q == 1: is_causal = False`` (right for its
bottom-right alignment) kept in a kernel that takes an explicit query offset (chunked
prefill, a static cache, tree attention). Found by a fresh helper's hunt for tiled-kernel
faults the suite did not yet draw (2026-12-07): a chunk of one query came in about one chunk
draw in a hundred.
"""

from attnprops.mutants import Mutant
from attnprops.mutants._tiled import TILED_CAPABILITIES
from attnprops.mutants._tiled import TiledKernel
from attnprops.mutants._tiled import seen_as

ATTNPROPS_CAPABILITIES = TILED_CAPABILITIES


class _Kernel(TiledKernel):
    min_key_len = 96

    def runs(self, problem):
        return problem.query.shape[2] == 1 and super().runs(problem)

    def tiled_output(self, problem):
        if problem.is_causal:  # FAULT: one query "is the last position": causality dropped
            problem = seen_as(problem, is_causal=False)
        return super().tiled_output(problem)


MUTANT = Mutant(
    name="single_query_causal_dropped",
    description="one query (from 96 keys on) drops is_causal, so an explicit query_start "
    "below Tk - 1 reads the keys after its position",
    models="a seqlen_q == 1 shortcut that makes causality a no-op, wrong with an explicit "
    "query offset (a static cache's decode step)",
    killed_by=("test_kernel_sized_chunk_matches_reference",),
    steps=_Kernel,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
