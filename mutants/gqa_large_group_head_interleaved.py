"""Mutant: with 4 or more query heads per K/V head, query head ``h`` reads K/V head ``h % Hkv``.

What is broken: for GQA groups ``G = Hq / Hkv >= 4`` (and ``Hkv >= 2``) the kernel maps query
head ``h`` to K/V head ``h % Hkv`` (heads interleaved) instead of ``h // G`` (heads
contiguous). Right for MHA, MQA (``Hkv = 1``) and groups of 2 or 3, where impl runs.

Real-world mistake: a K/V head index computed for one memory layout of the query heads used
with the other (``repeat_interleave`` vs ``repeat``/``tile``), in a kernel path taken only for
the large groups of Llama-style models (``Hq = 32, Hkv = 8``: ``G = 4``).
"""

import numpy as np

from attnprops.mutants import Mutant
from attnprops.mutants._tiled import TILED_CAPABILITIES
from attnprops.mutants._tiled import TiledKernel

ATTNPROPS_CAPABILITIES = TILED_CAPABILITIES


class _Kernel(TiledKernel):
    def runs(self, problem):
        return problem.num_kv_heads >= 2 and problem.group >= 4

    def tiled_output(self, problem):
        heads = np.arange(problem.num_heads) % problem.num_kv_heads  # FAULT: h % Hkv, not h // G
        return super().tiled_output(
            problem.replace(key=problem.key[:, heads], value=problem.value[:, heads])
        )


MUTANT = Mutant(
    name="gqa_large_group_head_interleaved",
    description="for GQA groups of 4 or more (Hkv >= 2), query head h reads K/V head h % Hkv",
    models="a K/V head index for interleaved query heads used with contiguous ones, in the "
    "kernel path for large GQA groups",
    killed_by=(
        "test_kernel_sized_gqa_equals_repeated_kv",
        "test_kernel_sized_prefill_matches_reference",
    ),
    steps=_Kernel,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
