"""Mutant: the softmax does not subtract the row maximum before ``exp``.

What is broken: ``exp(s) / sum(exp(s))`` computed directly. Mathematically equal, and for
moderate scores the result agrees with impl to rounding; but once a visible score exceeds
``log(max float)`` (about 88.7 in float32, which also serves float16 inputs, and 709.8 in
float64) ``exp`` overflows and the row becomes ``inf / inf = NaN``, and when every visible
score is below about -103 (float32) / -745 (float64) ``exp`` underflows to 0 and the row is
``0 / 0 = NaN``. Validation and masking are impl's.

Real-world mistake: the textbook softmax without the max-subtraction trick in hand-written
attention kernels and "simple" NumPy ports; the source lab (000) subtracts the row maximum for
exactly this reason. Typical trigger: a float mask/bias that adds a large constant to a row.
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant


class _NoMaxSubtraction(impl.Attention):
    def softmax(self, scores):
        with np.errstate(over="ignore", invalid="ignore"):
            exp = np.exp(scores)  # FAULT: no "- row max"; exp(-inf) == 0 for hidden keys
            return exp / exp.sum(axis=-1, keepdims=True)


MUTANT = Mutant(
    name="no_max_subtraction",
    description="softmax without subtracting the row max: exp overflows (inf/inf = NaN) for "
    "large scores and underflows (0/0 = NaN) for very negative ones",
    models="textbook softmax exp(s)/sum(exp(s)) in hand-written attention, without the "
    "max-subtraction trick",
    killed_by=("test_row_constant_shift_invariance",),
    steps=_NoMaxSubtraction,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
