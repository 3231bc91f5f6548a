"""The rules of an attention call's arrays (:func:`oracle.rules.check_attention_call`), each
with its break function: shapes (ndim, batch, head_dim, lengths, heads, zero-size axes, the
mask's shape), dtypes and non-finite values, in :data:`ARRAYS` (the first entries of
:data:`oracle.violations.attention.ATTENTION`)."""

from __future__ import annotations

import numpy as np

from attnprops.oracle.rules import DtypeError
from attnprops.oracle.rules import NonFiniteInputError
from attnprops.oracle.rules import ShapeError
from attnprops.oracle.violations.calls import Example
from attnprops.oracle.violations.calls import Violation
from attnprops.oracle.violations.calls import changed
from attnprops.oracle.violations.calls import doubled_batch
from attnprops.oracle.violations.calls import lengths
from attnprops.oracle.violations.calls import nonfinite
from attnprops.oracle.violations.calls import one_cell
from attnprops.oracle.violations.calls import other_float
from attnprops.oracle.violations.calls import score_shape


def _query_ndim(call, pick):
    q = call.query
    return changed(call, query=q[0] if q.ndim == 4 else q[None])


def _key_ndim(call, pick):
    if call.query.ndim == 2:  # a 4-D key and value for a 2-D query
        return changed(
            call,
            key=call.key[None, None],
            value=None if call.value is None else call.value[None, None],
        )
    if pick.choice(["drop the batch axis", "2-D key and value"]) == "drop the batch axis":
        return changed(call, key=call.key[0])
    return changed(call, key=call.key[0, 0], value=None if call.value is None else call.value[0, 0])


def _key_batch(call, pick):
    return changed(call, key=doubled_batch(call.key), value=doubled_batch(call.value))


def _value_batch(call, pick):
    return changed(call, value=doubled_batch(call.value))


def _head_dim(call, pick):
    k = call.key
    if k.shape[-1] > 1 and pick.choice(["shorter", "longer"]) == "shorter":
        return changed(call, key=k[..., :-1])
    return changed(call, key=np.concatenate([k, k[..., :1]], axis=-1))


def _kv_length(call, pick):
    v = call.value
    if v.shape[-2] > 1 and pick.choice(["shorter", "longer"]) == "shorter":
        return changed(call, value=v[..., :-1, :])
    return changed(call, value=np.concatenate([v, v[..., :1, :]], axis=-2))


def _heads(call, pick):
    hq = call.query.shape[1]
    # Hq + 1 K/V heads never divide Hq; when Hq > 1, Hq - 1 also may not (3 of 2 query heads)
    return changed(
        call,
        key=np.concatenate([call.key[:, :1]] * (hq + 1), axis=1),
        value=np.concatenate([call.value[:, :1]] * (hq + 1), axis=1),
    )


def _zero_size_query(call, pick):
    axis = pick.choice(["length", "head_dim"])
    q = call.query
    return changed(call, query=q[..., :0, :] if axis == "length" else q[..., :0])


def _zero_size_key(call, pick):
    return changed(call, key=call.key[..., :0])


def _mask_shape(call, pick):
    shape = score_shape(call)
    if pick.choice(["one key too many", "one axis too many"]) == "one key too many":
        return changed(call, kw_attn_mask=np.ones(shape[:-1] + (shape[-1] + 1,), dtype=bool))
    return changed(call, kw_attn_mask=np.ones((2,) + shape, dtype=bool))


def _key_dtype(call, pick):
    return changed(call, key=call.key.astype(other_float(call.query.dtype)))


def _value_dtype(call, pick):
    return changed(call, value=call.value.astype(other_float(call.query.dtype)))


def _integer_mask(call, pick):
    dtype = pick.choice([np.int64, np.int8, np.uint8])
    return changed(call, kw_attn_mask=np.ones(lengths(call), dtype=dtype))


def _query_not_float(call, pick):
    return changed(call, query=np.ones(call.query.shape, dtype=pick.choice([np.int64, np.int32])))


def _key_not_float(call, pick):
    return changed(call, key=call.key.astype(pick.choice([np.complex128, np.int64])))


def _mask_value(bad):
    def breaks(call, pick):
        mask = np.zeros(score_shape(call), dtype=call.query.dtype)
        return changed(call, kw_attn_mask=one_cell(mask, pick, bad))

    return breaks


E = Example
ARRAYS: tuple[Violation, ...] = (
    # ShapeError: ndim, batch, head_dim, lengths, heads, zero-size axes, mask shape
    Violation(
        "query ndim",
        ShapeError,
        "query",
        _query_ndim,
        (E("ndim-3d-query"), E("weights-ndim", func="attention_weights")),
    ),
    Violation(
        "key ndim differs",
        ShapeError,
        "key",
        _key_ndim,
        (E("ndim-mismatch", "4d", ("2-D key and value",)),),
    ),
    Violation("key batch differs", ShapeError, "key", _key_batch, (E("batch-mismatch-key", "4d"),)),
    Violation(
        "value batch differs", ShapeError, "value", _value_batch, (E("batch-mismatch-value", "4d"),)
    ),
    Violation("head_dim differs", ShapeError, "key", _head_dim, (E("head-dim-mismatch"),)),
    Violation(
        "key/value length differs", ShapeError, "value", _kv_length, (E("kv-length-mismatch"),)
    ),
    Violation(
        "heads not divisible", ShapeError, "key", _heads, (E("hq-not-multiple-of-hkv", "4d"),)
    ),
    Violation(
        "zero-size query axis", ShapeError, "query", _zero_size_query, (E("zero-size-query"),)
    ),
    Violation("zero-size key axis", ShapeError, "key", _zero_size_key, (E("zero-size-key"),)),
    Violation(
        "mask not broadcastable",
        ShapeError,
        "attn_mask",
        _mask_shape,
        (E("mask-not-broadcastable"), E("mask-too-many-dims", answers=("one axis too many",))),
    ),
    # DtypeError
    Violation("key dtype differs", DtypeError, "key", _key_dtype, (E("dtype-mismatch-key"),)),
    Violation(
        "value dtype differs", DtypeError, "value", _value_dtype, (E("dtype-mismatch-value"),)
    ),
    Violation("integer mask", DtypeError, "attn_mask", _integer_mask, (E("int-mask"),)),
    Violation(
        "query not a float", DtypeError, "query", _query_not_float, (E("unsupported-int-query"),)
    ),
    Violation(
        "key not a float", DtypeError, "key", _key_not_float, (E("unsupported-complex-key"),)
    ),
    # NonFiniteInputError
    Violation(
        "non-finite query", NonFiniteInputError, "query", nonfinite("query"), (E("nan-query"),)
    ),
    Violation(
        "non-finite key",
        NonFiniteInputError,
        "key",
        nonfinite("key"),
        (E("inf-key", answers=(np.inf,)),),
    ),
    Violation(
        "non-finite value",
        NonFiniteInputError,
        "value",
        nonfinite("value"),
        (E("neg-inf-value", answers=(-np.inf, 2, 1)),),
    ),
    Violation(
        "NaN in float mask",
        NonFiniteInputError,
        "attn_mask",
        _mask_value(np.nan),
        (E("nan-float-mask"),),
    ),
    Violation(
        "+inf in float mask",
        NonFiniteInputError,
        "attn_mask",
        _mask_value(np.inf),
        (E("posinf-float-mask"),),
    ),
)
del E
