"""Mutant: a paged append to several sequences takes pages one sequence at a time.

What is broken: ``PagedKVCache.append`` checks the pool, takes pages and writes for each
sequence in turn. When the pool runs out part-way, the error is raised as in impl, but the
sequences before it have already grown (pages taken, positions written, lengths advanced).
Appends that fit, and appends to one sequence, are exact.

Real-world mistake: a batched allocator built from a per-sequence one (``for seq in batch:
reserve(seq, n)``, as FlexAttention's ``PagedAttention.reserve`` is called) with no check of
the whole batch's demand first: a failed decode step leaves the batch half-advanced.
"""

import numpy as np

from attnprops import impl
from attnprops.impl.paged_cache import _Batch
from attnprops.mutants import Mutant
from attnprops.oracle.rules import check_cache_append
from attnprops.oracle.rules import check_free_pages
from attnprops.oracle.rules import pages_needed


class PagedKVCache(impl.PagedKVCache):
    """impl's paged cache whose append is checked and committed per sequence."""

    def append(self, seqs, key, value):
        ids = self._live(seqs)
        key, value = check_cache_append(_Batch(self, len(ids)), key, value)
        new = key.shape[2]
        starts = np.array([self._lengths[s] for s in ids], dtype=np.int64)
        for row, seq in enumerate(ids):  # FAULT: each sequence checked and committed alone
            start = int(starts[row])
            more = pages_needed(start + new, self.page_size) - len(self._pages[seq])
            check_free_pages(more, len(self._free), self.num_pages, self.page_size, new, [seq])
            self._pages[seq] += [self._free.pop(0) for _ in range(more)]
            self.write(seq, start, key[row], value[row])
            self._lengths[seq] = start + new
        return starts


MUTANT = Mutant(
    name="paged_append_not_atomic",
    description="PagedKVCache.append checks the pool and commits one sequence at a time: an "
    "append that runs out of pages part-way leaves the earlier sequences grown",
    models="a batched page allocator built from a per-sequence reserve, without checking the "
    "whole batch's demand first",
    killed_by=("test_paged_cache_run_equals_contiguous_decoding",),
    paged_cache=PagedKVCache,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
