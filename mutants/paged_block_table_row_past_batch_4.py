"""Mutant: with more than 4 sequences in a paged batch, sequence b reads block-table row b % 4.

What is broken: ``attention_with_kvcache`` with a ``block_table`` and ``B > 4`` gathers
sequence ``b``'s pages from row ``b % 4`` of the table (its own length ``L_b`` still), as a
kernel launched with batch tiles of 4 that indexes the table with the tile-local row. Batches
of up to 4 sequences are exact.

Real-world mistake: a block-table pointer computed from a CTA-local batch index (or a row
stride taken from the launch tile instead of ``block_table.stride(0)``), seen only once the
scheduler batches more sequences than one tile holds.
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _Steps(impl.Attention):
    def sequence_kv(self, call, b):
        if call.block_table is not None and call.block_table.shape[0] > 4:
            table = np.asarray(call.block_table).copy()
            table[b] = call.block_table[b % 4]  # FAULT: the tile-local row
            call = call._replace(block_table=table)
        return super().sequence_kv(call, b)


MUTANT = Mutant(
    name="paged_block_table_row_past_batch_4",
    description="paged attention_with_kvcache reads block-table row b % 4 for batches above 4",
    models="a block-table row index taken from a 4-sequence launch tile",
    killed_by=(
        "test_kernel_sized_paged_batch_equals_each_sequence_alone",
        "test_kernel_sized_paged_cache_run_equals_full_causal",
    ),
    steps=_Steps,
)
__all__ = MUTANT.export(globals())
