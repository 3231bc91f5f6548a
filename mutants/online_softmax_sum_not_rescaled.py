"""Mutant: the blocked path's running sum is not rescaled when the running maximum grows.

What is broken: in the online softmax (``block_size=n``) the running sum ``l`` keeps the terms
``exp(s_j - m_old)`` of earlier key blocks after the maximum grew to ``m_new``; the running
output *is* rescaled by ``exp(m_old - m_new)``, so only the normalizer is wrong. The output is
finite and of the right shape but shrinks towards zero. With one block (``block_size=None``,
``>= Tk``) or when the maximum never grows after the first block, the result is exactly impl's.
Validation, masking and the dense path are impl's.

Real-world mistake: ``l = l + rowsum(p)`` instead of ``l = exp(m_old - m_new) * l +
rowsum(p)`` in a hand-written FlashAttention / online-softmax kernel (Milakov & Gimelshein 2018,
alg. 3, line "d_j = d_{j-1} e^{m_{j-1} - m_j} + e^{x_j - m_j}").
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = {"block_size": True}


class _SumNotRescaled(impl.Attention):
    def online_softmax_step(self, m, l, acc, s, value):
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
        shift = np.where(m_new == -np.inf, s.dtype.type(0), m_new)
        alpha = np.exp(m - shift)
        p = np.exp(np.subtract(s, shift, out=s), out=s)
        l += p.sum(axis=-1, keepdims=True)  # FAULT: l is not multiplied by alpha first
        acc *= alpha
        acc += np.matmul(p, value)
        m[...] = m_new


MUTANT = Mutant(
    name="online_softmax_sum_not_rescaled",
    description="blocked online softmax: the running sum is not rescaled by exp(m_old - m_new) "
    "when the maximum grows, so outputs are too small",
    models="`l += rowsum(p)` instead of `l = l * exp(m_old - m_new) + rowsum(p)` in a "
    "FlashAttention-style kernel",
    killed_by=("test_output_matches_oracle", "test_key_permutation_invariance"),
    steps=_SumNotRescaled,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
