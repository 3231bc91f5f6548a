"""Mutant: from 256 keys on, float16 scores are accumulated in float16.

What is broken: for float16 inputs and at least 256 keys the kernel's ``q . k`` runs as a
float16 GEMM with a float16 accumulator: each product and each partial sum over the head dim
is rounded to float16 (about ``sqrt(D) 2**-11`` relative in each score, where float32
accumulation gives ``D 2**-24``). The softmax and the weighted sum stay in float32. Right
for float32/float64 and for fewer keys (impl runs there). The module declares what impl
declares, float16 computed in float32 (``compute_dtypes``): the claim the fault breaks.

Real-world mistake: a half-precision GEMM with a half accumulator (``cublasHgemm``, PyTorch's
``allow_fp16_reduced_precision_reduction``, a kernel that keeps ``acc`` in ``scalar_t``
instead of ``accum_t``) picked for the QK^T product of long sequences.
"""

import numpy as np

from attnprops.mutants import Mutant
from attnprops.mutants._tiled import TILED_CAPABILITIES
from attnprops.mutants._tiled import TiledKernel

ATTNPROPS_CAPABILITIES = TILED_CAPABILITIES


class _Kernel(TiledKernel):
    min_key_len = 256

    def runs(self, problem):
        return problem.dtype == np.float16 and super().runs(problem)

    def tile_dots(self, q, k, rows, keys):
        # FAULT: float16 products and a float16 running sum over the head dim
        q16 = q[:, :, :, rows].astype(np.float16)  # (B, Hkv, G, n, D)
        k16 = k[:, :, None, keys].astype(np.float16)  # (B, Hkv, 1, nk, D)
        s = np.zeros(q16.shape[:-1] + (k16.shape[-2],), np.float16)
        for d in range(q16.shape[-1]):
            s += q16[..., d, None] * k16[..., None, :, d]
        return s.astype(q.dtype)


MUTANT = Mutant(
    name="float16_scores_accumulated_in_float16",
    description="kernel (float16, from 256 keys on) accumulates q . k in float16: every "
    "product and partial sum over the head dim rounded to float16",
    models="a half-precision QK^T GEMM with a half accumulator chosen for long sequences",
    # chunk and decode first: they kill (a float16 call past 256 keys with few queries); the
    # runner stops at the first property that fails, so one listed before them runs in full
    killed_by=(
        "test_kernel_sized_chunk_matches_reference",
        "test_kernel_sized_decode_matches_reference",
        "test_kernel_sized_prefill_matches_reference",
        "test_kernel_sized_cross_matches_reference",
    ),
    steps=_Kernel,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
