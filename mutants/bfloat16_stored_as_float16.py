"""Mutant: bfloat16 inputs are converted to float16, the other 2-byte float.

What is broken: for bfloat16 inputs the computation first converts query, key and value to
float16 (then computes in float32, as impl does for float16) and rounds the result back to
bfloat16. float16 has 5 exponent bits where bfloat16 has 8: every entry above 65504 becomes
infinity (and below ``2**-24`` zero), so a call that reads one fails on a valid input (an
infinite score: an overflow error, NaN or infinity), where bfloat16's range is float32's. Inside float16's range the conversion is exact (float16
has more fraction bits), so every call with modest values is right.

Real-world mistake: "half" meaning float16 in one layer and bfloat16 in another (a
``torch.half`` cast, ``np.float16`` for a 2-byte dtype, ``__half`` vs ``__nv_bfloat16``
in a kernel's dispatch), a bug that needs large activations to show.
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant
from attnprops.mutants._tiled import REFERENCE_PROPERTIES
from attnprops.oracle.rules import BFLOAT16

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


def _as_float16(call):
    """The call with its bfloat16 query, key and value converted to float16."""
    if call.dtype != BFLOAT16:
        return call
    with np.errstate(over="ignore"):
        arrays = {n: getattr(call, n).astype(np.float16) for n in ("query", "key", "value")}
    return call._replace(**arrays)  # FAULT: float16 is not bfloat16


class _Steps(impl.Attention):
    def output(self, call, compute, block_size, lse=None):
        return super().output(_as_float16(call), compute, block_size, lse)

    def rescaled_output(self, call, compute, block_size):
        return super().rescaled_output(_as_float16(call), compute, block_size)


MUTANT = Mutant(
    name="bfloat16_stored_as_float16",
    description="bfloat16 inputs converted to float16 before computing: entries above "
    "65504 become infinity",
    models="a 2-byte float dispatched as float16 (torch.half, np.float16, __half) for bfloat16",
    # cross-attention first: it kills (bfloat16 past float16's range at kernel sizes); the
    # runner stops at the first property that fails, so one listed before it runs in full
    killed_by=(
        "test_kernel_sized_cross_matches_reference",
        "test_output_matches_oracle",
        *(p for p in REFERENCE_PROPERTIES if p != "test_kernel_sized_cross_matches_reference"),
    ),
    steps=_Steps,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
