"""Mutant: a bool ``attn_mask`` is read with the opposite meaning (True = hide).

What is broken: the rule is "True = this query may attend to this key" (PyTorch SDPA's
convention); this subject hides the True positions and attends to the False ones. Float masks
are unaffected. Inputs are validated as by impl (a mask that hides a whole row under the REAL
meaning raises FullyMaskedRowError); rows that the inverted reading leaves empty come out as
zeros, so outputs stay finite.

Real-world mistake: mixing PyTorch's two bool-mask conventions: ``nn.MultiheadAttention``'s
``key_padding_mask``/``attn_mask`` (True = ignore) and SDPA's ``attn_mask`` (True = attend), or
passing a Hugging Face ``attention_mask`` (1 = keep) where a padding mask (True = pad) is
expected. The source lab (000, section 4): "不要默认其他接口的 padding mask 与它同义".
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant


class _InvertedBoolMask(impl.Attention):
    def validate(self, query, key, value, options, **checks):
        call = super().validate(query, key, value, options, **checks)
        mask = options["attn_mask"]
        if not (isinstance(mask, np.ndarray) and mask.dtype == np.bool_):
            return call
        # FAULT: True read as "hide" (nn.MultiheadAttention's convention), not "may attend".
        return super().validate(query, key, value, {**options, "attn_mask": ~mask}, **checks)


MUTANT = Mutant(
    name="padding_mask_inverted",
    description="bool attn_mask read as True = hide instead of True = may attend",
    models="PyTorch nn.MultiheadAttention key_padding_mask (True = ignore) vs SDPA attn_mask "
    "(True = attend), or an HF attention_mask (1 = keep) passed as a padding mask",
    killed_by=("test_bool_mask_equals_additive_mask", "test_hidden_keys_get_zero_weight"),
    steps=_InvertedBoolMask,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
