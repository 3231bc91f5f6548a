"""Mutant: the soft cap is applied after the mask, so a hidden key's ``-inf`` becomes ``-c``.

What is broken: ``c * tanh(s / c)`` runs on the masked scores: every hidden key (mask,
causality, window, document) gets the finite score ``-c`` instead of ``-inf`` and takes
weight ``exp(-c - m)`` from the visible ones; a float mask's finite entries are capped too.
Calls without ``softcap`` are impl's; so are rows that hide nothing and have no float mask.

Real-world mistake: the ONNX reference implementation's ``softcap`` applied to the masked
logits (onnx#7865): ``tanh(-inf) * c = -c`` leaks weight to the masked keys.
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _SoftcapAfterMask(impl.Attention):
    def mask_scores(self, scores, call, compute, rows, keys, in_range=False):
        if call.softcap is None:
            return super().mask_scores(scores, call, compute, rows, keys, in_range)
        super().mask_scores(scores, call._replace(softcap=None), compute, rows, keys, in_range)
        with np.errstate(invalid="ignore"):
            self.softcap_scores(scores, call, compute)  # FAULT: after the mask: -inf -> -c


MUTANT = Mutant(
    name="softcap_after_mask",
    description="softcap applied to the masked scores: hidden keys get -c instead of -inf",
    models="the ONNX reference's softcap applied after the mask (onnx#7865): tanh(-inf) * c "
    "leaks weight to masked keys",
    killed_by=("test_each_query_sees_exactly_its_keys", "test_softcapped_output_matches_oracle"),
    steps=_SoftcapAfterMask,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
