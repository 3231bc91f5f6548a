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

from attnprops import impl
from attnprops.mutants import Mutant


class _OffsetZero(impl.Attention):
    def validate(self, query, key, value, options, **checks):
        call = super().validate(query, key, value, options, **checks)
        if options["query_start"] is None:
            return call
        # FAULT: the offset is dropped; the mask is the position-0 lower triangle j <= i.
        return super().validate(query, key, value, {**options, "query_start": 0}, **checks)


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
    steps=_OffsetZero,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
