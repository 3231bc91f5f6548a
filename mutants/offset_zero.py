"""Mutant: an explicit ``query_start`` is ignored, the queries are treated as starting at 0.

What is broken: when ``query_start`` is given (chunked prefill, and ``cached_attention``, which
passes the cache length), the causal mask is built as a plain lower-triangular
``(Tq, Tk)`` mask, ``j <= i``, as if the first query were at absolute position 0. The range
check on ``query_start`` is impl's (out-of-range values still raise), and ``query_start=None``
still means ``Tk - Tq``, so ordinary self-attention is right.

Real-world mistake: the decode-step mask bug of the source lab (000, section 4): the cached
query at absolute position 2 is "re-treated as position zero" and given the ordinary 1x3
lower-triangular mask; its output is V0 = [1, 0], max error 1.439015. In serving code it is a
``causal_mask(q_len, kv_len)`` helper that ignores the ``past_key_values_length`` offset.
"""

from attnprops.impl import KVCache, kv_cache_bytes
from attnprops.impl.kv_cache import cached_attention as _impl_cached_attention
from attnprops.mutants import Mutant
from attnprops.mutants._common import Pipeline, rebind


class _OffsetZero(Pipeline):
    def validate(self, query, key, value, needs_value, options, fully_masked_rows="raise"):
        problem = super().validate(query, key, value, needs_value, options, fully_masked_rows)
        if options["query_start"] is None:
            return problem
        # FAULT: the offset is dropped; the mask is the position-0 lower triangle j <= i.
        options = {**options, "query_start": 0}
        return super().validate(query, key, value, needs_value, options, "zeros")


_PIPELINE = _OffsetZero()
attention = _PIPELINE.attention
attention_weights = _PIPELINE.attention_weights
cached_attention = rebind(_impl_cached_attention, attention=attention)

__all__ = ["KVCache", "attention", "attention_weights", "cached_attention", "kv_cache_bytes"]

MUTANT = Mutant(
    name="offset_zero",
    description="an explicit query_start (and the cache length in cached_attention) is ignored: "
    "the causal mask is j <= i, as if the queries started at position 0",
    models="decode step given the ordinary lower-triangular mask instead of one offset by the "
    "cache length (the source lab's section-4 bug, error 1.439015); a causal-mask helper that "
    "ignores past_key_values_length",
    killed_by=(
        "test_cached_decode_equals_full_causal",
        "test_query_chunk_equals_rows_of_full_causal",
    ),
)
