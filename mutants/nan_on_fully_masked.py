"""Mutant: a query row with no visible key returns NaN instead of raising FullyMaskedRowError.

What is broken: the fully-masked-row rule is not applied (every other input rule is), and the
softmax has no guard for empty rows: ``max`` of an all ``-inf`` row is ``-inf`` and
``-inf - -inf`` is NaN, so those rows of the weights and the output are NaN. Rows with a
visible key are exactly impl's.

Real-world mistake: the NaN of a fully padded row (left padding with a causal mask, an all-False
padding mask) in hand-written softmax attention and in PyTorch before 2.5; the source lab
(000, section 4) explains "否则减去行最大值时可能出现 -inf - -inf，继而得到 NaN" and rejects such rows.
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant


class _NanOnFullyMasked(impl.Attention):
    def check_rows(self, call, block_size=None):
        # FAULT (1/2): fully masked rows are not rejected ...
        return None

    def softmax(self, scores):
        # FAULT (2/2): ... and the softmax has no empty-row guard: -inf - -inf = NaN, silently.
        with np.errstate(invalid="ignore"):
            return super().softmax(scores)


MUTANT = Mutant(
    name="nan_on_fully_masked",
    description="a query row with no visible key gives NaN weights/output instead of raising "
    "FullyMaskedRowError (all other rules kept)",
    models="unguarded softmax on a fully padded row (-inf - -inf = NaN), as in hand-written "
    "attention and PyTorch SDPA before 2.5; the source lab rejects such rows",
    killed_by=("test_fully_masked_rows_follow_declared_convention",),
    steps=_NanOnFullyMasked,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
