"""Mutant: chunked attention counts a query's chunk from the call's first query, not from
position 0.

What is broken: with ``chunk_size=C`` the query at local index ``i`` is put in chunk ``i //
C`` instead of ``(query_start + i) // C``, while keys keep their absolute chunks. Right
whenever ``query_start`` is 0 (prefill of a whole sequence); a chunked prefill or a decode
at an offset sees the wrong chunk. Calls without ``chunk_size`` are impl's.

Real-world mistake: chunk ids built from ``arange(q_len)`` in a chunked-attention mask
(Llama 4's ``attention_chunk_size``), forgetting the cache offset that the causal part of
the same mask remembers.
"""

from attnprops import impl
from attnprops.mutants import Mutant
from attnprops.oracle.rules import chunk_visible

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _ChunksFromQueryStart(impl.Attention):
    def chunk_hidden(self, call, rows, keys):
        if call.chunk_size is None:
            return None
        # FAULT: the query's chunk from its index in the call; the keys' from position 0.
        shifted = rows.start - call.query_start, rows.stop - call.query_start
        return ~chunk_visible(call.chunk_size, call.query_start, slice(*shifted), keys)


MUTANT = Mutant(
    name="chunks_counted_from_query_start",
    description="chunk_size: a query's chunk is counted from the call's first query (i // C), "
    "not from its absolute position",
    models="a chunked-attention mask whose query chunk ids come from arange(q_len), without "
    "the cache offset (Llama 4 attention_chunk_size with a KV cache or chunked prefill)",
    killed_by=("test_each_query_sees_exactly_its_keys", "test_packed_output_matches_oracle"),
    steps=_ChunksFromQueryStart,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
