"""Mutant: a split-KV kernel's log-sum-exp adds the splits' sums without their rescaling.

What is broken: from 640 keys on, the kernel splits the keys into chunks of 320 (tiles of 64
keys inside each); its output merge is right, but the ``lse`` it returns is ``max_i m_i +
log(sum_i l_i)``, each split's sum ``l_i`` taken at its own maximum ``m_i``, where it must be
``m + log(sum_i l_i exp(m_i - m))``. Right when every split has the same maximum, and on every
call with fewer than 640 keys (impl runs there).

Real-world mistake: the combine step of a split-KV (flash-decoding) kernel that rescales the
partial outputs but writes the final ``softmax_lse`` from the raw partial sums; a cascade or
context-parallel merge that reads that ``lse`` then weighs the parts wrongly.
"""

import numpy as np

from attnprops.mutants import Mutant
from attnprops.mutants._tiled import TILED_CAPABILITIES
from attnprops.mutants._tiled import TiledKernel

ATTNPROPS_CAPABILITIES = {**TILED_CAPABILITIES, "lse": True}


class _Kernel(TiledKernel):
    k_tile = 64
    split_kv = 320
    min_key_len = 640

    def row_lse(self, state, splits):
        m = np.max([m_i for m_i, _ in splits], axis=0)
        l = np.sum([l_i for _, l_i in splits], axis=0)  # FAULT: no exp(m_i - m) per split
        with np.errstate(divide="ignore"):
            return (np.where(np.isneginf(m), 0, m) + np.log(l))[..., 0]


MUTANT = Mutant(
    name="split_kv_lse_without_the_rescale",
    description="split-KV kernel (splits of 320 keys from 640 keys on) returns lse = "
    "max_i m_i + log(sum_i l_i), the splits' sums not rescaled to one maximum",
    models="a flash-decoding combine step that rescales the outputs but not the lse it writes",
    killed_by=("test_kernel_sized_lse_and_split_kv_merge",),
    steps=_Kernel,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
