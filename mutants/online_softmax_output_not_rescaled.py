"""Mutant: the blocked path's running output is not rescaled when the running maximum grows.

What is broken: in the online softmax (``block_size=n``) the running output ``acc`` keeps the
terms ``exp(s_j - m_old) * v_j`` of earlier key blocks after the maximum grew to ``m_new``,
while the running sum ``l`` is rescaled correctly: earlier blocks are over-weighted by
``exp(m_new - m_old)``. The output is finite and of the right shape; it stays inside the range
of the values only by accident. With one block (``block_size=None``, ``>= Tk``) or when the
maximum never grows after the first block, the result is exactly impl's. Validation, masking
and the dense path are impl's.

Real-world mistake: rescaling the normalizer but forgetting ``O = diag(exp(m_old - m_new)) O``
before ``O += P V`` in a hand-written FlashAttention kernel (Dao et al. 2022, alg. 1, line 12).
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = {"block_size": True}


class _OutputNotRescaled(impl.Attention):
    def online_softmax_step(self, m, l, acc, s, value):
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
        shift = np.where(m_new == -np.inf, s.dtype.type(0), m_new)
        alpha = np.exp(m - shift)
        p = np.exp(np.subtract(s, shift, out=s), out=s)
        l *= alpha
        l += p.sum(axis=-1, keepdims=True)
        acc += np.matmul(p, value)  # FAULT: acc is not multiplied by alpha first
        m[...] = m_new


MUTANT = Mutant(
    name="online_softmax_output_not_rescaled",
    description="blocked online softmax: the running output is not rescaled by "
    "exp(m_old - m_new) when the maximum grows, so earlier key blocks are over-weighted",
    models="`O += P V` without `O *= exp(m_old - m_new)` first in a FlashAttention-style kernel",
    killed_by=("test_output_matches_oracle", "test_key_permutation_invariance"),
    steps=_OutputNotRescaled,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
