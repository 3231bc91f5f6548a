"""Mutant: a freed page keeps its fill count, so its next owner writes after the old data.

What is broken: this paged cache counts the positions written into each page (``fill``) and
writes a sequence's next position at slot ``fill % S`` of its last page. ``free`` gives the
pages back but does not reset their counts: a page that was partly filled when its sequence
was freed is taken by a new sequence, whose positions then land after the old owner's, while
reads start at slot 0 and see the old owner's keys. A pool whose pages are never reused, or
reused only after being filled exactly, is exact.

Real-world mistake: per-block metadata (a fill pointer, a reference count, a "last slot")
that the free path forgets to reset: a stale-length leak of one sequence's tokens into
another's attention.
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant


class PagedKVCache(impl.PagedKVCache):
    """impl's paged cache with per-page fill counts that ``free`` does not reset."""

    def __init__(
        self, num_pages, page_size, num_kv_heads, head_dim, value_dim=None, *, dtype=np.float64
    ):
        super().__init__(num_pages, page_size, num_kv_heads, head_dim, value_dim, dtype=dtype)
        self._fill = [0] * self.num_pages

    def write(self, seq, start, key, value):
        for t in range(key.shape[1]):
            page = self._pages[seq][(start + t) // self.page_size]
            slot = self._fill[page] % self.page_size
            self._fill[page] += 1
            self._keys[page, :, slot] = key[:, t]
            self._values[page, :, slot] = value[:, t]

    # free() is impl's: FAULT, the pages go back with their fill counts


MUTANT = Mutant(
    name="paged_freed_page_keeps_its_fill",
    description="PagedKVCache keeps a per-page fill count that free() does not reset: a reused, "
    "partly filled page takes its new owner's positions after the old ones",
    models="per-block metadata the free path forgets to reset, leaking a freed sequence's "
    "tokens into the next one's attention",
    killed_by=("test_paged_cache_run_equals_contiguous_decoding",),
    paged_cache=PagedKVCache,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
