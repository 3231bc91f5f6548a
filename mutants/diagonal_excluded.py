"""Mutant: the causal mask also hides the query's own position (``j < query_start + i``).

What is broken: with ``is_causal=True`` query ``i`` sees only STRICTLY earlier keys. The first
query of a sequence would then see nothing; like many such implementations this one keeps key
0 always visible ("so the softmax never sees an empty row"), so the output stays finite: query 0
reads key 0 (right), every later query misses its own key. Validation and masks are impl's.

Real-world mistake: the off-by-one in the causal mask, ``np.triu(ones, k=0)`` used as the hide
mask where ``k=1`` is meant (or ``j < i`` for ``j <= i``), often combined with the "always let
the first token through" patch against NaN rows. 003 fault table: "causal mask 方向、对角线".
"""

from attnprops.impl import KVCache, kv_cache_bytes
from attnprops.impl.kv_cache import cached_attention as _impl_cached_attention
from attnprops.mutants import Mutant
from attnprops.mutants._common import Pipeline, causal_positions, rebind, replace_visible


class _DiagonalExcluded(Pipeline):
    def validate(self, query, key, value, needs_value, options, fully_masked_rows="raise"):
        problem = super().validate(query, key, value, needs_value, options, fully_masked_rows)
        if not problem.is_causal:
            return problem
        i, j = causal_positions(problem)
        mask_only = self.mask_visibility(query, key, value, needs_value, options)
        # FAULT: "<" where the rule says "<=" (the diagonal is hidden); key 0 patched visible.
        causal = (j < problem.query_start + i) | (j == 0)
        return replace_visible(problem, mask_only & causal)


_PIPELINE = _DiagonalExcluded()
attention = _PIPELINE.attention
attention_weights = _PIPELINE.attention_weights
cached_attention = rebind(_impl_cached_attention, attention=attention)

__all__ = ["KVCache", "attention", "attention_weights", "cached_attention", "kv_cache_bytes"]

MUTANT = Mutant(
    name="diagonal_excluded",
    description="causal visibility j < query_start + i (own position hidden), key 0 kept "
    "visible so no row is empty",
    models="off-by-one causal mask: np.triu(ones, k=0) as the hide mask instead of k=1, plus "
    "the usual 'always attend to the first token' patch against NaN rows",
    killed_by=("test_output_matches_oracle", "test_weights_match_oracle"),
)
