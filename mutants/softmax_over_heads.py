"""Mutant: the softmax normalizes over the heads axis (axis 1) instead of the key axis.

What is broken: ``softmax(scores, axis=1)`` on the ``(B, Hq, Tq, Tk)`` scores: for each
(batch, query, key) the weights over the ``Hq`` heads sum to 1; the key rows do not. With one
head every visible weight is 1 (the output is the sum of the visible values). Positions hidden
in every head get weight 0, so the output stays finite. Validation and masks are impl's.

Real-world mistake: ``F.softmax(scores, dim=1)`` / ``axis=1`` carried over from 2-D
``(Tq, Tk)`` code, where axis 1 IS the key axis, to 4-D ``(B, H, Tq, Tk)`` scores, where it is
the heads axis (``dim=-1`` is the robust spelling); 003 fault table: "行权重和不为 1 → softmax 轴".
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant


class _SoftmaxOverHeads(impl.Attention):
    def softmax(self, scores):
        # FAULT: axis=1 (heads) in every line where impl's softmax uses axis=-1 (keys).
        has_key = (scores > -np.inf).any(axis=1, keepdims=True)
        head_max = np.where(has_key, scores.max(axis=1, keepdims=True), 0)
        with np.errstate(invalid="ignore", under="ignore"):
            exp = np.exp(scores - head_max)
        total = exp.sum(axis=1, keepdims=True)
        return exp / np.where(has_key, total, 1)


MUTANT = Mutant(
    name="softmax_over_heads",
    description="softmax over the heads axis (axis=1) of the (B, Hq, Tq, Tk) scores instead of "
    "over the keys",
    models="F.softmax(scores, dim=1) carried over from 2-D (Tq, Tk) code, where axis 1 is the "
    "key axis, to 4-D (B, H, Tq, Tk) scores",
    killed_by=("test_weight_rows_sum_to_one", "test_batch_and_heads_independent"),
    steps=_SoftmaxOverHeads,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
