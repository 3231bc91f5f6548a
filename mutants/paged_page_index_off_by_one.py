"""Mutant: the paged cache writes the first position of each new page into the page before.

What is broken: ``PagedKVCache.write`` finds the page of position ``t`` as ``(t - 1) // S``
instead of ``t // S`` when ``t`` starts a page (``t % S == 0``, ``t > 0``): that position
overwrites slot 0 of the previous page, and its own page's slot 0 keeps whatever it held.
Sequences that never cross a page boundary are exact.

Real-world mistake: a page index computed from the last *filled* position instead of the next
one (``(seq_len - 1) // block_size`` where the new token's index is ``seq_len``), the
off-by-one at page boundaries that paged-attention kernels are tested for.
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant


class PagedKVCache(impl.PagedKVCache):
    """impl's paged cache with the page of a page-starting position one too low."""

    def write(self, seq, start, key, value):
        positions = np.arange(start, start + key.shape[1])
        starts_page = (positions % self.page_size == 0) & (positions > 0)
        index = np.where(starts_page, positions - 1, positions) // self.page_size  # FAULT
        pages = np.asarray(self._pages[seq])[index]
        slots = positions % self.page_size
        self._keys[pages, :, slots] = key.transpose(1, 0, 2)
        self._values[pages, :, slots] = value.transpose(1, 0, 2)


MUTANT = Mutant(
    name="paged_page_index_off_by_one",
    description="PagedKVCache writes each page's first position into the previous page (page "
    "index (t - 1) // S at a page boundary)",
    models="a page index taken from the last filled position instead of the new one, seen only "
    "when a sequence crosses a page boundary",
    killed_by=("test_paged_cache_run_equals_contiguous_decoding",),
    paged_cache=PagedKVCache,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
