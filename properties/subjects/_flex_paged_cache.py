"""The FlexAttention subject's paged KV cache: a page pool kept by FlexAttention's
``PagedAttention`` behind the API of :class:`impl.PagedKVCache`
(:mod:`torch_flex_attention`'s ``cached_attention`` attends over it)."""

from __future__ import annotations

import numpy as np
import torch
from torch.nn.attention.experimental._paged_attention import PagedAttention

from attnprops.properties.subjects._torch_masks import to_numpy
from attnprops.properties.subjects._torch_masks import to_tensor
from attnprops.properties.subjects._torch_masks import torch_dtype

__all__ = ["SEQUENCE_SLOTS", "PagedKVCache"]

SEQUENCE_SLOTS = 16  # PagedAttention's max_batch_size: the live sequences a cache can hold


class PagedKVCache:
    """A page pool kept by FlexAttention's ``PagedAttention`` (``reserve`` takes pages for a
    batch slot, ``assign`` writes K/V through its page table, ``erase`` frees a slot), in the
    API of :class:`impl.PagedKVCache`. Each sequence is one of :data:`SEQUENCE_SLOTS` batch slots
    (the smallest free one, as impl's ids); the
    physical cache is ``(1, Hkv, P * S, D)``. The adapter keeps only what ``PagedAttention``
    does not: each sequence's length, and the check that an append fits the pool before any
    ``reserve`` (``reserve`` raises ``AssertionError`` per slot, after earlier slots grew)."""

    def __init__(
        self, num_pages, page_size, num_kv_heads, head_dim, value_dim=None, *, dtype=np.float64
    ):
        self.num_pages, self.page_size, self.num_kv_heads = num_pages, page_size, num_kv_heads
        self.head_dim, self.value_dim = head_dim, head_dim if value_dim is None else value_dim
        self.dtype = np.dtype(dtype)
        self._paged = PagedAttention(num_pages, page_size, SEQUENCE_SLOTS, device="cpu")
        tdtype = torch_dtype(self.dtype)
        self._k = torch.zeros(1, num_kv_heads, num_pages * page_size, head_dim, dtype=tdtype)
        self._v = torch.zeros(1, num_kv_heads, num_pages * page_size, self.value_dim, dtype=tdtype)
        self._lengths: dict[int, int] = {}

    free_pages = property(lambda self: len(self._paged.empty_pages))
    sequences = property(lambda self: tuple(sorted(self._lengths)))

    def _pool(self, cache) -> np.ndarray:
        H, last = cache.shape[1], cache.shape[3]
        pool = cache[0].reshape(H, self.num_pages, self.page_size, last).permute(1, 0, 2, 3)
        out = to_numpy(pool)
        out.flags.writeable = False
        return out

    key_pages = property(lambda self: self._pool(self._k))
    value_pages = property(lambda self: self._pool(self._v))

    def _ids(self, seqs) -> list[int]:
        ids = [int(seqs)] if np.ndim(seqs) == 0 else [int(s) for s in seqs]
        if not ids or len(set(ids)) != len(ids) or any(s not in self._lengths for s in ids):
            raise ValueError(f"seqs: {seqs!r} must name distinct live sequences")
        return ids

    def add_sequence(self) -> int:
        seq = min(set(range(SEQUENCE_SLOTS + 1)) - set(self._lengths))
        if seq >= SEQUENCE_SLOTS:
            raise ValueError(f"add_sequence: all {SEQUENCE_SLOTS} batch slots are in use")
        self._lengths[seq] = 0
        return seq

    def free(self, seq) -> None:
        (seq,) = self._ids([seq])
        self._paged.erase(torch.tensor([seq]))
        del self._lengths[seq]

    def seqlens(self, seqs) -> np.ndarray:
        return np.array([self._lengths[s] for s in self._ids(seqs)], dtype=np.int64)

    def block_table(self, seqs) -> np.ndarray:
        ids = self._ids(seqs)
        owned = [-(-self._lengths[s] // self.page_size) for s in ids]
        table = self._paged.page_table[torch.tensor(ids), : max(1, *owned)].numpy().copy()
        return table

    def append(self, seqs, key, value) -> np.ndarray:
        ids = self._ids(seqs)
        key, value = np.asarray(key), np.asarray(value)
        new = key.shape[2]
        starts = np.array([self._lengths[s] for s in ids], dtype=np.int64)
        size = self.page_size
        wanted = sum(-(-(n + new) // size) - -(-n // size) for n in starts.tolist())
        if wanted > self.free_pages:
            raise ValueError(
                f"key: the append needs {wanted} new pages; the pool has {self.free_pages}"
            )
        batch = torch.tensor(ids)
        for seq, n in zip(ids, starts.tolist()):
            self._paged.reserve(torch.tensor(seq), torch.tensor(n + new))
        positions = torch.as_tensor(starts[:, None] + np.arange(new)[None, :])
        self._paged.assign(batch, positions, to_tensor(key), to_tensor(value), self._k, self._v)
        for seq, n in zip(ids, starts.tolist()):
            self._lengths[seq] = n + new
        return starts
