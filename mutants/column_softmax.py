"""Mutant: the softmax normalizes along the query axis (columns) instead of the key axis.

What is broken: ``softmax(scores, axis=-2)``: each KEY column of the weights sums to 1 and the
query rows do not. Everything else (scores, masks, causality, validation) is impl's. Columns
that no query may see get zero weight, so the output stays finite.

Real-world mistake: the wrong ``axis``/``dim`` in the softmax (``softmax(scores, dim=-2)`` or
``axis=0`` in 2-D code), which the 003 fault table lists first under "行权重和不为 1 → softmax 轴".
The source lab (000) builds this counterexample: max |row sum - 1| is 0.596413 on its 3-token
causal example.
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant


class _ColumnSoftmax(impl.Attention):
    def softmax(self, scores):
        # FAULT: axis=-2 (queries) in every line where impl's softmax uses axis=-1 (keys);
        # a column with no visible score gets weight 0.
        has_key = (scores > -np.inf).any(axis=-2, keepdims=True)
        col_max = np.where(has_key, scores.max(axis=-2, keepdims=True), 0)
        with np.errstate(invalid="ignore", under="ignore"):
            exp = np.exp(scores - col_max)
        total = exp.sum(axis=-2, keepdims=True)
        return exp / np.where(has_key, total, 1)


MUTANT = Mutant(
    name="column_softmax",
    description="softmax normalizes over the query axis (columns) instead of the key axis",
    models="softmax(scores, axis=-2) / dim=-2 (or axis=0 in 2-D code): the wrong softmax axis; "
    "the source lab's column-normalization counterexample (max row-sum error 0.596413)",
    killed_by=("test_weight_rows_sum_to_one", "test_seed_examples"),
    steps=_ColumnSoftmax,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
