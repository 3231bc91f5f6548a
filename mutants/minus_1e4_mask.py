"""Mutant: hidden keys get the score ``-1e4`` instead of ``-inf``.

What is broken: masked positions (bool mask, causality and a float mask's ``-inf`` entries)
are set to the finite "dtype-safe" constant ``-10000``. In typical cases ``exp(-1e4 - max)`` is
exactly 0 and nothing shows; but a hidden key gets a NONZERO weight as soon as the visible
scores of its row are themselves below about -1e4 + 100 (a large negative float mask/bias, a
large ``scale``), and then a hidden key can even dominate. Validation is impl's.

Real-world mistake: BERT-style ``(1.0 - mask) * -10000.0`` extended attention masks (and
``torch.finfo(dtype).min`` variants) instead of ``-inf``; the 003 cheat sheet mentions "非法位置
加负无穷或 dtype 安全的极小值", and -1e4 is not small enough next to large-magnitude scores.
"""

import numpy as np

from attnprops.impl import KVCache, kv_cache_bytes
from attnprops.impl.kv_cache import cached_attention as _impl_cached_attention
from attnprops.mutants import Mutant
from attnprops.mutants._common import Pipeline, rebind


class _Minus1e4(Pipeline):
    def hide(self, scores, visible, compute):
        # FAULT: a finite "large negative" constant instead of -inf.
        return np.where(visible, scores, compute.type(-1e4))


_PIPELINE = _Minus1e4()
attention = _PIPELINE.attention
attention_weights = _PIPELINE.attention_weights
cached_attention = rebind(_impl_cached_attention, attention=attention)

__all__ = ["KVCache", "attention", "attention_weights", "cached_attention", "kv_cache_bytes"]

MUTANT = Mutant(
    name="minus_1e4_mask",
    description="hidden keys get score -1e4 instead of -inf: nonzero weight when visible scores "
    "are very negative",
    models="BERT-style additive mask (1 - mask) * -10000.0 / 'dtype-safe minimum' instead of -inf",
    killed_by=("test_hidden_keys_get_zero_weight", "test_row_constant_shift_invariance"),
)
