"""Mutant: the query side's and the key side's document ids are each renumbered on their own.

What is broken: before comparing documents, each row of the query ids and each row of the key
ids is renumbered ``0, 1, 2, ...`` by value on its own side (a dense rank, ``np.unique(...,
return_inverse=True)``). That is harmless when both sides hold the same documents. It is
wrong when a document with keys has no query in the call and an id below some query's (a
document of length zero on the query side: a decode step or a chunk of a packed batch, where
the earlier documents have keys but no new token): the later queries' ranks shift down past
it, and each reads the keys of another document (the one before its own when the ids are
consecutive). A missing document above every query's id changes nothing. Calls without
``segment_ids`` are impl's.

Real-world mistake: a varlen kernel that rebuilds ``cu_seqlens_q`` from the query ids by
dropping the sequences without a new token while ``cu_seqlens_k`` keeps them, so sequence
``b`` of the queries is matched with sequence ``b`` of a different list (a batch where some
sequences have zero query tokens: vLLM's mixed prefill/decode batches, jax#23349's
``cu_seqlens`` ignored).
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


def _dense_rank(ids: np.ndarray) -> np.ndarray:
    """Each row's ids renumbered 0, 1, ... by value (``(rows, T)`` -> same shape)."""
    return np.stack([np.unique(row, return_inverse=True)[1].reshape(row.shape) for row in ids])


class _RenumberedPerSide(impl.Attention):
    def segment_hidden(self, call, rows, keys):
        if call.segments is not None:
            query, key = call.segments
            # FAULT: each side compacted on its own; a document missing on one side shifts it
            call = call._replace(segments=(_dense_rank(query), _dense_rank(key)))
        return super().segment_hidden(call, rows, keys)


MUTANT = Mutant(
    name="documents_renumbered_per_side",
    description="segment_ids: query and key ids each renumbered 0, 1, ... on their own side, "
    "so a document without a query shifts the queries' documents by one",
    models="cu_seqlens_q rebuilt without the sequences that have no new token while "
    "cu_seqlens_k keeps them (a zero-length query sequence in a mixed batch)",
    killed_by=("test_packed_output_matches_oracle", "test_each_query_sees_exactly_its_keys"),
    steps=_RenumberedPerSide,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
