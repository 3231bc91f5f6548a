"""Mutant: the blocked path ignores ``segment_ids``; packed documents attend to each other.

What is broken: the tiled (``block_size=n``) path runs as if the row held one document, so
every query also sees the keys of the other documents packed in its row (AND the mask,
causality and the window, which it still applies). Rows that the documents alone would
leave without a key are still rejected (the rule is checked before the path runs, impl's);
the dense path, and every call without ``segment_ids``, are impl's.

Real-world mistake: a varlen argument that one kernel path silently drops, so a packed batch
attends across document boundaries on that path only (``cu_seqlens`` ignored:
HunyuanVideo PR#310, jax#23349).
"""

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _SegmentsIgnoredBlocked(impl.Attention):
    def blocked_output(self, call, compute, block_size, lse=None):
        # FAULT: the tiled path never reads the documents of the packed row.
        return super().blocked_output(call._replace(segments=None), compute, block_size, lse)


MUTANT = Mutant(
    name="segment_ids_ignored_on_blocked_path",
    description="segment_ids are ignored on the blocked path: packed documents attend to each "
    "other there",
    models="a cu_seqlens / segment-ids argument silently dropped by one kernel path "
    "(HunyuanVideo PR#310, jax#23349)",
    killed_by=("test_each_query_sees_exactly_its_keys", "test_packed_output_matches_oracle"),
    steps=_SegmentsIgnoredBlocked,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
