"""Mutant: a PagedKVCache block-table row holds 8 pages inline; past them it repeats the 8th.

What is broken: :meth:`impl.PagedKVCache.block_table` reports each sequence's first 8 pages
correctly and, for a sequence owning more, the 8th page again in every later column. The cache
writes positions to its real pages; attention through the table then reads pages 9.. as page
8. Sequences of up to 8 pages are exact.

Real-world mistake: a per-sequence block list kept in a fixed inline array with an overflow
list that the table export never reads (a small-vector optimisation).
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES

INLINE = 8


class _Paged(impl.PagedKVCache):
    def block_table(self, seqs):
        table = np.array(super().block_table(seqs))
        for row, seq in enumerate(self._live(seqs)):
            owned = len(self._pages[seq])
            if owned > INLINE:
                table[row, INLINE:owned] = table[row, INLINE - 1]  # FAULT
        return table


MUTANT = Mutant(
    name="paged_block_table_inline_8_pages",
    description="PagedKVCache.block_table repeats the 8th page for pages 9 and later",
    models="an inline 8-entry block list whose overflow the table export ignores",
    killed_by=("test_kernel_sized_paged_cache_run_equals_full_causal",),
    paged_cache=_Paged,
)
__all__ = MUTANT.export(globals())
