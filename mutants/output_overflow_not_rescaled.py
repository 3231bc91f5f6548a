"""Mutant: values near the dtype's maximum make the output inf or NaN.

What is broken: impl recomputes an output that came out non-finite with the values scaled by a
power of two (``impl.Attention.rescaled_output``); this subject returns it as computed. The
blocked path sums ``exp(s - m) * v`` over the key blocks before dividing by the row sum, so two
keys whose values are near the maximum overflow the running sum (inf, or NaN from
``inf - inf`` when their signs differ); the dense path overflows when the rounded weights sum
to slightly more than 1. The exact output always fits (it is a convex combination of the
values). On every other input the result is bitwise impl's. Validation and masking are impl's.

Real-world mistake: accumulating the unnormalized output of an online softmax and dividing at
the end without guarding the accumulator's range; PyTorch SDPA's CPU kernel and JAX's
float32-weight softmax both return inf for such values (docs/findings.md, F3). The source lab
(000) asks that no valid input give NaN.
"""

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = {"block_size": True}


class _OverflowNotRescaled(impl.Attention):
    def rescaled_output(self, call, compute, block_size):
        # FAULT: the overflowed output is recomputed as it was, values not scaled down first
        return self.output(call, compute, block_size)


MUTANT = Mutant(
    name="output_overflow_not_rescaled",
    description="values near the dtype's maximum overflow the weighted sum (blocked running "
    "output, or dense weights summing past 1): inf or NaN where the exact output fits",
    models="an online-softmax accumulator of exp(s - m) * v divided only at the end, without "
    "guarding its range (PyTorch SDPA's CPU kernel does this, finding F3)",
    killed_by=("test_values_near_the_dtype_maximum_give_a_finite_output",),
    steps=_OverflowNotRescaled,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
