"""A key/value cache for incremental (autoregressive) decoding, and attention over it
(:class:`CachedAttention`, a mixin of :class:`impl.attention.Attention`).

The cache holds ``num_kv_heads`` heads (never repeated to the query heads), so GQA/MQA shrink
it by ``Hkv / Hq`` (Shazeer 2019; Ainslie et al. 2023). Storage is preallocated and its
capacity doubles when full, so appending ``T`` tokens one at a time costs amortized O(1)
copies per token (Cormen et al., *Introduction to Algorithms*, ch. 17, dynamic tables).
"""

from __future__ import annotations

import numpy as np

from attnprops.impl.paged_cache import PagedKVCache
from attnprops.impl.rolling_cache import RollingKVCache
from attnprops.oracle.rules import CACHED_OPTIONS
from attnprops.oracle.rules import IndependentCopy
from attnprops.oracle.rules import cached_call
from attnprops.oracle.rules import check_cache_append
from attnprops.oracle.rules import check_cache_config
from attnprops.oracle.rules import check_cache_instance
from attnprops.oracle.rules import check_cached_query
from attnprops.oracle.rules import check_positive_int
from attnprops.oracle.rules import check_rolling_window
from attnprops.oracle.rules import kv_cache_bytes
from attnprops.oracle.rules import takes_options

__all__ = ["CachedAttention", "KVCache", "kv_cache_bytes"]


class KVCache(IndependentCopy):
    """Per-layer K/V cache of shape ``(B, Hkv, T, D)`` / ``(B, Hkv, T, Dv)``.

    Args:
        batch, num_kv_heads, head_dim: sizes (ints >= 1).
        value_dim: value head dim Dv (``None``: equal to ``head_dim``).
        dtype: float16, bfloat16, float32 or float64; appended arrays must have exactly this dtype.
        capacity: initial number of token slots (grows by doubling).

    ``len(cache)`` is the number of cached positions T. ``keys``/``values`` are read-only views
    of the first T positions (no copy). ``append`` stores copies of its arguments and is
    atomic: on any error the cache is unchanged.

    Raises:
        oracle.rules.AttentionInputError for bad sizes or dtype.
    """

    def __init__(
        self, batch, num_kv_heads, head_dim, value_dim=None, *, dtype=np.float64, capacity: int = 16
    ):
        (self.batch, self.num_kv_heads, self.head_dim, self.value_dim, self.dtype) = (
            check_cache_config(batch, num_kv_heads, head_dim, value_dim, dtype)
        )
        capacity = check_positive_int(capacity, "capacity")
        stored = self._stored_dtype()
        self._keys = np.zeros((self.batch, self.num_kv_heads, capacity, self.head_dim), stored)
        self._values = np.zeros((self.batch, self.num_kv_heads, capacity, self.value_dim), stored)
        self._length = 0

    def _stored_dtype(self) -> np.dtype:
        """The dtype the storage holds: ``dtype`` (a quantized cache: its fp8 ``storage``)."""
        return self.dtype

    def __len__(self) -> int:
        return self._length

    @property
    def capacity(self) -> int:
        """Token slots allocated (>= ``len(self)``)."""
        return self._keys.shape[2]

    def _read_only(self, buffer: np.ndarray) -> np.ndarray:
        view = buffer[:, :, : self._length]
        # as_strided(writeable=False) gives a view whose flag cannot be set back to True; it
        # reads the dtype from the array interface, which cannot name fp8 (ml_dtypes): view
        # the bytes, then the dtype again
        raw = view.view(np.uint8) if buffer.itemsize == 1 else view
        frozen = np.lib.stride_tricks.as_strided(raw, raw.shape, raw.strides, writeable=False)
        return frozen.view(buffer.dtype) if buffer.itemsize == 1 else frozen

    @property
    def keys(self) -> np.ndarray:
        """Read-only view ``(B, Hkv, T, D)`` of the cached keys (no copy)."""
        return self._read_only(self._keys)

    @property
    def values(self) -> np.ndarray:
        """Read-only view ``(B, Hkv, T, Dv)`` of the cached values (no copy)."""
        return self._read_only(self._values)

    def append(self, key, value) -> int:
        """Append ``key`` ``(B, Hkv, Tnew, D)`` and ``value`` ``(B, Hkv, Tnew, Dv)``.

        Returns the cache length before this append, i.e. the absolute position of the first
        appended token (the ``query_start`` of queries at these positions).

        Raises:
            oracle.rules.AttentionInputError (shape, dtype, non-finite); the cache is then
            unchanged.
        """
        key, value = check_cache_append(self, key, value)
        return self._write(*self._encode(key, value))

    def _encode(self, key: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """What the storage holds for validated ``key``/``value``: themselves (a quantized
        cache stores codes, :class:`impl.QuantizedKVCache`); may raise, before any write."""
        return key, value

    def _write(self, key: np.ndarray, value: np.ndarray) -> int:
        """Store encoded ``key``/``value`` after the cached positions, growing the storage
        (in its own dtype) by doubling; return the length before."""
        start, new = self._length, key.shape[2]
        if start + new > self.capacity:
            capacity = max(2 * self.capacity, start + new)
            for name in ("_keys", "_values"):
                old = getattr(self, name)
                grown = np.zeros(old.shape[:2] + (capacity,) + old.shape[3:], old.dtype)
                grown[:, :, :start] = old[:, :, :start]
                setattr(self, name, grown)
        self._keys[:, :, start : start + new] = key  # copies the caller's data
        self._values[:, :, start : start + new] = value
        self._length = start + new
        return start

    def _snapshot(self):
        return self._keys, self._values, self._length

    def _restore(self, snapshot) -> None:
        self._keys, self._values, self._length = snapshot


class CachedAttention:
    """Attention over a :class:`KVCache` (``cache_type``), as a step of
    :class:`impl.attention.Attention` (it calls ``self.attention``)."""

    cache_type: type = KVCache

    def cached_kv(self, cache: KVCache) -> tuple[np.ndarray, np.ndarray]:
        """The keys ``(B, Hkv, T, D)`` and values ``(B, Hkv, T, Dv)`` attention reads from
        ``cache`` after the append: what it shows, ``cache.keys`` / ``cache.values`` (for a
        :class:`impl.QuantizedKVCache` the dequantized ones)."""
        return cache.keys, cache.values

    @takes_options(only=CACHED_OPTIONS)
    def cached_attention(self, query, key, value, cache, *, seqs=None, **options):
        """Append ``key``/``value`` to ``cache``, then attend causally over everything cached.

        Args:
            query: ``(B, Hq, Tnew, D)``, one query per appended token.
            key: ``(B, Hkv, Tnew, D)``; value: ``(B, Hkv, Tnew, Dv)``; the cache's dtype.
            cache: a ``cache_type`` (:class:`KVCache`), a :class:`impl.RollingKVCache` or a
                :class:`impl.PagedKVCache` (then ``seqs`` names the ``B`` sequences the rows
                append to, and each attends over its own positions:
                :meth:`impl.serving.ServingAttention.paged_cached_attention`), modified in
                place (Tnew positions appended).
            attn_mask: ``None`` or a mask broadcastable to ``(B, Hq, Tnew, T_total)``; for a
                rolling cache ``T_total`` is the positions it held before the call plus
                ``Tnew`` (the keys attended, in position order).
            scale: as in :func:`impl.attention`.
            window: ``(left, right)`` over absolute positions, as in :func:`impl.attention`
                (a causal sliding window of ``left + 1`` keys), or None; required for a
                rolling cache, with ``left <= capacity``
                (:func:`oracle.rules.check_rolling_window`).
            sinks: ``(Hq,)`` sink logits as in :func:`impl.attention`, or None.
            seqs: a :class:`impl.PagedKVCache`'s sequence ids (required with one, refused
                with the other caches).

        Returns:
            ``(B, Hq, Tnew, Dv)``: causal attention with ``query_start`` = the cache length
            before the append, so query ``i`` sees positions ``0 .. start + i`` (a rolling
            cache: those of them it holds, which the window's ``left <= capacity`` makes all
            the window needs).

        Raises:
            oracle.rules.AttentionInputError; the append is rolled back and the cache is
            exactly as before the call.
        """
        if isinstance(cache, PagedKVCache) or seqs is not None:
            return self.paged_cached_attention(query, key, value, cache, seqs, **options)
        window = options["window"]
        if isinstance(cache, RollingKVCache):
            check_cached_query(query, key, cache)
            window = check_rolling_window(window, cache.capacity)
            key, value = check_cache_append(cache, key, value)
            # the held positions, then the new ones: the first new query at index `held`
            keys = np.concatenate([cache.keys, key], axis=2)
            values = np.concatenate([cache.values, value], axis=2)
            start = keys.shape[2] - key.shape[2]
        else:
            check_cache_instance(cache, self.cache_type)
            check_cached_query(query, key, cache)
        snapshot = cache._snapshot()
        appended = cache.append(key, value)
        if not isinstance(cache, RollingKVCache):
            (keys, values), start = self.cached_kv(cache), appended
        try:
            return self.attention(query, keys, values, **cached_call(options, start, window))
        except BaseException:
            cache._restore(snapshot)
            raise
