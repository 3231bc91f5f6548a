"""Mutant: split-KV (flash-decoding) merges the partial softmaxes without their rescaling.

What is broken: from 512 keys on, the kernel splits the keys into chunks of 256 (tiles of 128
keys inside each), computes each split's running maximum ``m_i``, sum ``l_i`` and output
``acc_i``, and merges them by plain addition, ``l = sum_i l_i`` and ``acc = sum_i acc_i``,
where the merge must rescale each by ``exp(m_i - m)`` with ``m = max_i m_i``. Right when every
split has the same maximum, and on every call with fewer than 512 keys (impl runs there).

Real-world mistake: the combine step of split-KV / flash-decoding kernels (Dao et al.,
"Flash-Decoding for long-context inference", 2023) written as a sum of the partial results;
the per-split log-sum-exp is then dropped.
"""

import numpy as np

from attnprops.mutants import Mutant
from attnprops.mutants._tiled import TILED_CAPABILITIES
from attnprops.mutants._tiled import TiledKernel

ATTNPROPS_CAPABILITIES = TILED_CAPABILITIES


class _Kernel(TiledKernel):
    k_tile = 128
    split_kv = 256
    min_key_len = 512

    def merge(self, state, part):
        m, l, acc = state
        m_i, l_i, acc_i = part
        l += l_i  # FAULT: no exp(m - m_new) / exp(m_i - m_new) rescaling of either side
        acc += acc_i
        m[...] = np.maximum(m, m_i)


MUTANT = Mutant(
    name="split_kv_merge_not_rescaled",
    description="split-KV kernel (splits of 256 keys from 512 keys on) merges partial "
    "softmaxes without the exp(m_i - m) correction",
    models="a flash-decoding combine step that sums the splits' partial sums and outputs",
    killed_by=(
        "test_kernel_sized_decode_matches_reference",
        "test_kernel_sized_prefill_matches_reference",
        "test_kernel_sized_chunk_equals_rows_of_full_causal",
    ),
    steps=_Kernel,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
