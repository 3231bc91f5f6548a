"""Mutant: for float16/bfloat16 inputs against at least 2048 keys, the running softmax
denominator is rounded to the input dtype after every key tile of 64.

What is broken: the online softmax's row sum ``l = l * exp(m_old - m_new) + sum(p)``
(Milakov & Gimelshein 2018, alg. 3) is held in the input dtype between key tiles, the
output accumulator and the scores in float32 as declared. Each rounding moves ``l`` by up
to one unit roundoff of the input dtype, and the row's output ``acc / l`` by the same
relative error: about ``sqrt(tiles) u / 3`` after ``Tk / 64`` tiles, the whole row alike.
Right for float32/float64 inputs and calls of fewer than 2048 keys (impl runs there).

Real-world mistake: a decode kernel that keeps its per-row statistics in registers of the
element type (``half`` or ``__nv_bfloat16``) to save registers, or stores them to a
workspace of that type between key blocks. Values of mixed signs hide it: the rows' outputs
then shrink like ``1 / sqrt(Tk)`` while the bound follows ``sum |w_j v_j|`` (measured at
Tk = 3001-8193, float16, one or two rows: no row outside the bound in 12 calls with the
``unit`` regime, 4 of 12 calls with every entry in [0.25, 1]). In 100 random draws of the
property that kills it, which runs each draw in bfloat16 and in float16, 75 fail: every draw
of 2048 keys or more, in bfloat16 (52 of them in float16 too; measured with each dtype's
values drawn in it, the property's float16 call takes the bfloat16 values).
"""

from attnprops.mutants import Mutant
from attnprops.mutants._tiled import TILED_CAPABILITIES
from attnprops.mutants._tiled import TiledKernel

ATTNPROPS_CAPABILITIES = TILED_CAPABILITIES


class _Kernel(TiledKernel):
    k_tile = 64
    min_key_len = 2048

    def runs(self, problem):
        return problem.dtype.itemsize == 2 and super().runs(problem)

    def tiled_output(self, problem):
        self.held = problem.dtype  # the input dtype, read by online_step below
        return super().tiled_output(problem)

    def online_step(self, m, l, acc, s, value):
        super().online_step(m, l, acc, s, value)
        l[...] = l.astype(self.held).astype(l.dtype)  # FAULT: l held in 16 bits


MUTANT = Mutant(
    name="row_sum_kept_in_the_input_dtype_past_2048_keys",
    description="16-bit inputs, >= 2048 keys: the running softmax denominator rounded to the "
    "input dtype after every key tile of 64",
    models="per-row softmax statistics kept in half/bfloat16 registers between key blocks",
    killed_by=("test_kernel_sized_long_same_sign_rows_match_reference",),
    steps=_Kernel,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
