"""Mutant: the tiled kernel finds a full mask's tile by flattening (batch, head) the other way.

What is broken: from 96 keys on, the kernel (query tiles of 64 rows, key tiles of 32) reads
the tile of batch element ``b`` and query head ``h`` of a ``(B, Hq, Tq, Tk)`` mask from the
flat index ``h * B + b`` instead of ``b * Hq + h``, so with two or more of both, a (batch,
head) pair reads another pair's mask. Masks broadcast over the batch or the heads (padding,
one ``(Tq, Tk)`` mask, ALiBi's ``(1, Hq, Tq, Tk)``), one batch element, one head, and every
call with fewer than 96 keys (impl runs there) are right.

Real-world mistake: a mask (or bias) pointer advanced with the batch and head strides
swapped, or the (batch, head) grid index decomposed in the other order than the mask's
layout; it reads in bounds whenever ``B = Hq``, so nothing crashes, and a test suite whose
masks are shared by heads or by batch elements never sees it.
"""

import numpy as np

from attnprops.mutants import Mutant
from attnprops.mutants._tiled import TILED_CAPABILITIES
from attnprops.mutants._tiled import TiledKernel
from attnprops.mutants._tiled import seen_as

ATTNPROPS_CAPABILITIES = TILED_CAPABILITIES


class _Kernel(TiledKernel):
    q_tile = 64
    k_tile = 32
    min_key_len = 96

    def tiled_output(self, problem):
        mask, B, Hq = problem.mask, problem.batch, problem.num_heads
        if mask is not None and mask.ndim == 4 and mask.shape[:2] == (B, Hq):
            flat = mask.reshape(B * Hq, *mask.shape[2:])
            swapped = np.arange(B * Hq).reshape(Hq, B).T.reshape(-1)  # FAULT: h * B + b
            problem = seen_as(problem, mask=flat[swapped].reshape(mask.shape))
        return super().tiled_output(problem)


MUTANT = Mutant(
    name="mask_tile_read_with_batch_and_head_swapped",
    description="tiled kernel (from 96 keys on) reads the (B, Hq, Tq, Tk) mask tile of "
    "(b, h) at flat index h * B + b: with B, Hq >= 2 a pair reads another's mask",
    models="a mask pointer advanced with the batch and head strides swapped (the grid index "
    "decomposed in the other order than the mask's layout)",
    killed_by=("test_kernel_sized_per_head_masks_match_reference",),
    steps=_Kernel,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
