"""Mutant: the normalised weights are rounded to bfloat16 and used as they are.

What is broken: the softmax divides by the row's sum in the compute dtype, as impl does, and
then rounds every weight to bfloat16 (8 significant bits) before returning it and before
``P @ V``, without renormalising: each weight moves by up to ``2**-9`` relative, so a row
sums to 1 within a few bfloat16 ulps instead of a few ulps of the declared dtype, and the
output moves with it. The declared arithmetic is impl's (float32 and float64 throughout,
float16 computed in float32): none of it rounds a weight that coarsely.

Real-world mistake: ``P`` cast to the low-precision GEMM dtype after the division (a
bfloat16 ``P @ V`` in a float32 model, an fp8 ``P`` in an fp8 attention kernel), where
FlashAttention rounds the *unnormalised* ``exp(s - m)`` and divides by the float32 sum of
the unrounded ones afterwards (declared ``rounds_weights``).
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant
from attnprops.oracle.rules import BFLOAT16

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _Steps(impl.Attention):
    def softmax(self, scores):
        weights = super().softmax(scores)
        rounded = weights.astype(np.float32).astype(BFLOAT16)  # FAULT: no renormalising
        weights[...] = rounded.astype(weights.dtype)
        return weights


MUTANT = Mutant(
    name="weights_rounded_to_bfloat16_not_renormalized",
    description="normalised weights rounded to bfloat16 and used without renormalising: rows "
    "sum to 1 +- bfloat16 ulps",
    models="P cast to a bfloat16 (or fp8) GEMM dtype after the softmax's division",
    killed_by=("test_weights_match_oracle", "test_weight_rows_sum_to_one"),
    steps=_Steps,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
