"""A K/V cache that grows by concatenation, for the adapters whose library has none (torch
SDPA, JAX, the ONNX op), and the rollback their ``cached_attention`` shares.

:class:`ConcatKVCache` holds the keys ``(B, Hkv, T, D)`` and values ``(B, Hkv, T, Dv)`` as the
library's arrays; a subclass names that array type's three operations (:meth:`~ConcatKVCache._empty`,
:meth:`~ConcatKVCache._concat`, :meth:`~ConcatKVCache._view`). The cache rules are the rulebook's
(:func:`oracle.rules.check_cache_config`, :func:`oracle.rules.check_cache_append`), as impl's
cache applies them: these libraries have no cache rules of their own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from attnprops.oracle.rules import check_cache_append
from attnprops.oracle.rules import check_cache_config

__all__ = ["ConcatKVCache", "appended"]


class ConcatKVCache:
    """A per-layer K/V cache of the library's arrays, grown by concatenation.

    Args:
        batch, num_kv_heads, head_dim: sizes (ints >= 1); value_dim: ``Dv`` (``None``: D).
        dtype: a NumPy dtype the subclass's library holds; appended arrays must match it.

    ``keys``/``values`` are read-only NumPy arrays ``(B, Hkv, T, D)`` / ``(B, Hkv, T, Dv)``;
    ``append`` stores copies and is atomic (both arrays or neither). Holds ``Hkv`` heads,
    never ``Hq``.

    Raises:
        oracle.rules.AttentionInputError (a ValueError) for bad sizes or dtype, and from
        ``append`` for a shape, dtype, NaN or infinity the rulebook refuses; the cache is then
        unchanged.
    """

    def __init__(self, batch, num_kv_heads, head_dim, value_dim=None, *, dtype=np.float64):
        self.batch, self.num_kv_heads, self.head_dim, self.value_dim, self.dtype = (
            check_cache_config(batch, num_kv_heads, head_dim, value_dim, dtype)
        )
        self._keys = self._empty((self.batch, self.num_kv_heads, 0, self.head_dim))
        self._values = self._empty((self.batch, self.num_kv_heads, 0, self.value_dim))

    def _empty(self, shape: tuple[int, ...]):
        """An empty library array of ``shape`` (its length axis 0) in the cache's dtype."""
        raise NotImplementedError

    def _concat(self, past, new: np.ndarray):
        """A new library array: ``past`` then a copy of ``new`` along the length axis (2)."""
        raise NotImplementedError

    def _view(self, x) -> np.ndarray:
        """``x`` as a read-only NumPy array (a view where the library allows it)."""
        raise NotImplementedError

    def __len__(self) -> int:
        return self._keys.shape[2]

    @property
    def keys(self) -> np.ndarray:
        """Read-only ``(B, Hkv, T, D)`` NumPy array of the cached keys."""
        return self._view(self._keys)

    @property
    def values(self) -> np.ndarray:
        """Read-only ``(B, Hkv, T, Dv)`` NumPy array of the cached values."""
        return self._view(self._values)

    def append(self, key, value) -> int:
        """Append ``key`` ``(B, Hkv, Tnew, D)`` and ``value`` ``(B, Hkv, Tnew, Dv)``.

        Returns the length before the append (the absolute position of the first new token).

        Raises:
            oracle.rules.AttentionInputError (a ValueError: shape, dtype, NaN or infinity,
            checked by the rulebook's check_cache_append); the cache is then unchanged.
        """
        key, value = check_cache_append(self, key, value)
        start = len(self)
        keys, values = self._concat(self._keys, key), self._concat(self._values, value)
        self._keys, self._values = keys, values  # both or neither
        return start


@contextmanager
def appended(cache: ConcatKVCache, key, value) -> Iterator[int]:
    """Append ``key``/``value`` to ``cache`` and give the length before the append; when the
    body raises (the attention call after the append), the cache gets its attributes back
    (its arrays, and a length a subclass keeps: an append replaces arrays, never writes into
    them), so a failed ``cached_attention`` leaves it exactly as before."""
    before = dict(vars(cache))
    start = cache.append(key, value)
    try:
        yield start
    except BaseException:
        vars(cache).clear()
        vars(cache).update(before)
        raise
