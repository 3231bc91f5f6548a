"""Mutant: split-KV (flash-decoding) starts every split's partial softmax with the sink.

What is broken: from 512 keys on, the kernel splits the keys into chunks of 256 (tiles of 128
keys inside each) and each split's running state starts from the head's sink (``m =
sigma_h``, ``l = 1``) instead of empty; the merge then adds the splits' sums, so the sink is
counted once per split (twice at 257..512 keys, three times past 512, ...), and it is not
merged again at the end. Right with one split (fewer than 512 keys: impl runs there, and the
kernel with one split is right) and for sinks of ``-inf``.

Real-world mistake: a sink counted twice in a split-KV merge (rocm-libraries#12227): each
split adds the sink to its partial sum and the combine step adds the partial sums.
"""

from attnprops.mutants import Mutant
from attnprops.mutants._tiled import TILED_CAPABILITIES
from attnprops.mutants._tiled import TiledKernel

ATTNPROPS_CAPABILITIES = TILED_CAPABILITIES


class _Kernel(TiledKernel):
    k_tile = 128
    split_kv = 256
    min_key_len = 512

    def split_start(self, problem, rows, compute):
        sink = super().sink_part(problem, rows, compute)  # FAULT: every split carries it
        return super().split_start(problem, rows, compute) if sink is None else sink

    def sink_part(self, problem, rows, compute):
        return None  # (counted in the splits already)


MUTANT = Mutant(
    name="split_kv_sink_in_every_split",
    description="split-KV kernel (splits of 256 keys from 512 keys on) starts each split "
    "with the sink, counting it once per split",
    models="a sink counted twice in a split-KV merge (rocm-libraries#12227)",
    killed_by=("test_kernel_sized_sinks_match_reference",),
    steps=_Kernel,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
