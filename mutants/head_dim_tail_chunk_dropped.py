"""Mutant: past a head dim of 64, the scores drop the last, partial head-dim chunk.

What is broken: for ``D >= 65`` the kernel accumulates ``q . k`` over head-dim chunks of 32 and
loops over ``D // 32`` of them, so the last ``D % 32`` dimensions never enter the scores.
Right for head dims that are multiples of 32 (64, 96, 128, 256) and below 65 (impl runs
there); wrong for 80 and 111.

Real-world mistake: a kernel specialized for head dims 64/128 reused for an odd head dim
(FlashAttention tests head dims 59 and 111 for this reason; models ship 80 and 96).
"""

from attnprops.mutants import Mutant
from attnprops.mutants._tiled import TILED_CAPABILITIES
from attnprops.mutants._tiled import TiledKernel

ATTNPROPS_CAPABILITIES = TILED_CAPABILITIES


class _Kernel(TiledKernel):
    d_chunk = 32
    min_head_dim = 65

    def head_dim_chunks(self, D):
        full = D // self.d_chunk  # FAULT: floor, the last D % 32 dims are dropped
        return [(n * self.d_chunk, (n + 1) * self.d_chunk) for n in range(full)]


MUTANT = Mutant(
    name="head_dim_tail_chunk_dropped",
    description="kernel scores (from head dim 65 on) sum only the D // 32 full head-dim "
    "chunks: the last D % 32 dims are dropped (80, 111)",
    models="a kernel tuned for head dims 64/128 reused for an odd head dim",
    killed_by=(
        "test_kernel_sized_prefill_matches_reference",
        "test_kernel_sized_decode_matches_reference",
    ),
    steps=_Kernel,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
