"""Mutant: long decodes are split in 8 equal parts and the remainder keys are dropped.

What is broken: for decode calls (at most 4 queries) against at least 2048 keys, the kernel
splits the keys into 8 splits of ``Tk // 8`` keys (flash-decoding) and never processes the
last ``Tk % 8``: the newest tokens, the ones a decode step attends to most. Right when 8
divides ``Tk``, and on shorter or prefill calls (impl runs there).

Real-world mistake: ``split_size = seqlen_k // num_splits`` instead of
``cdiv(seqlen_k, num_splits)`` in a split-KV decode kernel's launch parameters.
"""

from attnprops.mutants import Mutant
from attnprops.mutants._tiled import TILED_CAPABILITIES
from attnprops.mutants._tiled import TiledKernel

ATTNPROPS_CAPABILITIES = TILED_CAPABILITIES

_NUM_SPLITS = 8


class _Kernel(TiledKernel):
    k_tile = 128
    min_key_len = 2048

    def runs(self, problem):
        return problem.query.shape[2] <= 4 and super().runs(problem)

    def splits(self, stop):
        size = stop // _NUM_SPLITS  # FAULT: floor; keys [8 * size, stop) belong to no split
        return [(n * size, (n + 1) * size) for n in range(_NUM_SPLITS)]


MUTANT = Mutant(
    name="decode_split_remainder_dropped",
    description="decode kernel (<= 4 queries, >= 2048 keys) splits keys in 8 parts of Tk // 8 "
    "and drops the last Tk % 8 keys",
    models="`split_size = seqlen_k // num_splits` in a split-KV decode kernel",
    killed_by=("test_kernel_sized_decode_matches_reference",),
    steps=_Kernel,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
