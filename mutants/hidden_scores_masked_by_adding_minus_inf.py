"""Mutant: hidden keys are hidden by adding ``-inf`` to their computed scores.

What is broken: the scores of every key are computed, then each hidden key's score gets
``-inf`` added (an additive mask built from the bool mask, causality, a window or documents).
Right wherever the hidden score is finite; a hidden key whose score overflowed to ``+inf``
(keys near the dtype's maximum: uninitialized or garbage cache slots, padding filled with
large values) becomes ``inf + (-inf) = NaN``, and its row's output NaN, although the key is
hidden and the call valid (the overflow rule is about visible scores). Validation is impl's.

Real-world mistake: finding F4 (PyTorch SDPA), FlexAttention's eager path with a ``-inf``
float mask, the ONNX ``Attention`` operator (``sqrt(scale)`` on both Q and K), all of which
compute the hidden scores before they hide them.
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant


class _AdditiveMask(impl.Attention):
    def mask_scores(self, scores, call, compute, rows, keys, in_range=False):
        computed = scores.copy()
        super().mask_scores(scores, call, compute, rows, keys, in_range)
        hidden = np.isneginf(scores)
        with np.errstate(invalid="ignore"):  # FAULT: -inf added to the score, not put in place
            np.copyto(scores, computed + compute.type(-np.inf), where=hidden)


MUTANT = Mutant(
    name="hidden_scores_masked_by_adding_minus_inf",
    description="hidden keys get -inf added to their computed scores: a hidden score that "
    "overflowed to +inf becomes NaN",
    models="an additive -inf mask applied after the scores of every key are computed (F4)",
    killed_by=("test_hidden_keys_whose_scores_overflow_change_nothing",),
    steps=_AdditiveMask,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
