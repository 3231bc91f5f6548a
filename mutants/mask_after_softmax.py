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

from attnprops.impl import KVCache, kv_cache_bytes
from attnprops.impl.kv_cache import cached_attention as _impl_cached_attention
from attnprops.mutants import Mutant
from attnprops.mutants._common import Pipeline, rebind


class _MaskAfterSoftmax(Pipeline):
    def probabilities(self, scores, visible, compute):
        everything = np.ones_like(visible)
        # FAULT: softmax over all keys, then zero the hidden ones (no renormalization).
        with np.errstate(invalid="ignore", over="ignore"):
            return self.softmax(scores, everything) * visible


_PIPELINE = _MaskAfterSoftmax()
attention = _PIPELINE.attention
attention_weights = _PIPELINE.attention_weights
cached_attention = rebind(_impl_cached_attention, attention=attention)

__all__ = ["KVCache", "attention", "attention_weights", "cached_attention", "kv_cache_bytes"]

MUTANT = Mutant(
    name="mask_after_softmax",
    description="softmax over all keys, then hidden weights multiplied by 0 without "
    "renormalization: rows sum to < 1",
    models="`softmax(scores) * mask` (masking by multiplication after the softmax); 003 fault "
    "table: row sums != 1 -> is the mask applied before the softmax?",
    killed_by=("test_weight_rows_sum_to_one", "test_hidden_keys_do_not_change_output"),
)
