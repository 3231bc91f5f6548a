"""Mutant: with ``is_causal=True`` the ``attn_mask`` is dropped instead of AND-ed with causality.

What is broken: when both a mask and ``is_causal=True`` are given, only the causal mask is
applied; padding (bool False / float ``-inf``) and any float bias are silently ignored. The mask
is still validated as by impl (bad shapes/dtypes and rows it would fully hide still raise).
Without ``is_causal`` the mask works.

Real-world mistake: ``mask = causal_mask if is_causal else attn_mask`` (an ``if/else`` where
the rule says "and"); common in decoders that then read padding tokens of left-padded batches.
Rulebook: "Causal visibility is AND-ed with the mask"; the source lab (000, section 4):
"因果可见性与 padding 可见性应按逻辑条件组合".
"""

from attnprops import impl
from attnprops.mutants import Mutant


class _MaskIgnoredWithCausal(impl.Attention):
    def validate(self, query, key, value, options, **checks):
        call = super().validate(query, key, value, options, **checks)
        if not call.is_causal or options["attn_mask"] is None:
            return call
        # FAULT: causal mask INSTEAD of the attn_mask, not AND-ed with it.
        return super().validate(query, key, value, {**options, "attn_mask": None}, **checks)


MUTANT = Mutant(
    name="mask_ignored_with_causal",
    description="with is_causal=True the attn_mask is ignored (causal mask used instead of "
    "causal AND mask)",
    models="`mask = causal_mask if is_causal else attn_mask` in a decoder: padding of "
    "left-padded batches is read",
    killed_by=("test_hidden_keys_get_zero_weight", "test_is_causal_equals_explicit_mask"),
    steps=_MaskIgnoredWithCausal,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
