"""Mutant: for float16/bfloat16 inputs with a value head dim above 256, the output columns
from 256 on are accumulated in the input dtype, one key block of 64 at a time.

What is broken: with ``Dv > 256`` the weighted sum ``P @ V`` of output columns ``256 ..
Dv - 1`` is accumulated over key blocks of 64, the running sum rounded to the input dtype
(float16 or bfloat16) after each block; the first 256 columns, ``Dv <= 256``, float32/float64
inputs, and calls of at most 64 keys (one block) are exact. The error grows with the number of
key blocks.

Real-world mistake: MLA decode kernels (DeepSeek's latent cache: ``Dv = 512``) that split the
value dim in two halves and keep the second half's accumulator in the element type to fit the
registers; every test at the usual head dims (<= 256) uses the float32 path. Values of mixed
signs hide it (the bound follows ``sum |w_j v_j|``, the error the partial sums): it shows with
values of one sign (measured at Dv = 512, float16, 481-960 keys: 1.1-1.5x the float64
evaluation's agreement bound with positive values, 0.04-0.3x with the unit and ties regimes).
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES
SPLIT, BLOCK = 256, 64


class _Steps(impl.Attention):
    def output(self, call, compute, block_size, lse=None):
        out = super().output(call, compute, block_size, lse)
        B, Hq, Tq, Tk = call.shape
        Hkv, Dv = call.key.shape[1], call.value.shape[3]
        if Dv <= SPLIT or call.dtype.itemsize != 2 or Tk <= BLOCK:
            return out
        weights = self.dense_weights(call, compute).reshape(B, Hkv, Hq // Hkv, Tq, Tk)
        value = call.value.astype(compute)[:, :, None, :, SPLIT:]  # (B, Hkv, 1, Tk, Dv - 256)
        acc = np.zeros((B, Hkv, Hq // Hkv, Tq, Dv - SPLIT), dtype=compute)
        with np.errstate(over="ignore", invalid="ignore"):
            for j0 in range(0, Tk, BLOCK):
                part = weights[..., j0 : j0 + BLOCK] @ value[:, :, :, j0 : j0 + BLOCK]
                acc = (acc + part).astype(call.dtype).astype(compute)  # FAULT: held in 16 bits
        out = out.copy()
        out[..., SPLIT:] = acc.reshape(B, Hq, Tq, Dv - SPLIT)
        return out


MUTANT = Mutant(
    name="value_dims_past_256_accumulated_in_the_input_dtype",
    description="16-bit inputs, Dv > 256: output columns 256.. accumulated in the input dtype",
    models="an MLA-style split value dim whose second half accumulates in bf16/fp16",
    killed_by=("test_kernel_sized_same_sign_sums_match_reference",),
    steps=_Steps,
)
__all__ = MUTANT.export(globals())
