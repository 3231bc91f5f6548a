"""Mutant: hidden keys get the score ``-1e4`` instead of ``-inf``.

What is broken: masked positions (bool mask, causality and a float mask's ``-inf`` entries)
are set to the finite "dtype-safe" constant ``-10000``. In typical cases ``exp(-1e4 - max)`` is
exactly 0 and nothing shows; but a hidden key gets a NONZERO weight as soon as the visible
scores of its row are themselves below about -1e4 + 100 (a large negative float mask/bias, a
large ``scale``), and then a hidden key can even dominate. Validation is impl's.

Real-world mistake: BERT-style ``(1.0 - mask) * -10000.0`` extended attention masks (and
``torch.finfo(dtype).min`` variants) instead of ``-inf``; the 003 cheat sheet mentions "非法位置
加负无穷或 dtype 安全的极小值", and -1e4 is not small enough next to large-magnitude scores.
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant


class _Minus1e4(impl.Attention):
    def mask_scores(self, scores, call, compute, rows, keys, in_range=False):
        super().mask_scores(scores, call, compute, rows, keys, in_range)
        # FAULT: a finite "large negative" constant instead of -inf.
        np.copyto(scores, compute.type(-1e4), where=np.isneginf(scores))


MUTANT = Mutant(
    name="minus_1e4_mask",
    description="hidden keys get score -1e4 instead of -inf: nonzero weight when visible scores "
    "are very negative",
    models="BERT-style additive mask (1 - mask) * -10000.0 / 'dtype-safe minimum' instead of -inf",
    killed_by=("test_hidden_keys_get_zero_weight", "test_row_constant_shift_invariance"),
    steps=_Minus1e4,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
