"""Mutant: a row that sees no key gets ``lse = +inf`` instead of ``-inf``.

What is broken: with ``return_lse=True``, a row whose keys are all hidden (allowed when its
head's sink is finite) reports ``lse = +inf``, so a merge gives such a part all the weight
instead of none. The output, and every row that sees a key, are impl's.

Real-world mistake: FlashAttention 2's forward kernel writes ``lse = INFINITY`` for a row
whose sum is 0 when it is not a split (``-INFINITY`` only on the split-KV path,
``softmax.h``): code that merges such partial results, or reads the ``lse`` as this
project's, takes the empty part for the dominant one.
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _PlusInfLse(impl.Attention):
    def output(self, call, compute, block_size, lse=None):
        out = super().output(call, compute, block_size, lse)
        if lse is not None:
            lse[np.isneginf(lse)] = np.inf  # FAULT: FlashAttention 2's non-split convention
        return out


MUTANT = Mutant(
    name="lse_of_an_empty_row_is_plus_inf",
    description="return_lse gives +inf, not -inf, for a row that sees no key",
    models="FlashAttention 2's lse = INFINITY for an empty row outside split-KV",
    killed_by=("test_lse_matches_oracle",),
    steps=_PlusInfLse,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
