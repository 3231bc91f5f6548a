"""A KV cache that stores fp8 codes with float32 scales and dequantizes on read (vLLM's
``kv_cache_dtype="fp8"``; the rules are :mod:`oracle.rules.quantization`).

It is a :class:`impl.KVCache` whose storage holds ``fp8(x / s)`` instead of ``x``: appending
quantizes, :attr:`QuantizedKVCache.keys` / :attr:`values` are the dequantized ``dtype(c * s)``,
and :meth:`impl.Attention.cached_attention` attends over those, unchanged. One byte per
element instead of two (bfloat16) or four (float32): ``kv_cache_bytes(dtype="float8_e4m3fn")``
counts it; the ``2 * Hkv`` float32 scales are not counted.
"""

from __future__ import annotations

import numpy as np

from attnprops.impl.kv_cache import KVCache
from attnprops.oracle.rules import QuantizedStorage
from attnprops.oracle.rules import quantize

__all__ = ["QuantizedKVCache"]


class QuantizedKVCache(QuantizedStorage, KVCache):
    """Per-layer fp8 K/V cache: codes ``(B, Hkv, T, D)`` / ``(B, Hkv, T, Dv)`` and scales.

    Args:
        batch, num_kv_heads, head_dim, value_dim, capacity: as :class:`impl.KVCache`.
        dtype: the dtype appended and read back (float16, bfloat16, float32 or float64).
        storage: ``"float8_e4m3fn"`` (default) or ``"float8_e5m2"``.
        key_scale, value_scale: one scale per tensor (a real number) or per K/V head
            (``(num_kv_heads,)``), finite and > 0, held as float32 (default 1.0, as vLLM's).

    ``append`` validates like :class:`impl.KVCache` and also refuses a value outside the fp8
    range at its scale (``|x| > fp8_max * s``), atomically: on any error nothing is stored.

    Raises:
        oracle.rules.AttentionInputError for bad sizes or dtype;
        oracle.rules.QuantizationError for a storage that is not fp8 or a bad scale.
    """

    def _stored_dtype(self) -> np.dtype:
        return self.storage

    @property
    def key_codes(self) -> np.ndarray:
        """Read-only view ``(B, Hkv, T, D)`` of the stored fp8 key codes."""
        return self._read_only(self._keys)

    @property
    def value_codes(self) -> np.ndarray:
        """Read-only view ``(B, Hkv, T, Dv)`` of the stored fp8 value codes."""
        return self._read_only(self._values)

    def _encode(self, key: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (
            quantize(key, self.key_scale, self.storage, "key"),
            quantize(value, self.value_scale, self.storage, "value"),
        )
