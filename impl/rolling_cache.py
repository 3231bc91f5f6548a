"""A rolling (sliding-window) KV cache: ``capacity`` slots that keep the last ``capacity``
positions, position ``t`` in slot ``t % capacity`` (Mistral's rolling buffer, Jiang et al. 2023,
"Mistral 7B"; the rule is :mod:`oracle.rules.serving`).

Positions stay absolute after the buffer wraps: ``len(cache)`` counts every appended position,
:attr:`RollingKVCache.positions` are the absolute positions held, and :attr:`keys` /
:attr:`values` are in position order (the ring unrolled), so attention over them sees the
distances it would see over the whole sequence.
"""

from __future__ import annotations

import numpy as np

from attnprops.oracle.rules import IndependentCopy
from attnprops.oracle.rules import check_cache_append
from attnprops.oracle.rules import check_cache_config
from attnprops.oracle.rules import check_positive_int

__all__ = ["RollingKVCache"]


class RollingKVCache(IndependentCopy):
    """Per-layer ring of ``capacity`` positions, ``(B, Hkv, capacity, D)`` / ``(..., Dv)``.

    Args:
        batch, num_kv_heads, head_dim: sizes (ints >= 1).
        value_dim: value head dim Dv (``None``: equal to ``head_dim``).
        capacity: positions kept (int >= 1); serves ``window=(left, 0)`` with ``left <=
            capacity`` (:func:`oracle.rules.check_rolling_window`).
        dtype: float16, bfloat16, float32 or float64; appended arrays must have exactly this dtype.

    ``append`` stores copies and is atomic: on any error the cache is unchanged.

    Raises:
        oracle.rules.AttentionInputError for bad sizes or dtype.
    """

    def __init__(
        self, batch, num_kv_heads, head_dim, value_dim=None, *, capacity, dtype=np.float64
    ):
        (self.batch, self.num_kv_heads, self.head_dim, self.value_dim, self.dtype) = (
            check_cache_config(batch, num_kv_heads, head_dim, value_dim, dtype)
        )
        self.capacity = check_positive_int(capacity, "capacity")
        ring = (self.batch, self.num_kv_heads, self.capacity)
        self._keys = np.zeros(ring + (self.head_dim,), self.dtype)
        self._values = np.zeros(ring + (self.value_dim,), self.dtype)
        self._length = 0

    def __len__(self) -> int:
        """Positions appended so far (absolute; may exceed ``capacity``)."""
        return self._length

    @property
    def positions(self) -> np.ndarray:
        """int64 ``(min(len, capacity),)``: the absolute positions held, ascending."""
        return np.arange(max(0, self._length - self.capacity), self._length, dtype=np.int64)

    def slots(self) -> np.ndarray:
        """The ring slot of each of :attr:`positions` (``position % capacity``)."""
        return self.slot_of(self.positions)

    def slot_of(self, positions: np.ndarray) -> np.ndarray:
        """The ring slot of absolute ``positions`` (int64 array): ``position % capacity``."""
        return positions % self.capacity

    def _unrolled(self, ring: np.ndarray) -> np.ndarray:
        held = ring[:, :, self.slots()]  # a fancy index: a copy, in position order
        held.flags.writeable = False
        return held

    @property
    def keys(self) -> np.ndarray:
        """Read-only ``(B, Hkv, n, D)`` copy of the held keys in position order."""
        return self._unrolled(self._keys)

    @property
    def values(self) -> np.ndarray:
        """Read-only ``(B, Hkv, n, Dv)`` copy of the held values in position order."""
        return self._unrolled(self._values)

    def append(self, key, value) -> int:
        """Append ``key`` ``(B, Hkv, Tnew, D)`` and ``value`` ``(B, Hkv, Tnew, Dv)``; of the new
        positions only the last ``capacity`` are kept. Returns the absolute position of the
        first appended token (the length before the append).

        Raises:
            oracle.rules.AttentionInputError (shape, dtype, non-finite); the cache is then
            unchanged.
        """
        key, value = check_cache_append(self, key, value)
        start, new = self._length, key.shape[2]
        kept = min(new, self.capacity)
        slots = self.slot_of(np.arange(start + new - kept, start + new))
        self._keys[:, :, slots] = key[:, :, new - kept :]
        self._values[:, :, slots] = value[:, :, new - kept :]
        self._length = start + new
        return start

    def _snapshot(self):
        return self._keys.copy(), self._values.copy(), self._length

    def _restore(self, snapshot) -> None:
        self._keys, self._values, self._length = snapshot
