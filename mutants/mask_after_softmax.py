"""Mutant: the mask is applied AFTER the softmax (weights zeroed, rows not renormalized).

What is broken: the softmax runs over every key, hidden ones included, and the weights of hidden
keys are then multiplied by 0. Hidden keys get weight exactly 0 (so a heat map looks right),
but each row sums to less than 1 and the hidden keys' scores still shrink the visible weights.
A float mask's ``-inf`` entries are added to the scores before the softmax as in impl, so only
bool masks and causality are affected. Validation is impl's.

Real-world mistake: ``weights = softmax(scores) * mask`` (masking by multiplication after the
softmax) in hand-written attention and "masked mean" code; the 003 fault table's second row
("行权重和不为 1 → mask 是否在 softmax 前").
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant


class _MaskAfterSoftmax(impl.Attention):
    def dense_weights(self, call, compute):
        B, Hq, Tq, Tk = call.shape
        query, key_t = self.scaled_query(call, compute), self.key_transposed(call, compute)
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            scores = np.matmul(query, key_t).reshape(B, Hq, Tq, Tk)
            if call.float_mask:
                scores = scores + call.mask.astype(compute, copy=False)
            # FAULT: softmax over all keys, then zero the hidden ones (no renormalization).
            return self.softmax(scores) * self.visible_block(call, slice(0, Tq), slice(0, Tk))


MUTANT = Mutant(
    name="mask_after_softmax",
    description="softmax over all keys, then hidden weights multiplied by 0 without "
    "renormalization: rows sum to < 1",
    models="`softmax(scores) * mask` (masking by multiplication after the softmax); 003 fault "
    "table: row sums != 1 -> is the mask applied before the softmax?",
    killed_by=("test_weight_rows_sum_to_one", "test_hidden_keys_do_not_change_output"),
    steps=_MaskAfterSoftmax,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
