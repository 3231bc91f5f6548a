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

from attnprops.impl import KVCache, kv_cache_bytes
from attnprops.impl.kv_cache import cached_attention as _impl_cached_attention
from attnprops.mutants import Mutant
from attnprops.mutants._common import Pipeline, rebind


class _MaskIgnoredWithCausal(Pipeline):
    def validate(self, query, key, value, needs_value, options, fully_masked_rows="raise"):
        problem = super().validate(query, key, value, needs_value, options, fully_masked_rows)
        if not options["is_causal"] or options["attn_mask"] is None:
            return problem
        # FAULT: causal mask INSTEAD of the attn_mask, not AND-ed with it.
        options = {**options, "attn_mask": None}
        return super().validate(query, key, value, needs_value, options, fully_masked_rows)


_PIPELINE = _MaskIgnoredWithCausal()
attention = _PIPELINE.attention
attention_weights = _PIPELINE.attention_weights
cached_attention = rebind(_impl_cached_attention, attention=attention)

__all__ = ["KVCache", "attention", "attention_weights", "cached_attention", "kv_cache_bytes"]

MUTANT = Mutant(
    name="mask_ignored_with_causal",
    description="with is_causal=True the attn_mask is ignored (causal mask used instead of "
    "causal AND mask)",
    models="`mask = causal_mask if is_causal else attn_mask` in a decoder: padding of "
    "left-padded batches is read",
    killed_by=("test_hidden_keys_get_zero_weight", "test_is_causal_equals_explicit_mask"),
)
