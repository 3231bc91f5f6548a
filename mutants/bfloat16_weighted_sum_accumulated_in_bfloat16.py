"""Mutant: from 32 keys on, bfloat16's weighted sum of the values is accumulated in bfloat16.

What is broken: for bfloat16 inputs and at least 32 keys the kernel keeps the output
accumulator ``acc`` of its online softmax in bfloat16: every ``p_j v_j`` added to it and
every rescale by ``exp(m_old - m_new)`` is rounded to bfloat16 (unit roundoff ``2**-8``), so
the error of a row grows with its length (about ``sqrt(Tk) 2**-9`` relative for random
signs, ``Tk 2**-8`` at worst), where a float32 accumulator gives ``Tk 2**-24``. The scores,
the softmax and the sum of the weights stay in float32; float16, float32 and float64 are
right, and so are fewer keys (impl runs there). The module declares what impl declares,
bfloat16 computed in float32 (``compute_dtypes``): the claim the fault breaks.

Real-world mistake: a kernel that declares its accumulator as the storage type
(``scalar_t acc`` instead of ``accum_t``/``float``), or a bfloat16 GEMM for ``P @ V`` whose
output type is bfloat16 and whose partial sums across key tiles are added in it.
"""

import numpy as np

from attnprops.mutants import Mutant
from attnprops.mutants._tiled import REFERENCE_PROPERTIES
from attnprops.mutants._tiled import TILED_CAPABILITIES
from attnprops.mutants._tiled import TiledKernel
from attnprops.oracle.rules import BFLOAT16

ATTNPROPS_CAPABILITIES = TILED_CAPABILITIES


def _round(acc: np.ndarray) -> None:
    """``acc`` (float32) rounded to bfloat16 in place (nearest, ties to even)."""
    acc[...] = acc.astype(BFLOAT16).astype(acc.dtype)


class _Kernel(TiledKernel):
    min_key_len = 32

    def runs(self, problem):
        return problem.dtype == BFLOAT16 and super().runs(problem)

    def accumulate(self, acc, alpha, p, value):
        acc *= alpha
        _round(acc)  # FAULT: the accumulator is bfloat16
        for j in range(p.shape[-1]):  # one key at a time, as a GEMM's k-loop
            acc += p[..., j : j + 1] * value[:, :, :, j : j + 1]
            _round(acc)


MUTANT = Mutant(
    name="bfloat16_weighted_sum_accumulated_in_bfloat16",
    description="kernel (bfloat16, from 32 keys on) accumulates P @ V in bfloat16: every "
    "term added to the output accumulator and every rescale of it rounded to bfloat16",
    models="a storage-typed accumulator (scalar_t acc) or a bf16-output GEMM for P @ V",
    killed_by=REFERENCE_PROPERTIES,
    steps=_Kernel,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
