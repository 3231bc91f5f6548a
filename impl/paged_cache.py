"""A paged KV cache: a pool of fixed-size pages shared by many sequences, each addressed by its
row of a block table (Kwon et al. 2023, "Efficient Memory Management for Large Language Model
Serving with PagedAttention"; the layout of :mod:`oracle.rules.serving`).

A sequence takes a page from the pool when its last page is full and gives all its pages back
when freed; nothing else ever moves. Freed pages keep their old contents: they are never read,
because every read stops at the sequence's length, and a new owner's length starts at 0.
"""

from __future__ import annotations

import numpy as np

from attnprops.oracle.rules import IndependentCopy
from attnprops.oracle.rules import check_cache_append
from attnprops.oracle.rules import check_cache_config
from attnprops.oracle.rules import check_free_pages
from attnprops.oracle.rules import check_positive_int
from attnprops.oracle.rules import check_sequence_id
from attnprops.oracle.rules import check_sequence_ids
from attnprops.oracle.rules import pages_needed

__all__ = ["PagedKVCache"]


class _Batch:
    """What :func:`oracle.rules.check_cache_append` reads of a cache, for ``batch`` rows."""

    def __init__(self, cache, batch):
        self.batch, self.num_kv_heads = batch, cache.num_kv_heads
        self.head_dim, self.value_dim, self.dtype = cache.head_dim, cache.value_dim, cache.dtype


class PagedKVCache(IndependentCopy):
    """A pool of ``num_pages`` pages of ``page_size`` positions and the sequences living in it.

    Args:
        num_pages, page_size, num_kv_heads, head_dim: sizes (ints >= 1).
        value_dim: value head dim Dv (``None``: equal to ``head_dim``).
        dtype: float16, bfloat16, float32 or float64; appended arrays must have exactly this dtype.

    ``key_pages`` ``(P, Hkv, S, D)`` and ``value_pages`` ``(P, Hkv, S, Dv)`` are read-only
    views of the pool; ``block_table(seqs)`` ``(B, M)`` and ``seqlens(seqs)`` ``(B,)`` address
    it, ready for :func:`impl.attention_with_kvcache`. Sequence ids are small ints handed out by
    :meth:`add_sequence` (the smallest id not in use) and reused after :meth:`free`.

    Raises:
        oracle.rules.AttentionInputError for bad sizes or dtype.
    """

    def __init__(
        self, num_pages, page_size, num_kv_heads, head_dim, value_dim=None, *, dtype=np.float64
    ):
        self.num_pages = check_positive_int(num_pages, "num_pages")
        self.page_size = check_positive_int(page_size, "page_size")
        (_, self.num_kv_heads, self.head_dim, self.value_dim, self.dtype) = check_cache_config(
            1, num_kv_heads, head_dim, value_dim, dtype
        )
        shape = (self.num_pages, self.num_kv_heads, self.page_size)
        self._keys = np.zeros(shape + (self.head_dim,), self.dtype)
        self._values = np.zeros(shape + (self.value_dim,), self.dtype)
        self._free = list(range(self.num_pages))  # taken from the front, given back to it
        self._pages: dict[int, list[int]] = {}
        self._lengths: dict[int, int] = {}

    # -- the pool ---------------------------------------------------------------------------
    @property
    def free_pages(self) -> int:
        """Pages not owned by any sequence."""
        return len(self._free)

    @property
    def sequences(self) -> tuple[int, ...]:
        """The live sequence ids, ascending."""
        return tuple(sorted(self._lengths))

    def _read_only(self, pool: np.ndarray) -> np.ndarray:
        return np.lib.stride_tricks.as_strided(pool, pool.shape, pool.strides, writeable=False)

    @property
    def key_pages(self) -> np.ndarray:
        """Read-only view ``(P, Hkv, S, D)`` of the key pool (no copy)."""
        return self._read_only(self._keys)

    @property
    def value_pages(self) -> np.ndarray:
        """Read-only view ``(P, Hkv, S, Dv)`` of the value pool (no copy)."""
        return self._read_only(self._values)

    # -- sequences --------------------------------------------------------------------------
    def add_sequence(self) -> int:
        """A new, empty sequence (it owns no page yet); returns its id."""
        seq = next(i for i in range(len(self._lengths) + 1) if i not in self._lengths)
        self._pages[seq], self._lengths[seq] = [], 0
        return seq

    def _live(self, seqs) -> list[int]:
        return check_sequence_ids(seqs, self._lengths)

    def free(self, seq) -> None:
        """Give sequence ``seq``'s pages back to the pool and forget it (its id may be reused).
        Raises :class:`oracle.rules.PagedCacheError` for an id that is not live."""
        seq = check_sequence_id(seq, self._lengths)
        self._free[:0] = self._pages.pop(seq)  # the next owner takes them first, in order
        del self._lengths[seq]

    def seqlens(self, seqs) -> np.ndarray:
        """``(B,)`` int64: the cached length of each of ``seqs``."""
        return np.array([self._lengths[s] for s in self._live(seqs)], dtype=np.int64)

    def block_table(self, seqs) -> np.ndarray:
        """``(B, M)`` int64, ``M`` = the most pages any of ``seqs`` owns (at least 1): row
        ``b`` lists sequence ``seqs[b]``'s pages in position order, then ``-1``."""
        ids = self._live(seqs)
        width = max(1, *(len(self._pages[s]) for s in ids))
        table = np.full((len(ids), width), -1, dtype=np.int64)
        for row, seq in enumerate(ids):
            table[row, : len(self._pages[seq])] = self._pages[seq]
        return table

    def append(self, seqs, key, value) -> np.ndarray:
        """Append ``key`` ``(B, Hkv, Tnew, D)`` and ``value`` ``(B, Hkv, Tnew, Dv)``, row ``b``
        to sequence ``seqs[b]`` (``seqs``: ``B`` distinct live ids).

        Returns ``(B,)`` int64: each sequence's length before the append (the absolute position
        of its first appended token).

        Raises:
            oracle.rules.AttentionInputError (shape, dtype, non-finite) or
            oracle.rules.PagedCacheError (an unknown id, or fewer free pages than the append
            needs); the cache is then unchanged.
        """
        ids = self._live(seqs)
        key, value = check_cache_append(_Batch(self, len(ids)), key, value)
        new = key.shape[2]
        starts = np.array([self._lengths[s] for s in ids], dtype=np.int64)
        wanted = [
            pages_needed(start + new, self.page_size) - len(self._pages[s])
            for s, start in zip(ids, starts.tolist())
        ]
        check_free_pages(sum(wanted), len(self._free), self.num_pages, self.page_size, new, ids)
        for row, (seq, more) in enumerate(zip(ids, wanted)):
            self._pages[seq] += [self._free.pop(0) for _ in range(more)]
            self.write(seq, int(starts[row]), key[row], value[row])
            self._lengths[seq] = int(starts[row]) + new
        return starts

    def _snapshot(self, seqs, new: int):
        """What an append of ``new`` positions to ``seqs`` can change: the bookkeeping, and
        copies of the pages it can write (each sequence's last page, and as many free pages
        as the pool has in the order it hands them out); O(pages written), not O(pool)."""
        ids = self._live(seqs)
        wanted = sum(pages_needed(self._lengths[s] + new, self.page_size) for s in ids)
        touched = [self._pages[s][-1] for s in ids if self._pages[s]] + self._free[:wanted]
        pages = {p: (self._keys[p].copy(), self._values[p].copy()) for p in touched}
        owned = {s: list(p) for s, p in self._pages.items()}
        return list(self._free), owned, dict(self._lengths), pages

    def _restore(self, snapshot) -> None:
        self._free, self._pages, self._lengths, pages = snapshot
        for page, (keys, values) in pages.items():
            self._keys[page], self._values[page] = keys, values

    def write(self, seq: int, start: int, key: np.ndarray, value: np.ndarray) -> None:
        """Store ``key`` ``(Hkv, Tnew, D)`` / ``value`` at positions ``start ..`` of ``seq``
        (whose pages are already taken): position ``t`` in page ``pages[t // S]``, slot
        ``t % S``."""
        positions = np.arange(start, start + key.shape[1])
        pages = np.asarray(self._pages[seq])[positions // self.page_size]
        slots = positions % self.page_size
        # pool[pages, :, slots] is (Tnew, Hkv, D): the advanced indices' axis comes first
        self._keys[pages, :, slots] = key.transpose(1, 0, 2)
        self._values[pages, :, slots] = value.transpose(1, 0, 2)
