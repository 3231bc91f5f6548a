"""The Hugging Face subjects' KV caches: a transformers ``DynamicCache`` (one layer) behind
this project's cache API (:class:`KVCache`), and its sliding-window layer behind the
rolling-cache API (:class:`RollingKVCache`). :meth:`_hf_attention.HFAttention.cached_attention`
runs a model's forward step through them."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import torch
from transformers import PreTrainedConfig
from transformers.cache_utils import DynamicCache

from attnprops.oracle.rules import check_cache_append
from attnprops.oracle.rules import check_cache_config
from attnprops.oracle.rules import check_positive_int
from attnprops.oracle.rules import check_rolling_window
from attnprops.properties.subjects._torch_masks import to_numpy
from attnprops.properties.subjects._torch_masks import to_tensor
from attnprops.properties.subjects._torch_masks import torch_dtype

__all__ = ["KVCache", "RollingKVCache"]


class KVCache:
    """A transformers ``DynamicCache`` (one layer) behind this project's cache API.

    Args:
        batch, num_kv_heads, head_dim: sizes (ints >= 1).
        value_dim: ``Dv`` (``None``: ``head_dim``).
        dtype: bfloat16, float16, float32 or float64 (NumPy dtype).

    ``keys``/``values`` are read-only NumPy copies of layer 0's tensors ``(B, Hkv, T, D)`` /
    ``(B, Hkv, T, Dv)`` (``DynamicLayer.update`` concatenates, so each step makes new
    tensors). Holds ``Hkv`` heads, never ``Hq`` (``repeat_kv`` runs inside the attention
    function).

    Raises:
        oracle.rules.AttentionInputError (a ValueError) for bad sizes or dtypes (the
        rulebook's check_cache_config: transformers has no cache rules).
    """

    def __init__(self, batch, num_kv_heads, head_dim, value_dim=None, *, dtype=np.float64):
        self.batch, self.num_kv_heads, self.head_dim, self.value_dim, self.dtype = (
            check_cache_config(batch, num_kv_heads, head_dim, value_dim, dtype)
        )
        torch_dtype(self.dtype)  # TypeError for a dtype torch does not have
        self.dynamic = DynamicCache()

    def __len__(self) -> int:
        return self.dynamic.get_seq_length(0)

    def _read(self, name: str, width: int) -> np.ndarray:
        if len(self) == 0:
            shape = (self.batch, self.num_kv_heads, 0, width)
            array = np.empty(shape, dtype=self.dtype)
        else:
            array = to_numpy(getattr(self.dynamic.layers[0], name))
        array.flags.writeable = False
        return array

    @property
    def keys(self) -> np.ndarray:
        """Read-only ``(B, Hkv, T, D)`` copy of the cached keys."""
        return self._read("keys", self.head_dim)

    @property
    def values(self) -> np.ndarray:
        """Read-only ``(B, Hkv, T, Dv)`` copy of the cached values."""
        return self._read("values", self.value_dim)

    def append(self, key, value) -> int:
        """``cache.update(key, value, 0)``: append ``key`` ``(B, Hkv, Tnew, D)`` and ``value``
        ``(B, Hkv, Tnew, Dv)``; returns the length before the append.

        Raises:
            oracle.rules.AttentionInputError (a ValueError: shape, dtype, NaN or infinity,
            the rulebook's check_cache_append); the cache is then unchanged.
        """
        key, value = check_cache_append(self, key, value)
        start = len(self)
        self.dynamic.update(to_tensor(key), to_tensor(value), 0)
        return start

    def held(self, sliding_window) -> int:
        """The positions a forward step attends besides its new ones: all of them, ``len``
        (a rolling cache: the ones it holds, once it has checked that they serve the
        window)."""
        return len(self)

    @contextmanager
    def updated(self, key: torch.Tensor, value: torch.Tensor):
        """``DynamicCache.update(key, value, 0)`` within a forward step: gives the layer's
        whole keys and values; when the update or the step's body raises, the layers get
        their states back (``update`` replaces tensors; ``DynamicSlidingWindowLayer.crop``
        cannot roll back past the window), so the cache is as before."""
        dynamic = self.dynamic
        saved = [dict(layer.__dict__) for layer in dynamic.layers]
        try:
            yield dynamic.update(key, value, 0)
        except BaseException:
            del dynamic.layers[len(saved) :]
            for layer, state in zip(dynamic.layers, saved):
                layer.__dict__.clear()
                layer.__dict__.update(state)
            raise


class RollingKVCache(KVCache):
    """A transformers ``DynamicCache`` whose one layer is a ``DynamicSlidingWindowLayer``
    (what ``DynamicCache(config=...)`` builds for a ``"sliding_attention"`` layer: Mistral's
    and Gemma's local layers), behind this project's rolling-cache API.

    Args:
        batch, num_kv_heads, head_dim, value_dim, dtype: as :class:`KVCache`.
        capacity: positions kept between steps (int >= 1). The layer's ``sliding_window`` is
            ``capacity + 1``: ``DynamicSlidingWindowLayer.update`` keeps the last
            ``sliding_window - 1`` tokens and returns them with the new ones, and
            ``get_mask_sizes`` gives the mask ``kv_offset = seen - sliding_window + 1``. So it
            serves Hugging Face's ``sliding_window=W`` with ``W <= capacity + 1``, this
            project's ``window=(left, 0)`` with ``left <= capacity``.

    ``len`` is the layer's ``cumulative_length`` (every position appended); ``keys`` /
    ``values`` ``(B, Hkv, min(len, capacity), D)`` are the positions :attr:`positions` held.

    Raises:
        oracle.rules.AttentionInputError (a ValueError) for bad sizes, dtypes or capacity.
    """

    def __init__(
        self, batch, num_kv_heads, head_dim, value_dim=None, *, capacity, dtype=np.float64
    ):
        super().__init__(batch, num_kv_heads, head_dim, value_dim, dtype=dtype)
        self.capacity = check_positive_int(capacity, "capacity")
        config = PreTrainedConfig(
            sliding_window=self.capacity + 1, layer_types=["sliding_attention"], num_hidden_layers=1
        )
        self.dynamic = DynamicCache(config=config)

    @property
    def positions(self) -> np.ndarray:
        """int64 ``(min(len, capacity),)``: the absolute positions held, ascending."""
        return np.arange(max(0, len(self) - self.capacity), len(self), dtype=np.int64)

    def held(self, sliding_window) -> int:
        """The positions held, after checking that they serve Hugging Face's
        ``sliding_window=W`` (``window=(W - 1, 0)``; None: no window), the rulebook's serving
        rule (:func:`oracle.rules.check_rolling_window`: ``W - 1 <= capacity``)."""
        width = (
            None if sliding_window is None else check_positive_int(sliding_window, "sliding_window")
        )
        check_rolling_window(None if width is None else (width - 1, 0), self.capacity)
        return len(self.positions)
