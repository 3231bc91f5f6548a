"""The rulebook: one set of input rules shared by the oracle and every implementation.

Shape legend used throughout the project::

    B   batch                 Hq  query heads (num_heads)     Hkv key/value heads (num_kv_heads)
    Tq  query positions       Tk  key/value positions         D   query/key head_dim
    Dv  value head dim        G = Hq // Hkv (query heads per K/V head)

    query (B, Hq, Tq, D)   key (B, Hkv, Tk, D)   value (B, Hkv, Tk, Dv)
    weights (B, Hq, Tq, Tk)                      output (B, Hq, Tq, Dv)

2-D inputs ``(T, D)`` mean one batch element and one head; results are then 2-D too.

Query head ``h`` reads K/V head ``h // G`` (grouped-query attention, Ainslie et al. 2023;
multi-query attention is ``Hkv == 1``, Shazeer 2019).

Masks
    ``attn_mask`` is ``None``, a bool array (True = this query may attend to this key), or a
    float array added to the scaled scores whose entries are finite or ``-inf``. Either kind
    broadcasts to ``(B, Hq, Tq, Tk)`` (to ``(Tq, Tk)`` for 2-D inputs), NumPy rules.
    Integer masks are rejected: ``1`` could mean "attend" or "add one".

Causality
    With ``is_causal=True`` key ``j`` is visible to local query ``i`` iff
    ``j <= query_start + i``; ``query_start`` is the absolute position of the first query.
    ``query_start=None`` means ``Tk - Tq`` (the queries are the last ``Tq`` positions, the
    KV-cache convention; note PyTorch's ``is_causal`` is top-left aligned, i.e. ``0``).
    An explicit ``query_start`` must be an ``int`` (not ``bool``) in ``[0, Tk - Tq]`` and is
    checked even when ``is_causal`` is False. Causal visibility is AND-ed with the mask.

Fully masked rows
    A query row with no visible key raises :class:`FullyMaskedRowError` (the source lab's rule:
    ``-inf - -inf`` would give NaN). The oracle also implements the ``"zeros"`` convention of
    PyTorch >= 2.5 and FlashAttention as a named parameter.

Every rule violation raises a subclass of :class:`AttentionInputError` (a ``ValueError``) whose
message names the argument and the rule. Nothing is ever modified.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
FULLY_MASKED_ROW_CONVENTIONS = ("raise", "zeros")


class AttentionInputError(ValueError):
    """An input breaks one of the rules of :mod:`oracle.rules`. Subclasses say which kind."""


class ShapeError(AttentionInputError):
    """Wrong ndim, mismatched or zero-size axes, or a mask that does not broadcast."""


class DtypeError(AttentionInputError):
    """Unsupported or mismatched dtypes (inputs, masks, cache)."""


class NonFiniteInputError(AttentionInputError):
    """NaN or infinity in query/key/value, NaN or +inf in a float mask."""


class QueryStartError(AttentionInputError):
    """``query_start`` is not an int in ``[0, Tk - Tq]``."""


class ScaleError(AttentionInputError):
    """``scale`` is not a finite number > 0."""


class ScoreOverflowError(AttentionInputError):
    """A visible scaled score (plus its float mask entry) overflows the computation dtype."""


class FullyMaskedRowError(AttentionInputError):
    """A query row has no visible key (under ``fully_masked_rows="raise"``)."""


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """Dtype in which an input dtype is computed: float16 is computed in float32."""
    return np.dtype(np.float32) if np.dtype(dtype) == np.float16 else np.dtype(dtype)


@dataclass(frozen=True)
class AttentionProblem:
    """A validated attention call, every array as a 4-D view of the caller's data.

    ``visible`` is a read-only bool array broadcast to ``(B, Hq, Tq, Tk)``: True where the
    query may attend (mask AND causality). ``bias`` is the float mask broadcast likewise
    (``None`` when there is no float mask); it is ``-inf`` exactly where a float mask hides.
    ``scale`` is ``None`` for the default ``1/sqrt(D)`` so each implementation computes it in
    its own precision. ``two_d`` records that results must be returned as 2-D.
    """

    query: np.ndarray
    key: np.ndarray
    value: np.ndarray | None
    visible: np.ndarray
    bias: np.ndarray | None
    scale: float | None
    query_start: int
    is_causal: bool
    two_d: bool
    dtype: np.dtype

    @property
    def batch(self) -> int:
        return self.query.shape[0]

    @property
    def num_heads(self) -> int:
        return self.query.shape[1]

    @property
    def num_kv_heads(self) -> int:
        return self.key.shape[1]

    @property
    def group(self) -> int:
        return self.num_heads // self.num_kv_heads

    @property
    def head_dim(self) -> int:
        return self.query.shape[3]


def _as_array(x, name: str) -> np.ndarray:
    """``x`` as a plain ndarray: an ndarray as is, a subclass (``np.matrix``) viewed as a plain
    ndarray, anything else through ``np.asarray``. Masked arrays are refused: dropping their
    mask would silently attend to entries the caller meant to hide."""
    if type(x) is np.ndarray:
        return x
    if isinstance(x, np.ma.MaskedArray):
        raise DtypeError(
            f"{name}: masked arrays are not supported (their mask would be ignored); pass a "
            "plain array and hide keys with attn_mask"
        )
    if isinstance(x, np.ndarray):
        return x.view(np.ndarray)
    try:
        return np.asarray(x)
    except Exception as exc:  # ragged lists and the like
        raise ShapeError(f"{name}: cannot be read as an array ({exc})") from None


def check_float_array(x, name: str, *, scan: bool = True) -> np.ndarray:
    """``x`` as a float16/32/64 array of non-zero size whose entries are all finite.

    ``scan=False`` skips the NaN/infinity pass for an ndarray already of a float dtype and
    non-zero size (returned as is): for implementations that scan their inputs block by block
    as they read them, and must then call this again with ``scan=True`` before raising.
    Raises :class:`DtypeError`, :class:`ShapeError` (zero-size axis, unreadable input) or
    :class:`NonFiniteInputError`, each naming ``name``.
    """
    if not scan and type(x) is np.ndarray and x.dtype in FLOAT_DTYPES and x.size:
        return x
    x = _as_array(x, name)
    if x.dtype not in FLOAT_DTYPES:
        raise DtypeError(
            f"{name}: dtype {x.dtype} is not supported; use float16, float32 or float64"
        )
    if x.size == 0:
        raise ShapeError(f"{name}: shape {x.shape} has a zero-size axis; every axis must be >= 1")
    with np.errstate(all="ignore"):
        finite = np.isfinite(x).all()
    if not finite:
        raise NonFiniteInputError(f"{name}: contains NaN or infinity; every entry must be finite")
    return x


def _is_int(x) -> bool:
    """An integer (Python or NumPy) that is not a bool: what the count and position rules
    accept."""
    return isinstance(x, (numbers.Integral, np.integer)) and not isinstance(x, (bool, np.bool_))


def check_scale(scale) -> float | None:
    """``None`` (meaning ``1/sqrt(D)``) or a finite real number > 0, returned as a float."""
    if scale is None:
        return None
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, numbers.Real):
        raise ScaleError(f"scale: {scale!r} is not a real number; pass None or a finite float > 0")
    value = float(scale)
    if not np.isfinite(value) or value <= 0:
        raise ScaleError(f"scale: {scale!r} must be finite and > 0 (None means 1/sqrt(head_dim))")
    return value


def check_query_start(query_start, query_len: int, key_len: int) -> int | None:
    """``None`` or an int in ``[0, key_len - query_len]`` (positions, not bytes)."""
    if query_start is None:
        return None
    if not _is_int(query_start):
        raise QueryStartError(
            f"query_start: {query_start!r} is not an int; it is the absolute position of the "
            "first query"
        )
    start = int(query_start)
    if not 0 <= start <= key_len - query_len:
        raise QueryStartError(
            f"query_start: {start} is outside [0, Tk - Tq] = [0, {key_len - query_len}] "
            f"(Tq={query_len}, Tk={key_len}); the last query's position must be < Tk"
        )
    return start


def check_block_size(block_size) -> int | None:
    """``None`` (the implementation's default path) or an ``int`` (not bool) >= 1: keys per block.

    Used by implementations with a blocked (online-softmax) path; the result does not depend
    on it beyond rounding. Raises :class:`ShapeError` (a size, like :func:`check_positive_int`).
    """
    if block_size is None:
        return None
    if not _is_int(block_size):
        raise ShapeError(
            f"block_size: {block_size!r} is not an int; it is the number of keys per block "
            "(an int >= 1, or None for the default path)"
        )
    if block_size < 1:
        raise ShapeError(f"block_size: {int(block_size)} must be >= 1 (keys per block)")
    return int(block_size)


def check_is_causal(is_causal) -> bool:
    if not isinstance(is_causal, (bool, np.bool_)):
        raise AttentionInputError(f"is_causal: {is_causal!r} must be True or False")
    return bool(is_causal)


def check_mask(attn_mask, target: tuple[int, ...]) -> np.ndarray | None:
    """Validate ``attn_mask`` against the score shape ``target``; return it as an array."""
    if attn_mask is None:
        return None
    mask = _as_array(attn_mask, "attn_mask")
    if mask.dtype != np.bool_ and mask.dtype not in FLOAT_DTYPES:
        raise DtypeError(
            f"attn_mask: dtype {mask.dtype} is ambiguous; use bool (True = may attend) or a "
            "float additive mask (0 = attend, -inf = hide)"
        )
    try:
        shape = np.broadcast_shapes(mask.shape, target)
    except ValueError:
        shape = None
    if shape != target:
        raise ShapeError(
            f"attn_mask: shape {mask.shape} does not broadcast to the score shape {target}"
        )
    if mask.dtype != np.bool_:
        if np.isnan(mask).any() or np.isposinf(mask).any():
            raise NonFiniteInputError(
                "attn_mask: float masks may hold finite values or -inf only, found NaN or +inf"
            )
    return mask


class AttentionCall(NamedTuple):
    """A call that passed every rule except the fully-masked-row rule (which needs the
    visibility of every row; see :func:`check_attention_inputs`).

    Arrays are 4-D *views* of the caller's data (2-D inputs get two leading axes of length 1),
    never copies. ``mask`` is the caller's ``attn_mask`` as a 4-D view (leading axes of length
    1 added), NOT broadcast to ``(B, Hq, Tq, Tk)``; ``None`` without a mask. ``query_start`` is
    the absolute position of the first query (``Tk - Tq`` when the caller passed None).
    ``scale`` is None for the default ``1/sqrt(D)``.
    """

    query: np.ndarray  # (B, Hq, Tq, D)
    key: np.ndarray  # (B, Hkv, Tk, D)
    value: np.ndarray | None  # (B, Hkv, Tk, Dv); None when the call needs no value
    mask: np.ndarray | None  # 4-D, broadcastable to (B, Hq, Tq, Tk)
    scale: float | None
    query_start: int
    is_causal: bool
    two_d: bool
    dtype: np.dtype

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """The score shape ``(B, Hq, Tq, Tk)``."""
        B, Hq, Tq, _ = self.query.shape
        return B, Hq, Tq, self.key.shape[2]

    @property
    def float_mask(self) -> bool:
        return self.mask is not None and self.mask.dtype != np.bool_


def check_attention_call(
    query,
    key,
    value=None,
    *,
    attn_mask=None,
    is_causal=False,
    query_start=None,
    scale=None,
    needs_value: bool = True,
    scan: bool = True,
) -> AttentionCall:
    """Every rule except the fully-masked-row rule, in the order below, without building any
    ``(B, Hq, Tq, Tk)`` array (how it differs from :func:`check_attention_inputs`, which also
    builds the dense visibility and applies that rule: this one costs ``O(inputs)``, and impl
    calls it, then checks the rows one key block at a time): ``is_causal``,
    ``scale``, then dtype/size/finiteness of query,
    key (and value), ndim and dtype agreement, batch/head_dim/head grouping/length agreement,
    ``query_start``, then ``attn_mask`` (dtype, broadcast shape, entries).

    ``scan=False``: query, key and value are not scanned for NaN/infinity here (see
    :func:`check_float_array`); the caller must scan them before using their values.
    Raises a subclass of :class:`AttentionInputError` naming the argument and the rule.
    Reads its inputs only.
    """
    is_causal = check_is_causal(is_causal)
    scale = check_scale(scale)
    named = [("query", query), ("key", key)] + ([("value", value)] if needs_value else [])
    arrays = {name: check_float_array(x, name, scan=scan) for name, x in named}
    q, k = arrays["query"], arrays["key"]
    v = arrays.get("value")
    if q.ndim not in (2, 4):
        raise ShapeError(
            f"query: ndim {q.ndim} (shape {q.shape}); expected (B, Hq, Tq, D) or (T, D)"
        )
    for name, x in arrays.items():
        if x.ndim != q.ndim:
            raise ShapeError(
                f"{name}: ndim {x.ndim} (shape {x.shape}) differs from query's ndim {q.ndim}"
            )
        if x.dtype != q.dtype:
            raise DtypeError(
                f"{name}: dtype {x.dtype} differs from query's {q.dtype}; cast them to one dtype"
            )
    two_d = q.ndim == 2
    if two_d:
        q, k = q[None, None], k[None, None]
        v = None if v is None else v[None, None]
    B, Hq, Tq, D = q.shape
    _, Hkv, Tk, _ = k.shape
    if k.shape[0] != B:
        raise ShapeError(f"key: batch {k.shape[0]} differs from query's batch {B}")
    if k.shape[3] != D:
        raise ShapeError(f"key: head_dim {k.shape[3]} differs from query's head_dim {D}")
    if Hq % Hkv:
        raise ShapeError(
            f"key: num_kv_heads={Hkv} must divide num_heads={Hq} (query head h reads K/V "
            "head h // (Hq // Hkv))"
        )
    if v is not None:
        if v.shape[0] != B:
            raise ShapeError(f"value: batch {v.shape[0]} differs from query's batch {B}")
        if v.shape[1] != Hkv:
            raise ShapeError(f"value: num_kv_heads {v.shape[1]} differs from key's {Hkv}")
        if v.shape[2] != Tk:
            raise ShapeError(f"value: length {v.shape[2]} differs from key's length {Tk}")
    start = check_query_start(query_start, Tq, Tk)
    if start is None:
        start = Tk - Tq
        if is_causal and start < 0:
            raise QueryStartError(
                f"query_start: None means Tk - Tq = {start} < 0 (Tq={Tq} > Tk={Tk}); with "
                "is_causal=True the first queries would see no key"
            )
    mask = check_mask(attn_mask, (Tq, Tk) if two_d else (B, Hq, Tq, Tk))
    if mask is not None:
        mask = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)  # a view: never copied
    return AttentionCall(q, k, v, mask, scale, start, is_causal, two_d, q.dtype)


def check_attention_inputs(
    query,
    key,
    value=None,
    *,
    attn_mask=None,
    is_causal=False,
    query_start=None,
    scale=None,
    fully_masked_rows: str = "raise",
    needs_value: bool = True,
) -> AttentionProblem:
    """Apply every rule to one attention call and return the validated problem, with its
    dense ``(B, Hq, Tq, Tk)`` visibility (``O(B Hq Tq Tk)`` memory: the dense paths and the
    oracle; :func:`check_attention_call` is the same without the visibility).

    The rules of :func:`check_attention_call`, then the fully-masked-row rule on the dense
    visibility (mask AND causality) under ``fully_masked_rows="raise"``.
    Raises a subclass of :class:`AttentionInputError` naming the argument and the rule.
    Reads its inputs only.
    """
    if fully_masked_rows not in FULLY_MASKED_ROW_CONVENTIONS:
        raise AttentionInputError(
            f"fully_masked_rows: {fully_masked_rows!r} must be one of "
            f"{FULLY_MASKED_ROW_CONVENTIONS}"
        )
    call = check_attention_call(
        query,
        key,
        value,
        attn_mask=attn_mask,
        is_causal=is_causal,
        query_start=query_start,
        scale=scale,
        needs_value=needs_value,
    )
    target = call.shape  # (B, Hq, Tq, Tk)
    Tq, Tk = target[2], target[3]
    visible = np.ones(target, dtype=bool)
    bias = None
    if call.mask is not None:
        if call.mask.dtype == np.bool_:
            visible = visible & call.mask
        else:
            bias = np.broadcast_to(call.mask, target)  # (B, Hq, Tq, Tk)
            visible = visible & ~np.isneginf(bias)
    if call.is_causal:
        i = np.arange(Tq)[:, None]
        j = np.arange(Tk)[None, :]
        visible = visible & (j <= call.query_start + i)
    if fully_masked_rows == "raise":
        empty = ~visible.any(axis=-1)
        if empty.any():
            b, h, i = (int(n) for n in np.argwhere(empty)[0])
            raise FullyMaskedRowError(
                f"attn_mask/is_causal: query row (batch={b}, head={h}, query={i}) has no "
                f"visible key ({int(empty.sum())} such rows); every query must see at least "
                "one key"
            )
    visible.setflags(write=False)
    return AttentionProblem(
        query=call.query,
        key=call.key,
        value=call.value,
        visible=visible,
        bias=bias,
        scale=call.scale,
        query_start=call.query_start,
        is_causal=call.is_causal,
        two_d=call.two_d,
        dtype=call.dtype,
    )


def raise_score_overflow(problem: AttentionProblem) -> None:
    """Raise the overflow error for ``problem`` (called by implementations that detect it)."""
    raise ScoreOverflowError(
        f"query/key/scale/attn_mask: a visible scaled score overflows "
        f"{compute_dtype(problem.dtype)} (dtype of the inputs: {problem.dtype}); rescale the "
        "inputs or pass a smaller scale"
    )


def check_positive_int(value, name: str) -> int:
    """An ``int`` (not bool) >= 1, as used for sizes (counts, not bytes)."""
    if not _is_int(value):
        raise ShapeError(f"{name}: {value!r} must be an int >= 1")
    if value < 1:
        raise ShapeError(f"{name}: {value} must be >= 1")
    return int(value)


def check_cache_config(batch, num_kv_heads, head_dim, value_dim, dtype):
    """Validate a KV cache's sizes (counts) and dtype; return them normalized."""
    batch = check_positive_int(batch, "batch")
    num_kv_heads = check_positive_int(num_kv_heads, "num_kv_heads")
    head_dim = check_positive_int(head_dim, "head_dim")
    value_dim = head_dim if value_dim is None else check_positive_int(value_dim, "value_dim")
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise DtypeError(f"dtype: {dtype!r} is not a NumPy dtype") from None
    if dtype not in FLOAT_DTYPES:
        raise DtypeError(f"dtype: {dtype} is not supported; use float16, float32 or float64")
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
            f"cache: {type(cache).__name__} is not a {cache_class.__module__}."
            f"{cache_class.__qualname__}; create one with KVCache(batch, num_kv_heads, head_dim)"
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


def kv_cache_bytes(*, num_layers, batch, tokens, num_kv_heads, head_dim, dtype) -> int:
    """Raw K/V cache payload in bytes.

    ``2 * num_layers * batch * tokens * num_kv_heads * head_dim * itemsize`` (the 2 counts K
    and V). All sizes are counts (ints >= 1); ``dtype`` is a NumPy dtype or one of
    ``DTYPE_BYTES``'s names (e.g. ``"bfloat16"``). Excludes allocator slack, metadata and
    paging. Source: the source lab's KV byte formula; Pope et al. 2022, "Efficiently Scaling
    Transformer Inference". Raises :class:`ShapeError` / :class:`DtypeError`.
    """
    sizes = [
        check_positive_int(v, n)
        for n, v in (
            ("num_layers", num_layers),
            ("batch", batch),
            ("tokens", tokens),
            ("num_kv_heads", num_kv_heads),
            ("head_dim", head_dim),
        )
    ]
    name = dtype if isinstance(dtype, str) else None
    if dtype is None:
        raise DtypeError(f"dtype: None is not a KV cache dtype; use one of {sorted(DTYPE_BYTES)}")
    if name not in DTYPE_BYTES:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            raise DtypeError(
                f"dtype: {dtype!r} is unknown; use one of {sorted(DTYPE_BYTES)}"
            ) from None
    if name not in DTYPE_BYTES:
        raise DtypeError(f"dtype: {name} is not a KV cache dtype; use one of {sorted(DTYPE_BYTES)}")
    total = 2 * DTYPE_BYTES[name]
    for s in sizes:
        total *= s
    return total
