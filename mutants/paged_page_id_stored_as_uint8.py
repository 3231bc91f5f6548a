"""Mutant: page ids are read through an 8-bit index: page p is read as page p % 256.

What is broken: ``attention_with_kvcache`` with a block table gathers page
``block_table[b, j] & 0xFF``. Pools of up to 256 pages are exact.

Real-world mistake: a block table packed into uint8 (or a page id narrowed to a byte in a
shared-memory staging buffer), fine for every pool in the unit tests, wrong once a serving pool
holds more than 256 pages.
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _Steps(impl.Attention):
    def sequence_kv(self, call, b):
        if call.block_table is not None:
            table = np.asarray(call.block_table).copy()
            table[table >= 0] &= 0xFF  # FAULT: 8-bit page ids
            call = call._replace(block_table=table)
        return super().sequence_kv(call, b)


MUTANT = Mutant(
    name="paged_page_id_stored_as_uint8",
    description="paged attention_with_kvcache reads page id p as p % 256",
    models="a block table narrowed to uint8",
    killed_by=("test_kernel_sized_paged_batch_equals_each_sequence_alone",),
    steps=_Steps,
)
__all__ = MUTANT.export(globals())
