"""Mutant: the log-sum-exp is returned in base 2, ``log2 sum_j 2**(s_j log2 e)``.

What is broken: with ``return_lse=True`` the ``lse`` is ``log2(e)`` times the natural one
(the kernel's base-2 running maximum and sum, never converted back), so merging two parts
weighs them by ``e^{(l_A - l_B) log2 e}`` instead of ``e^{l_A - l_B}``. The output is impl's.

Real-world mistake: kernels that compute the softmax with ``exp2`` (the scale multiplied by
``log2 e``, as FlashAttention 3's and FlexAttention's do) and return their base-2 ``lse``
without the factor ``ln 2`` (FlashAttention 3 multiplies by ``M_LN2`` before it stores it).
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _Base2Lse(impl.Attention):
    def output(self, call, compute, block_size, lse=None):
        out = super().output(call, compute, block_size, lse)
        if lse is not None:
            lse *= lse.dtype.type(np.log2(np.e))  # FAULT: the base-2 lse, not converted
        return out


MUTANT = Mutant(
    name="lse_in_base_2",
    description="return_lse gives the base-2 log-sum-exp (log2(e) times the natural one)",
    models="an exp2-based kernel that stores its base-2 lse without the factor ln 2",
    killed_by=("test_lse_matches_oracle", "test_two_key_sets_merge_into_their_union"),
    steps=_Base2Lse,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
