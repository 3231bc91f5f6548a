"""The oracle's KV cache (a plain list of appended blocks) and attention over it, also over
the rolling cache of :mod:`oracle.serving`.

Same rules as every subject's cache (:mod:`oracle.rules`); attention over it is
:func:`oracle.reference.attention` (or another, ``attend``) with ``query_start`` = the length
before the append.
"""

from __future__ import annotations

import numpy as np

from attnprops.oracle.reference import OracleResult
from attnprops.oracle.reference import attention
from attnprops.oracle.rules import CACHED_OPTIONS
from attnprops.oracle.rules import IndependentCopy
from attnprops.oracle.rules import QuantizedStorage
from attnprops.oracle.rules import cached_call
from attnprops.oracle.rules import check_cache_append
from attnprops.oracle.rules import check_cache_config
from attnprops.oracle.rules import check_cache_instance
from attnprops.oracle.rules import check_cached_query
from attnprops.oracle.rules import check_positive_int
from attnprops.oracle.rules import check_rolling_window
from attnprops.oracle.rules import quantize
from attnprops.oracle.rules import takes_options

__all__ = ["KVCache", "QuantizedKVCache", "cached_attention"]


class KVCache(IndependentCopy):
    """The oracle's cache: a plain list of appended blocks, concatenated on read.

    Same constructor, ``append``, ``keys``, ``values`` and ``len`` as ``impl.KVCache`` and the
    same rules (:func:`oracle.rules.check_cache_append`); deliberately simple, not fast.
    ``capacity`` is checked as ``impl.KVCache``'s (an int >= 1, else
    :class:`~oracle.rules.AttentionInputError` naming it) and otherwise unused: a list has no
    slots to preallocate, so code written for either cache runs on both.
    """

    def __init__(
        self, batch, num_kv_heads, head_dim, value_dim=None, *, dtype=np.float64, capacity: int = 16
    ):
        (self.batch, self.num_kv_heads, self.head_dim, self.value_dim, self.dtype) = (
            check_cache_config(batch, num_kv_heads, head_dim, value_dim, dtype)
        )
        check_positive_int(capacity, "capacity")
        self._blocks: list[tuple[np.ndarray, np.ndarray]] = []

    def __len__(self) -> int:
        return sum(k.shape[2] for k, _ in self._blocks)

    def _read(self, index: int, last: int, dtype=None) -> np.ndarray:
        """The stored blocks of ``index`` (0 keys, 1 values) concatenated, read-only; empty:
        ``(B, Hkv, 0, last)`` of ``dtype`` (default the cache's)."""
        if not self._blocks:
            out = np.zeros((self.batch, self.num_kv_heads, 0, last), dtype or self.dtype)
        else:
            out = np.concatenate([block[index] for block in self._blocks], axis=2)
        out.flags.writeable = False
        return out

    @property
    def keys(self) -> np.ndarray:
        return self._read(0, self.head_dim)

    @property
    def values(self) -> np.ndarray:
        return self._read(1, self.value_dim)

    def append(self, key, value) -> int:
        """Store copies of ``key``/``value``; return the length before the append."""
        key, value = check_cache_append(self, key, value)
        start = len(self)
        self._blocks.append((key.copy(), value.copy()))
        return start


class QuantizedKVCache(QuantizedStorage, KVCache):
    """The oracle's fp8 cache: blocks of fp8 codes with float32 scales per tensor or per K/V
    head, read back dequantized (:mod:`oracle.rules.quantization`).

    The constructor, ``key_scale``/``value_scale`` and the dequantized ``keys``/``values``
    are :class:`~oracle.rules.QuantizedStorage`'s, as ``impl.QuantizedKVCache``'s; ``append``
    and ``key_codes``/``value_codes`` its own, under the same rules
    (:func:`oracle.rules.quantize` refuses a value out of range, before any block is stored).
    """

    @property
    def key_codes(self) -> np.ndarray:
        return self._read(0, self.head_dim, self.storage)

    @property
    def value_codes(self) -> np.ndarray:
        return self._read(1, self.value_dim, self.storage)

    def append(self, key, value) -> int:
        """Quantize and store ``key``/``value``; return the length before the append."""
        key, value = check_cache_append(self, key, value)
        codes = (
            quantize(key, self.key_scale, self.storage, "key"),
            quantize(value, self.value_scale, self.storage, "value"),
        )
        start = len(self)
        self._blocks.append(codes)
        return start


@takes_options(only=CACHED_OPTIONS)
def cached_attention(
    query,
    key,
    value,
    cache: KVCache,
    *,
    fully_masked_rows="raise",
    attend=None,
    seqs=None,
    **options,
) -> OracleResult:
    """Append to ``cache``, then causal attention with ``query_start`` = previous length.

    Shapes as ``impl.cached_attention``. On any error the append is undone. ``attend``: the
    attention to run over the cache (default :func:`attention`; e.g. ``lambda *a, **k:
    oracle.ball.attention_parts(*a, **k).output`` for long caches), called with the
    cache's keys and values and ``is_causal=True, query_start=start``. The options are
    :data:`oracle.rules.CACHED_OPTIONS`. ``window``: a local
    window over the cache's absolute positions (:func:`oracle.rules.check_window`; for an
    :class:`oracle.serving.RollingKVCache` required, ``left <= capacity``, and the keys are
    the positions it held then the new ones);
    ``sinks``: one logit per query head (:mod:`oracle.rules.sinks`), passed to ``attend``
    only when given. ``seqs``: the sequences of an :class:`oracle.serving.PagedKVCache` the
    rows append to (:func:`oracle.serving.paged_cached_attention`).
    """
    from attnprops.oracle import serving  # (serving builds on this module)

    if seqs is not None or isinstance(cache, serving.PagedKVCache):
        return serving.paged_cached_attention(
            query,
            key,
            value,
            cache,
            seqs,
            fully_masked_rows=fully_masked_rows,
            attend=attend,
            **options,
        )
    check_cache_instance(cache, KVCache)
    check_cached_query(query, key, cache)
    attend = attention if attend is None else attend
    rolling = isinstance(cache, serving.RollingKVCache)  # (KVCache takes capacity= too)
    window = options["window"]
    if rolling:
        window = check_rolling_window(window, cache.capacity)
        held_keys, held_values = cache.keys, cache.values
    blocks = list(cache._blocks)
    start = cache.append(key, value)
    keys, values = cache.keys, cache.values
    if rolling:  # the held positions, then the new ones (valid: the append took them)
        keys = np.concatenate([held_keys, np.asarray(key)], axis=2)
        values = np.concatenate([held_values, np.asarray(value)], axis=2)
        start = held_keys.shape[2]
    try:
        call = cached_call(options, start, window)
        return attend(query, keys, values, fully_masked_rows=fully_masked_rows, **call)
    except BaseException:
        cache._blocks = blocks
        raise
