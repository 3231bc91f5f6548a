"""Mutant: a packed document also sees the last key before it, one key across the boundary.

What is broken: key ``j`` is visible to a query of document ``d`` when key ``j`` *or key
``j + 1``* is in ``d``, so the key just before each document's first key (the last token of
the previous document) leaks into it (AND the mask, causality and the window, as impl).
Calls without ``segment_ids``, and documents that start at key 0, are impl's.

Real-world mistake: document boundaries taken from cumulative lengths one off
(``cu_seqlens[d] - 1`` as a document's first token, or a ``<=`` where ``<`` belongs), so
packed sequences attend across the boundary by one token.
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _DocumentStartOffByOne(impl.Attention):
    def segment_hidden(self, call, rows, keys):
        hidden = super().segment_hidden(call, rows, keys)
        if hidden is None:
            return None
        query, key = call.segments
        # FAULT: the key before a document's first key counts as the document's.
        following = np.concatenate([key[:, 1:], key[:, -1:]], axis=1)[:, keys]
        same_next = query[:, rows][:, None, :, None] == following[:, None, None, :]
        return hidden & ~same_next


MUTANT = Mutant(
    name="document_start_sees_previous_document",
    description="segment_ids: each document also sees the last key of the document before it",
    models="document boundaries from cumulative lengths off by one (cu_seqlens[d] - 1 taken "
    "as a document's first token): packed sequences attend one token across the boundary",
    killed_by=("test_each_query_sees_exactly_its_keys", "test_packed_output_matches_oracle"),
    steps=_DocumentStartOffByOne,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
