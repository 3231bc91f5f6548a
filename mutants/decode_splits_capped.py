"""Mutant: split-KV decode has room for 8 splits of 1024 keys; keys past 8192 are never read.

What is broken: for decode calls (at most 4 queries) against more than 1024 keys, the kernel
splits the keys into splits of 1024 (flash-decoding) but its workspace holds the partial
results of at most 8 splits, so splits past the eighth are never computed: the keys past
8192, the newest tokens of a long conversation, are silently left out. Right up to 8192 keys
(every split fits), and on prefill calls (impl runs there).

Real-world mistake: a split-KV decode kernel whose partial-result workspace is allocated for
a fixed ``max_num_splits`` and whose launch computes ``num_splits = min(cdiv(seqlen_k,
split_size), max_num_splits)`` without growing ``split_size`` to cover the rest.
"""

from attnprops.mutants import Mutant
from attnprops.mutants._tiled import TILED_CAPABILITIES
from attnprops.mutants._tiled import TiledKernel

ATTNPROPS_CAPABILITIES = TILED_CAPABILITIES

_MAX_SPLITS = 8


class _Kernel(TiledKernel):
    k_tile = 256
    split_kv = 1024
    min_key_len = 1025

    def runs(self, problem):
        return problem.query.shape[2] <= 4 and super().runs(problem)

    def splits(self, stop):
        return super().splits(stop)[:_MAX_SPLITS]  # FAULT: the splits past the workspace


MUTANT = Mutant(
    name="decode_splits_capped",
    description="decode kernel (<= 4 queries) in splits of 1024 keys keeps at most 8 splits: "
    "keys past 8192 are never read",
    models="`num_splits = min(cdiv(seqlen_k, split_size), max_num_splits)` with a fixed split "
    "size in a split-KV decode kernel",
    killed_by=("test_kernel_sized_decode_past_capacity_reads_every_key",),
    steps=_Kernel,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
