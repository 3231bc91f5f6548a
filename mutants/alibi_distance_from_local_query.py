"""Mutant: ALiBi measures the distance from the query's index in the call, not its position.

What is broken: the bias is ``-slope * |i - j|`` with ``i`` the local query index, ignoring
``query_start``: right when the queries start at position 0 (``Tq == Tk`` with
``query_start=None``, or an explicit 0), wrong for a decode step, a chunked prefill or any
``Tq < Tk`` call, where the last query (at ``Tk - 1``) is biased towards the first keys.
Calls without ``alibi_slopes`` are impl's.

Real-world mistake: an ALiBi bias built from ``arange(q_len)`` against ``arange(kv_len)`` with
no cache offset, the decode-step version of the causal-mask offset bug; it also equals
BLOOM's key-only ``slope * j`` form only when every key is causally behind the query.
"""

from attnprops import impl
from attnprops.mutants import Mutant
from attnprops.oracle.rules import alibi_bias

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _AlibiFromLocalQuery(impl.Attention):
    def alibi_block(self, call, rows, keys, compute):
        # FAULT: positions 0 .. Tq - 1 for the queries, whatever query_start is.
        return alibi_bias(call.alibi, 0, rows, keys, compute)


MUTANT = Mutant(
    name="alibi_distance_from_local_query",
    description="ALiBi uses the local query index i instead of the position query_start + i",
    models="an ALiBi bias from arange(q_len) against arange(kv_len) with no cache offset "
    "(wrong at decode and in chunked prefill)",
    killed_by=("test_alibi_output_matches_oracle", "test_alibi_equals_its_explicit_float_mask"),
    steps=_AlibiFromLocalQuery,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
