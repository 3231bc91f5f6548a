"""Mutant: a query row with no visible key returns NaN instead of raising FullyMaskedRowError.

What is broken: the fully-masked-row rule is not applied (every other input rule is), and the
softmax has no guard for empty rows: ``max`` of an all ``-inf`` row is ``-inf`` and
``-inf - -inf`` is NaN, so those rows of the weights and the output are NaN. Rows with a
visible key are exactly impl's.

Real-world mistake: the NaN of a fully padded row (left padding with a causal mask, an all-False
padding mask) in hand-written softmax attention and in PyTorch before 2.5; the source lab
(000, section 4) explains "否则减去行最大值时可能出现 -inf - -inf，继而得到 NaN" and rejects such rows.
"""

import numpy as np

from attnprops.impl import KVCache, kv_cache_bytes
from attnprops.impl.kv_cache import cached_attention as _impl_cached_attention
from attnprops.mutants import Mutant
from attnprops.mutants._common import Pipeline, rebind


class _NanOnFullyMasked(Pipeline):
    def validate(self, query, key, value, needs_value, options, fully_masked_rows="raise"):
        # FAULT (1/2): fully masked rows are not rejected ...
        return super().validate(query, key, value, needs_value, options, "zeros")

    def softmax(self, scores, visible):
        # FAULT (2/2): ... and the softmax has no empty-row guard: -inf - -inf = NaN.
        with np.errstate(invalid="ignore"):
            exp = np.exp(scores - scores.max(axis=-1, keepdims=True))
            return exp / exp.sum(axis=-1, keepdims=True)


_PIPELINE = _NanOnFullyMasked()
attention = _PIPELINE.attention
attention_weights = _PIPELINE.attention_weights
cached_attention = rebind(_impl_cached_attention, attention=attention)

__all__ = ["KVCache", "attention", "attention_weights", "cached_attention", "kv_cache_bytes"]

MUTANT = Mutant(
    name="nan_on_fully_masked",
    description="a query row with no visible key gives NaN weights/output instead of raising "
    "FullyMaskedRowError (all other rules kept)",
    models="unguarded softmax on a fully padded row (-inf - -inf = NaN), as in hand-written "
    "attention and PyTorch SDPA before 2.5; the source lab rejects such rows",
    killed_by=("test_fully_masked_rows_follow_declared_convention",),
)
