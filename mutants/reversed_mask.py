"""Mutant: the causal comparison is flipped, query ``i`` sees keys ``j >= query_start + i``.

What is broken: with ``is_causal=True`` a query attends to its own position and every LATER
key instead of every earlier one (``j >= start + i`` instead of ``j <= start + i``). Masks and
all input rules are impl's; only the direction of the causal comparison is reversed.

Real-world mistake: building the causal mask with ``np.triu`` instead of ``np.tril`` (or
``torch.triu(..., diagonal=1)`` used as the *keep* mask instead of the *hide* mask), a classic
in hand-written decoders; the 003 fault table lists "causal mask 方向" under "training loss too
low, generation collapses". The source lab (000) builds exactly this counterexample: on its
3-token example the weights on forbidden (future) positions total 0.872569.
"""

from attnprops.impl import KVCache, kv_cache_bytes
from attnprops.impl.kv_cache import cached_attention as _impl_cached_attention
from attnprops.mutants import Mutant
from attnprops.mutants._common import Pipeline, causal_positions, rebind, replace_visible


class _ReversedMask(Pipeline):
    def validate(self, query, key, value, needs_value, options, fully_masked_rows="raise"):
        problem = super().validate(query, key, value, needs_value, options, fully_masked_rows)
        if not problem.is_causal:
            return problem
        i, j = causal_positions(problem)
        mask_only = self.mask_visibility(query, key, value, needs_value, options)
        # FAULT: ">=" where the rule says "<=": the query sees the future, not the past.
        return replace_visible(problem, mask_only & (j >= problem.query_start + i))


_PIPELINE = _ReversedMask()
attention = _PIPELINE.attention
attention_weights = _PIPELINE.attention_weights
cached_attention = rebind(_impl_cached_attention, attention=attention)

__all__ = ["KVCache", "attention", "attention_weights", "cached_attention", "kv_cache_bytes"]

MUTANT = Mutant(
    name="reversed_mask",
    description="causal visibility flipped: key j visible to query i iff j >= query_start + i",
    models="np.triu instead of np.tril (keep-mask vs hide-mask confusion) in a causal decoder; "
    "the source lab's reversed-mask counterexample (forbidden weight 0.872569)",
    killed_by=("test_hidden_keys_get_zero_weight", "test_seed_examples"),
)
