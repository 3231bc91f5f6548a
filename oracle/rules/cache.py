"""The rules of the KV cache (configuration, appends, the cached query) and its size in bytes
(:mod:`oracle.rules`)."""

from __future__ import annotations

import copy
from typing import NamedTuple

import numpy as np

from attnprops.oracle.rules.arguments import _as_array
from attnprops.oracle.rules.arguments import _is_int
from attnprops.oracle.rules.arguments import check_float_array
from attnprops.oracle.rules.arguments import check_positive_int
from attnprops.oracle.rules.arguments import pages_needed
from attnprops.oracle.rules.dtypes import FLOAT_DTYPES
from attnprops.oracle.rules.dtypes import unsupported_dtype
from attnprops.oracle.rules.errors import AttentionInputError
from attnprops.oracle.rules.errors import DtypeError
from attnprops.oracle.rules.errors import ShapeError

__all__ = [
    "DTYPE_BYTES",
    "IndependentCopy",
    "PagedBytes",
    "check_cache_append",
    "check_cache_config",
    "check_cache_instance",
    "check_cached_query",
    "cached_call",
    "kv_cache_bytes",
    "kv_cache_elements",
    "paged_kv_cache_bytes",
]


class IndependentCopy:
    """Mixed into every cache class of ``impl`` and the oracle: ``copy.copy(cache)`` is a cache
    of its own, as ``copy.deepcopy`` (a shallow copy would share the storage that appends
    write into, so an append to one would change, or overwrite, the other's positions)."""

    def __copy__(self):
        return copy.deepcopy(self)


def check_cache_config(batch, num_kv_heads, head_dim, value_dim, dtype):
    """Validate a KV cache's sizes (counts) and dtype; return them normalized."""
    batch = check_positive_int(batch, "batch")
    num_kv_heads = check_positive_int(num_kv_heads, "num_kv_heads")
    head_dim = check_positive_int(head_dim, "head_dim")
    value_dim = head_dim if value_dim is None else check_positive_int(value_dim, "value_dim")
    try:
        dtype = np.dtype(dtype)
    except (TypeError, ValueError):  # "(2,-1)f8" is a ValueError
        raise DtypeError(f"dtype: {dtype!r} is not a NumPy dtype") from None
    if dtype not in FLOAT_DTYPES:
        raise DtypeError(unsupported_dtype("dtype", dtype))
    return batch, num_kv_heads, head_dim, value_dim, dtype


def check_cache_append(cache, key, value) -> tuple[np.ndarray, np.ndarray]:
    """Validate ``key`` ``(B, Hkv, Tnew, D)`` and ``value`` ``(B, Hkv, Tnew, Dv)`` for ``cache``.

    ``cache`` provides ``batch``, ``num_kv_heads``, ``head_dim``, ``value_dim`` and ``dtype``.
    """
    key = check_float_array(key, "key")
    value = check_float_array(value, "value")
    B, Hkv = cache.batch, cache.num_kv_heads
    for name, x, last in (("key", key, cache.head_dim), ("value", value, cache.value_dim)):
        if x.ndim != 4 or x.shape[:2] != (B, Hkv) or x.shape[3] != last:
            raise ShapeError(
                f"{name}: shape {x.shape} does not fit the cache; expected "
                f"(batch={B}, num_kv_heads={Hkv}, Tnew, {last})"
            )
        if x.dtype != cache.dtype:
            raise DtypeError(f"{name}: dtype {x.dtype} differs from the cache's {cache.dtype}")
    if key.shape[2] != value.shape[2]:
        raise ShapeError(f"value: length {value.shape[2]} differs from key's length {key.shape[2]}")
    return key, value


def check_cache_instance(cache, cache_class: type) -> None:
    """``cached_attention``'s ``cache`` must be the implementation's own ``KVCache`` (or a
    subclass): another object has none of its internals to append to or roll back.
    Raises :class:`AttentionInputError` naming ``cache``."""
    if not isinstance(cache, cache_class):
        raise AttentionInputError(
            f"cache: {type(cache).__module__}.{type(cache).__qualname__} is not "
            f"{cache_class.__module__}.{cache_class.__qualname__} or a subclass; create one "
            f"with {cache_class.__name__}(batch, num_kv_heads, head_dim)"
        )


def check_cached_query(query, key, cache=None) -> None:
    """``cached_attention``: the query block must be 4-D with one query per new key and, when
    ``cache`` (anything with a ``dtype``) is given, of the cache's dtype (else the error would
    blame the cached keys)."""
    q = _as_array(query, "query")
    k = _as_array(key, "key")
    if q.ndim != 4:
        raise ShapeError(f"query: ndim {q.ndim} (shape {q.shape}); expected (B, Hq, Tnew, D)")
    if cache is not None and q.dtype in FLOAT_DTYPES and q.dtype != cache.dtype:
        raise DtypeError(f"query: dtype {q.dtype} differs from the cache's {cache.dtype}")
    if k.ndim == 4 and q.shape[2] != k.shape[2]:
        raise ShapeError(
            f"query: {q.shape[2]} positions but {k.shape[2]} new keys; cached_attention "
            "takes one query per appended token"
        )


DTYPE_BYTES = {
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "int8": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}


def kv_cache_elements(num_layers, batch, tokens, num_kv_heads, head_dim, /) -> int:
    """``2 * num_layers * batch * tokens * num_kv_heads * head_dim``: the elements of a K/V
    cache (the 2 counts K and V), the formula every ``kv_cache_bytes`` multiplies by its
    dtype's size. Raises :class:`ShapeError` naming a size that is not an int >= 1."""
    total = 2
    for name, value in (
        ("num_layers", num_layers),
        ("batch", batch),
        ("tokens", tokens),
        ("num_kv_heads", num_kv_heads),
        ("head_dim", head_dim),
    ):
        total *= check_positive_int(value, name)
    return total


def _itemsize(dtype) -> int:
    """Bytes per element of a KV cache ``dtype`` (a NumPy dtype or a name of
    :data:`DTYPE_BYTES`); raises :class:`DtypeError`."""
    name = dtype if isinstance(dtype, str) else None
    if dtype is None:
        raise DtypeError(f"dtype: None is not a KV cache dtype; use one of {sorted(DTYPE_BYTES)}")
    if name not in DTYPE_BYTES:
        try:
            name = np.dtype(dtype).name
        except (TypeError, ValueError):
            raise DtypeError(
                f"dtype: {dtype!r} is unknown; use one of {sorted(DTYPE_BYTES)}"
            ) from None
    if name not in DTYPE_BYTES:
        raise DtypeError(f"dtype: {name} is not a KV cache dtype; use one of {sorted(DTYPE_BYTES)}")
    return DTYPE_BYTES[name]


def kv_cache_bytes(
    *,
    num_layers,
    batch,
    tokens,
    num_kv_heads,
    head_dim,
    dtype,
    page_size=None,
    rolling_capacity=None,
    value_dim=None,
) -> int:
    """Raw K/V cache payload in bytes.

    ``2 * num_layers * batch * tokens * num_kv_heads * head_dim * itemsize`` (the 2 counts K
    and V); with ``value_dim=Dv`` (default ``head_dim``) the values count ``Dv`` per position
    instead: ``num_layers * batch * tokens * num_kv_heads * (head_dim + Dv) * itemsize``.
    All sizes are counts (ints >= 1); ``dtype`` is a NumPy dtype or one of ``DTYPE_BYTES``'s
    names (e.g. ``"bfloat16"``, ``"float8_e4m3fn"``). Excludes allocator slack and metadata,
    and a quantized cache's scales (:class:`impl.QuantizedKVCache`: one float32 per tensor or
    per K/V head, for K and for V, whatever the tokens).
    ``page_size=S``: the bytes a paged cache *allocates* for ``batch`` sequences of ``tokens``
    positions, each rounded up to whole pages, ``ceil(tokens / S) * S`` positions
    (:func:`paged_kv_cache_bytes` gives used and allocated per sequence).
    ``rolling_capacity=W``: a rolling cache holds ``min(tokens, W)`` positions, a fixed size
    once ``tokens >= W`` (:class:`impl.RollingKVCache`); with both, the rolling cache's
    positions are rounded up to pages. Source: the source lab's KV byte formula; Pope et al.
    2022, "Efficiently Scaling Transformer Inference"; Kwon et al. 2023 for pages. Raises
    :class:`ShapeError` / :class:`DtypeError`.
    """
    check_positive_int(tokens, "tokens")
    if rolling_capacity is not None:
        tokens = min(tokens, check_positive_int(rolling_capacity, "rolling_capacity"))
    if page_size is not None:
        size = check_positive_int(page_size, "page_size")
        tokens = pages_needed(tokens, size) * size
    kv_cache_elements(num_layers, batch, tokens, num_kv_heads, head_dim)  # checks the sizes
    per_position = _position_elements(num_layers, num_kv_heads, head_dim, value_dim)
    return batch * tokens * per_position * _itemsize(dtype)


def _position_elements(num_layers, num_kv_heads, head_dim, value_dim) -> int:
    """K/V elements of one position of one sequence, over the layers: ``num_layers *
    num_kv_heads * (head_dim + value_dim)`` (``value_dim`` None: ``head_dim``)."""
    keys = kv_cache_elements(num_layers, 1, 1, num_kv_heads, head_dim) // 2
    if value_dim is None:
        return 2 * keys
    value_dim = check_positive_int(value_dim, "value_dim")
    return keys + kv_cache_elements(num_layers, 1, 1, num_kv_heads, value_dim) // 2


class PagedBytes(NamedTuple):
    """Bytes of a paged cache, per sequence: ``used`` (its positions, the plain formula) and
    ``allocated`` (its whole pages); ``used_total``/``allocated_total`` sum them."""

    used: tuple[int, ...]
    allocated: tuple[int, ...]

    @property
    def used_total(self) -> int:
        return sum(self.used)

    @property
    def allocated_total(self) -> int:
        return sum(self.allocated)


def paged_kv_cache_bytes(
    *, num_layers, seqlens, page_size, num_kv_heads, head_dim, dtype, value_dim=None
) -> PagedBytes:
    """Used and allocated K/V bytes of sequences of lengths ``seqlens`` (ints >= 0) in pages
    of ``page_size`` positions: sequence ``b`` uses ``2 * num_layers * L_b * Hkv * D *
    itemsize`` bytes (``num_layers * L_b * Hkv * (D + Dv) * itemsize`` with ``value_dim=Dv``)
    and allocates ``ceil(L_b / S) * S`` positions' worth (an empty sequence
    owns no page). The difference is the last page's unused slots, below one page per
    sequence and layer (Kwon et al. 2023, section 4.1). Raises :class:`ShapeError` /
    :class:`DtypeError`."""
    size = check_positive_int(page_size, "page_size")
    try:
        lengths = list(seqlens)  # once: a generator is read once
    except (TypeError, ValueError):
        raise ShapeError(f"seqlens: {seqlens!r} must be a sequence of ints >= 0") from None
    if not lengths or any(not _is_int(n) or n < 0 for n in lengths):
        raise ShapeError(f"seqlens: {seqlens!r} must be a non-empty sequence of ints >= 0")
    per_position = _position_elements(num_layers, num_kv_heads, head_dim, value_dim)
    per_position *= _itemsize(dtype)
    return PagedBytes(
        used=tuple(int(n) * per_position for n in lengths),
        allocated=tuple(pages_needed(n, size) * size * per_position for n in lengths),
    )


def cached_call(options: dict, start: int, window) -> dict:
    """The keywords of the plain attention call that a cached call is, over the cache's keys
    and values (the definition shared by :func:`oracle.cached_attention` and
    ``impl``'s): causal with ``query_start = start`` (the cache length before the append; a
    rolling cache: the positions it held), the call's ``attn_mask`` and ``scale``, the checked
    ``window``; ``sinks`` only when given (a subject without sinks takes no such keyword).
    ``options``: the call's :data:`oracle.rules.CACHED_OPTIONS`."""
    call = dict(
        attn_mask=options["attn_mask"],
        is_causal=True,
        query_start=start,
        scale=options["scale"],
        window=window,
    )
    if options["sinks"] is not None:
        call["sinks"] = options["sinks"]
    return call
