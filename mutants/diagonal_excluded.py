"""Mutant: the causal mask also hides the query's own position (``j < query_start + i``).

What is broken: with ``is_causal=True`` query ``i`` sees only STRICTLY earlier keys. The first
query of a sequence would then see nothing; like many such implementations this one keeps key
0 always visible ("so the softmax never sees an empty row"), so the output stays finite: query 0
reads key 0 (right), every later query misses its own key. Validation and masks are impl's.

Real-world mistake: the off-by-one in the causal mask, ``np.triu(ones, k=0)`` used as the hide
mask where ``k=1`` is meant (or ``j < i`` for ``j <= i``), often combined with the "always let
the first token through" patch against NaN rows. 003 fault table: "causal mask 方向、对角线".
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant


class _DiagonalExcluded(impl.Attention):
    def causal_hidden(self, call, rows, keys):
        if not call.is_causal:
            return None
        i = np.arange(rows.start, rows.stop)[:, None]
        j = np.arange(keys.start, keys.stop)[None, :]
        # FAULT: hidden where "j >= query_start + i", so the diagonal too (the rule hides
        # only j > query_start + i); key 0 stays visible.
        return (j >= call.query_start + i) & (j != 0)


MUTANT = Mutant(
    name="diagonal_excluded",
    description="causal visibility j < query_start + i (own position hidden), key 0 kept "
    "visible so no row is empty",
    models="off-by-one causal mask: np.triu(ones, k=0) as the hide mask instead of k=1, plus "
    "the usual 'always attend to the first token' patch against NaN rows",
    killed_by=("test_output_matches_oracle", "test_weights_match_oracle"),
    steps=_DiagonalExcluded,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
