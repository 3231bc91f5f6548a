"""The rules of the KV cache (:func:`oracle.rules.check_cache_config`,
:func:`~oracle.rules.check_cache_append`, :func:`~oracle.rules.check_cached_query`) and of
:func:`oracle.kv_cache_bytes`, each with its break function. The valid call is a one-token
append (``func="append"``) of ``key (B, Hkv, Tnew, D)`` and ``value (B, Hkv, Tnew, Dv)`` to
an empty ``KVCache(**kwargs["cache"])``."""

from __future__ import annotations

import numpy as np

from attnprops.oracle import lab
from attnprops.oracle.rules import DtypeError
from attnprops.oracle.rules import NonFiniteInputError
from attnprops.oracle.rules import ShapeError
from attnprops.oracle.violations.calls import Example
from attnprops.oracle.violations.calls import Violation
from attnprops.oracle.violations.calls import changed
from attnprops.oracle.violations.calls import doubled_batch
from attnprops.oracle.violations.calls import nonfinite
from attnprops.oracle.violations.calls import other_float


def _append_dtype(name):
    def breaks(call, pick):
        array = getattr(call, name)
        dtype = (
            other_float(array.dtype)
            if pick.choice(["another float", "an integer"]) == "another float"
            else np.int64
        )
        return changed(call, **{name: array.astype(dtype)})

    return breaks


def _append_value_head_dim(call, pick):
    v = call.value
    return changed(call, value=np.concatenate([v, v[..., :1]], axis=-1))


def _append_value_length(call, pick):
    v = call.value
    return changed(call, value=np.concatenate([v, v[..., :1, :]], axis=-2))


def _append_key_heads(call, pick):
    k = call.key
    return changed(call, key=np.concatenate([k, k[:, :1]], axis=1))


def _append_key_head_dim(call, pick):
    return changed(
        call,
        key=call.key[..., :-1]
        if call.key.shape[-1] > 1
        else np.concatenate([call.key] * 2, axis=-1),
    )


def _append_value_ndim(call, pick):
    return changed(call, value=call.value[0])


def _append_key_ndim(call, pick):
    return changed(call, key=call.key[0])


def _append_batch(call, pick):
    return changed(call, key=doubled_batch(call.key), value=doubled_batch(call.value))


def _append_zero_tokens(call, pick):
    return changed(call, key=call.key[..., :0, :], value=call.value[..., :0, :])


def _cache_heads(call, pick):
    return call._replace(
        func="KVCache",
        query=None,
        key=None,
        value=None,
        kwargs=dict(call.kwargs["cache"], num_kv_heads=pick.integer(-1, 0)),
    )


def _cache_dtype(call, pick):
    return call._replace(
        func="KVCache",
        query=None,
        key=None,
        value=None,
        kwargs=dict(call.kwargs["cache"], dtype=pick.choice([np.int32, np.complex64, "float12"])),
    )


def _cached_query_length(call, pick):
    q = np.ones(call.key.shape[:-2] + (call.key.shape[-2] + 1, call.key.shape[-1]), call.key.dtype)
    return call._replace(func="cached_attention", query=q)


def _kv_bytes_tokens(call, pick):
    return call._replace(
        func="kv_cache_bytes",
        query=None,
        key=None,
        value=None,
        kwargs=dict(lab.KV_CONFIG, tokens=pick.integer(-1, 0)),
    )


def _kv_bytes_dtype(call, pick):
    return call._replace(
        func="kv_cache_bytes",
        query=None,
        key=None,
        value=None,
        kwargs=dict(lab.KV_CONFIG, dtype=pick.choice(["float12", "fp8"])),
    )


E = Example
# A one-token append broken: the failed-append property and impl's cache tests break a
# valid append of their own with these.
APPEND: tuple[Violation, ...] = (
    Violation(
        "append key dtype differs",
        DtypeError,
        "key",
        _append_dtype("key"),
        (E("append-key-dtype", "cache"),),
    ),
    Violation(
        "append value dtype differs",
        DtypeError,
        "value",
        _append_dtype("value"),
        (E("append-value-dtype", "cache"), E("append-int-value", "cache", ("an integer",))),
    ),
    Violation(
        "append key head_dim",
        ShapeError,
        "key",
        _append_key_head_dim,
        (E("append-key-head-dim", "cache"),),
    ),
    Violation(
        "append value head_dim",
        ShapeError,
        "value",
        _append_value_head_dim,
        (E("append-value-head-dim", "cache"),),
    ),
    Violation(
        "append value length differs",
        ShapeError,
        "value",
        _append_value_length,
        (E("append-value-length", "cache"),),
    ),
    Violation(
        "append key heads",
        ShapeError,
        "key",
        _append_key_heads,
        (E("append-key-heads", "cache"),),
    ),
    Violation(
        "append value ndim",
        ShapeError,
        "value",
        _append_value_ndim,
        (E("append-value-ndim", "cache"),),
    ),
    Violation(
        "append key ndim",
        ShapeError,
        "key",
        _append_key_ndim,
        (E("append-key-ndim", "cache"),),
    ),
    Violation(
        "append batch differs",
        ShapeError,
        "key",
        _append_batch,
        (E("append-key-batch", "cache"),),
    ),
    Violation(
        "append zero tokens",
        ShapeError,
        "key",
        _append_zero_tokens,
        (E("append-zero-tokens", "cache"),),
    ),
    Violation(
        "append non-finite key",
        NonFiniteInputError,
        "key",
        nonfinite("key"),
        (E("append-nan-key", "cache"),),
    ),
    Violation(
        "append non-finite value",
        NonFiniteInputError,
        "value",
        nonfinite("value"),
        (E("append-inf-value", "cache", answers=(np.inf,)),),
    ),
)
# The cache's other rules (its configuration, cached_attention's query) and kv_cache_bytes'.
OTHER: tuple[Violation, ...] = (
    Violation(
        "cache heads not positive",
        ShapeError,
        "num_kv_heads",
        _cache_heads,
        (E("cache-zero-heads", "cache", answers=(0,)),),
    ),
    Violation(
        "cache dtype not a float",
        DtypeError,
        "dtype",
        _cache_dtype,
        (E("cache-int-dtype", "cache"),),
    ),
    Violation(
        "cached queries differ from new tokens",
        ShapeError,
        "query",
        _cached_query_length,
        (E("cached-query-length", "cache"),),
    ),
    Violation(
        "kv_cache_bytes size not positive",
        ShapeError,
        "tokens",
        _kv_bytes_tokens,
        (E("kv-bytes-negative-tokens", "cache"),),
    ),
    Violation(
        "kv_cache_bytes dtype unknown",
        DtypeError,
        "dtype",
        _kv_bytes_dtype,
        (E("kv-bytes-unknown-dtype", "cache"),),
    ),
)
del E
CACHE = APPEND + OTHER
