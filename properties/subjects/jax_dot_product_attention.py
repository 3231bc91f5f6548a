"""Subject: ``jax.nn.dot_product_attention`` (XLA implementation) on the CPU.

Install jax first (``pip install jax``; from a clone, the extra: ``pip install -e .[jax]``). Run: ``attnprops check --impl
attnprops.properties.subjects.jax_dot_product_attention``. Importing this module turns on
``jax_enable_x64`` (float64 arrays stay float64) for the whole process.

What the adapter maps (each mapping checked by ``python -m attnprops.properties.subjects.probe
jax_dot_product_attention``, see ``docs/conventions.md``):

- Layout: JAX takes ``(B, T, N, H)``; the adapter transposes ``(B, H, T, D)`` in and out.
  2-D ``(T, D)`` inputs become ``(1, T, 1, D)``. Masks must be 4-D ``(B, N, T, S)``-
  broadcastable, so they get leading axes of size 1.
- ``D != Dv``: JAX requires value's head dim to equal key's. The adapter zero-pads the
  narrower side to ``max(D, Dv)`` (zero columns of q/k add exact zeros to every score; zero
  value columns are sliced off) and passes ``scale = 1/sqrt(D)`` explicitly when it pads q/k.
- Mask polarity: JAX's bool ``mask`` is True = take part (same as this project); a float mask
  goes to ``bias`` (additive, same meaning) in its own dtype, as a caller's JAX call gets it.
- Causality: JAX's ``is_causal`` is top-left aligned (query ``i`` sees keys ``0..i``), so the
  adapter never passes it: it builds the bool mask ``j <= query_start + i`` and AND-s it
  with the caller's bool mask (or passes it as ``mask`` next to a float ``bias``).
- Local windows: passed as JAX's own ``local_window_size`` (so the suite tests JAX's window
  code, ``_get_window_mask``, rather than a mask the adapter builds). Measured with jax
  0.10.2: the query at *local* index ``i`` sees keys ``i - l ..= i + r``, both ends
  inclusive, whatever ``Tk - Tq`` (top-left, as its ``is_causal``), AND-ed with ``mask``,
  and applied without a mask too (jax#32300 is fixed there). :func:`local_window_size` shifts
  this project's absolute-position window by the first query's position.
- GQA: JAX groups query heads ``N = K * G`` as ``h = k * G + g``, i.e. head ``h`` reads K/V
  head ``h // G`` (this project's convention); nothing to map.
- Arithmetic (``compute_dtypes``, ``rounds_weights``): for float16 and bfloat16 JAX forms the
  scores in float32 (``preferred_element_type``; bfloat16 through the dot algorithm
  ``BF16_BF16_F32`` where XLA's CPU compiler takes it, else, as float16 always, through the
  default precision: O2), scales them, adds the bias and takes the softmax in float32, rounds
  the normalised weights to the input dtype and multiplies them with the values in a 16-bit
  dot that XLA's CPU compiler upcasts to float32 (the compiled HLO: ``f32[...] dot``; measured
  with jax 0.10.2: over 7 to 2000 keys the outputs equal, bit for bit, float32 scores and
  softmax, weights rounded to the input dtype, a float32 ``P @ V`` rounded once). A normalised
  weight rounded, ``w (1 + d)``, is FlashAttention's rounded ``exp(s - m)`` over an unrounded
  sum, the model ``rounds_weights`` charges. bfloat16 arrays are ``ml_dtypes``' (JAX's own).
- ``attention_weights``: JAX applied to an identity value matrix (``w @ I = w``).
- KV cache: JAX has none; :class:`KVCache` holds jax arrays preallocated to a capacity that
  doubles (as Flax's decode cache), and :func:`cached_attention` calls JAX over the whole
  buffer with ``query_start`` = the cache length before the append (the causal mask hides the
  slots not written yet).

Known deviations (found by the suite, listed in ``jax_dot_product_attention.xfail.txt``,
explained in ``docs/findings.md``): JAX computes the softmax in float32 even for float64
inputs, and a fully masked row gives the mean of all values (bool mask) or NaN (``-inf``
bias) rather than raising or giving zeros.
"""

from __future__ import annotations

import math

import jax
import numpy as np

from attnprops.oracle.rules import FLOAT_DTYPES
from attnprops.oracle.rules import check_cache_append
from attnprops.oracle.rules import check_cache_instance
from attnprops.oracle.rules import check_cached_query
from attnprops.oracle.rules import kv_cache_elements
from attnprops.oracle.rules import takes_options
from attnprops.properties.subjects._concat_cache import ConcatKVCache
from attnprops.properties.subjects._concat_cache import appended

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402  (after enabling x64)

__version__ = jax.__version__

ATTNPROPS_CAPABILITIES = {
    "dtypes": ("bfloat16", "float16", "float32", "float64"),
    "validates_inputs": False,
    "fully_masked_rows": "zeros",  # nearest convention; JAX does not follow it (finding F2)
    # float16 and bfloat16: scores, softmax and P @ V in float32, the normalised weights
    # rounded to the input dtype before P @ V (_dot_product_attention_core: logits
    # promote_types(dtype, float32), "Softmax ... always carried out in fp32", probs
    # .astype(key.dtype); XLA's CPU compiler upcasts the 16-bit P @ V dot to float32,
    # measured: see the module docstring). float64 is not declared float32: F1.
    "compute_dtypes": {"float16": "float32", "bfloat16": "float32"},
    "rounds_weights": True,
    "window": "offsets",  # through JAX's own local_window_size (see local_window_size)
}

ATTNPROPS_EXPECTED_FAILURES = "jax_dot_product_attention.xfail.txt"


def _four_d_mask(mask: np.ndarray) -> np.ndarray:
    """A mask with leading size-1 axes up to 4-D (NumPy broadcasting semantics)."""
    return mask.reshape((1,) * (4 - mask.ndim) + mask.shape)


def causal_mask(query_len: int, key_len: int, query_start: int | None) -> np.ndarray:
    """Bool ``(Tq, Tk)``: key ``j`` visible to local query ``i`` iff ``j <= query_start + i``
    (``None``: ``Tk - Tq``). JAX's own ``is_causal`` is this mask with ``query_start=0``."""
    start = key_len - query_len if query_start is None else int(query_start)
    return np.arange(key_len)[None, :] <= np.arange(query_len)[:, None] + start


def _dpa_eager(query, key, value, bias, mask, scale, local_window_size=None):
    """``jax.nn.dot_product_attention`` on ``(B, T, N, H)`` arrays, op by op (float16: see
    :func:`_dpa`)."""
    return jax.nn.dot_product_attention(
        query,
        key,
        value,
        bias=bias,
        mask=mask,
        scale=scale,
        is_causal=False,
        local_window_size=local_window_size,
    )


_dpa_jit = jax.jit(_dpa_eager, static_argnames=("scale", "local_window_size"))


def _dpa(query, key, value, bias, mask, scale, local_window_size=None):
    """:func:`_dpa_eager`, jitted (one compilation per shape signature; eager dispatch
    compiles each primitive separately and is slower), but for float16 and bfloat16: for them
    JAX asks XLA for the dot algorithm ``F16_F16_F32`` / ``BF16_BF16_F32`` inside a ``try``
    that falls back to the default precision, but under ``jax.jit`` XLA's CPU compiler rejects
    it only at compile time, past the ``try`` (float16 always, bfloat16 for dots small enough
    for its elemental emitter: observation O2 in docs/findings.md). Eagerly the ``try``
    catches it, so the 16-bit dtypes run eagerly, as a caller without ``jit`` gets them."""
    call = _dpa_eager if query.dtype in (jnp.float16, jnp.bfloat16) else _dpa_jit
    return call(query, key, value, bias, mask, scale, local_window_size)


def local_window_size(window, query_len: int, key_len: int, query_start: int | None):
    """JAX's ``local_window_size`` for this project's ``window=(left, right)`` (the query at
    absolute position ``p`` sees keys ``p - left ..= p + right``; None = unbounded), or None.
    JAX's window is on local query indices (top-left: query ``i`` sees ``i - l ..= i + r``,
    ``_get_window_mask``), so with ``s`` the first query's position ``l = left - s`` and
    ``r = right + s`` (``l`` may be negative: the window starts past the query's local
    index); an unbounded side, or one past ``Tq + Tk`` (``2**63`` does not fit JAX's int64),
    is ``Tq + Tk``: past every key either way."""
    if window is None:
        return None
    start = key_len - query_len if query_start is None else int(query_start)
    far = query_len + key_len
    left, right = (far if side is None else min(int(side), far) for side in window)
    return left - start, right + start


def _attend(
    query: np.ndarray, key, value, *, attn_mask, is_causal, query_start, scale, window=None
):
    """Core of :func:`attention`; ``key``/``value`` may be NumPy or jax arrays, 4-D or 2-D."""
    query = np.asarray(query)
    two_d = query.ndim == 2
    q = query[None, None] if two_d else query
    k = key[None, None] if two_d else key
    v = value[None, None] if two_d else value
    Tq, D = q.shape[2], q.shape[3]
    Tk, Dv = k.shape[2], v.shape[3]
    mask = bias = None
    if attn_mask is not None:
        m = _four_d_mask(np.asarray(attn_mask))
        if m.dtype in FLOAT_DTYPES:  # bfloat16 (ml_dtypes) is no np.floating subtype
            bias = m  # as the caller's JAX call gets it: JAX adds it to its (float32 for
            # 16-bit) logits, then casts the sum to their dtype; a cast to the query dtype
            # first lost a float32/float64 mask's digits, and -1e5 became -inf in float16
        else:  # bool, and anything else for JAX to judge (it rejects integer masks)
            mask = m
    if is_causal:
        causal = causal_mask(Tq, Tk, query_start)[None, None]  # (1, 1, Tq, Tk)
        mask = causal if mask is None else mask & causal
    width = max(D, Dv)
    if width > D:  # JAX needs Dv == D: pad q/k with zero columns (scores unchanged)
        pad = ((0, 0), (0, 0), (0, 0), (0, width - D))
        q, k = np.pad(q, pad), jnp.pad(jnp.asarray(k), pad)
        if scale is None:
            scale = 1.0 / math.sqrt(D)  # JAX would use 1/sqrt(width)
    if width > Dv:
        v = jnp.pad(jnp.asarray(v), ((0, 0), (0, 0), (0, 0), (0, width - Dv)))
    bthd = (0, 2, 1, 3)  # (B, H, T, D) <-> (B, T, H, D)
    out = _dpa(
        jnp.transpose(jnp.asarray(q), bthd),
        jnp.transpose(jnp.asarray(k), bthd),
        jnp.transpose(jnp.asarray(v), bthd),
        None if bias is None else jnp.asarray(bias),
        None if mask is None else jnp.asarray(mask),
        None if scale is None else float(scale),
        local_window_size(window, Tq, Tk, query_start),
    )
    out = np.array(jnp.transpose(out, bthd))[..., :Dv]  # (B, Hq, Tq, Dv), a writable copy
    return out[0, 0] if two_d else out


@takes_options(only=("attn_mask", "is_causal", "query_start", "scale", "window"))
def attention(query, key, value, **options) -> np.ndarray:
    """Scaled dot-product attention through ``jax.nn.dot_product_attention``.

    Args:
        query: ``(B, Hq, Tq, D)`` or ``(Tq, D)``; bfloat16, float16, float32 or float64 NumPy
            array.
        key: ``(B, Hkv, Tk, D)`` or ``(Tk, D)``; value: ``(B, Hkv, Tk, Dv)`` or ``(Tk, Dv)``.
        attn_mask, is_causal, query_start, scale, window: the keyword options of
            :mod:`oracle.rules.options` that JAX serves (the window: JAX's own
            ``local_window_size``, :func:`local_window_size` maps the convention).

    Returns:
        ``(B, Hq, Tq, Dv)`` (or ``(Tq, Dv)``), the input dtype.

    Raises:
        Whatever JAX raises (``ValueError`` for most shape errors, ``TypeError`` for some
        dtypes); no validation of its own (declared ``validates_inputs=False``).
    """
    return _attend(query, np.asarray(key), np.asarray(value), **options)


def attention_weights(
    query, key, *, attn_mask=None, is_causal=False, query_start=None, scale=None, window=None
) -> np.ndarray:
    """Weights ``(B, Hq, Tq, Tk)`` (or ``(Tq, Tk)``): JAX's output for an identity value
    matrix. Arguments, dtype and errors as :func:`attention`."""
    key = np.asarray(key)
    Tk = key.shape[-2]
    eye = np.eye(Tk, dtype=key.dtype)
    identity = eye if key.ndim == 2 else np.broadcast_to(eye, key.shape[:2] + (Tk, Tk))
    return _attend(
        query,
        key,
        identity,
        attn_mask=attn_mask,
        is_causal=is_causal,
        query_start=query_start,
        scale=scale,
        window=window,
    )


class KVCache(ConcatKVCache):
    """A per-layer K/V cache of jax arrays, preallocated and grown by doubling, as a JAX user
    writes one (static shapes: Flax's ``decode=True`` cache is a ``max_length`` buffer written
    by ``lax.dynamic_update_slice``, the unused slots masked).

    Storage: buffers ``(B, Hkv, C, D)`` / ``(B, Hkv, C, Dv)`` of capacity ``C`` (positions),
    the first ``len(cache)`` of them written; an append past ``C`` moves to the capacity
    :func:`capacity_for` gives (a power of two, at least :data:`MIN_CAPACITY`), so a run of
    hundreds of appends compiles JAX's attention once per capacity rather than once per
    length (finding O7 in ``docs/findings.md``: a jit per length held about 6 MB each, never
    released, and a kernel-sized cache run ended in a segmentation fault).

    dtype: bfloat16, float16, float32 or float64. ``keys``/``values`` are read-only NumPy
    copies of the written positions ``(B, Hkv, T, D)`` / ``(B, Hkv, T, Dv)``; ``append`` writes
    copies into new buffers (``lax.dynamic_update_slice``; jax arrays are immutable), so the
    rollback of :func:`~properties.subjects._concat_cache.appended` holds. Sizes, rules and
    errors: :class:`~properties.subjects._concat_cache.ConcatKVCache`.
    """

    def __init__(self, batch, num_kv_heads, head_dim, value_dim=None, *, dtype=np.float64):
        super().__init__(batch, num_kv_heads, head_dim, value_dim, dtype=dtype)
        self._length = 0

    def __len__(self) -> int:
        return self._length

    def _empty(self, shape):
        return jnp.zeros(shape, self.dtype)

    def _view(self, x):
        out = np.asarray(x)[:, :, : self._length].copy()  # NumPy's slice: nothing to compile
        out.flags.writeable = False
        return out

    def append(self, key, value) -> int:
        """Write ``key`` ``(B, Hkv, Tnew, D)`` and ``value`` ``(B, Hkv, Tnew, Dv)`` at
        positions ``len(cache)`` on, moving both to a larger capacity first when they do not
        fit. Returns the length before the append. Raises as
        :meth:`ConcatKVCache.append <properties.subjects._concat_cache.ConcatKVCache.append>`
        (the cache then unchanged)."""
        key, value = check_cache_append(self, key, value)
        start, end = self._length, self._length + key.shape[2]
        keys, values = self._keys, self._values
        if end > keys.shape[2]:
            capacity = capacity_for(end)
            keys, values = _grown(keys, capacity), _grown(values, capacity)
        keys = _written(keys, jnp.asarray(key.copy()), start)
        values = _written(values, jnp.asarray(value.copy()), start)
        self._keys, self._values, self._length = keys, values, end  # all or nothing
        return start


MIN_CAPACITY = 16  # positions: the smallest buffer a KVCache holds keys in


def capacity_for(length: int) -> int:
    """The capacity of a :class:`KVCache` holding ``length`` positions: the smallest power of
    two ``>= length``, at least :data:`MIN_CAPACITY`."""
    return max(MIN_CAPACITY, 1 << (length - 1).bit_length())


@jax.jit
def _written(buffer, new, start):
    """``buffer`` ``(B, H, C, E)`` with ``new`` ``(B, H, n, E)`` written at positions
    ``start..start+n-1`` (a new array; one compilation per pair of shapes)."""
    return jax.lax.dynamic_update_slice(buffer, new, (0, 0, start, 0))


def _grown(buffer, capacity: int):
    """``buffer`` moved to a zeroed buffer of ``capacity`` positions (the same first ones)."""
    B, H, _, E = buffer.shape
    return _written(jnp.zeros((B, H, capacity, E), buffer.dtype), buffer, 0)


def _padded_mask(attn_mask, length: int, capacity: int):
    """``attn_mask`` over ``capacity`` keys: a last axis of ``length`` extended by hidden
    (bool False) or zero (float) entries, which the causal mask hides anyway (a cache's keys
    past its length are after every query); a broadcast one (last axis 1, or 0-d) as it is.

    Raises:
        ValueError for a last axis of another size: JAX would take one of ``capacity`` and
        attend through a mask over keys that do not exist (over the cache's length it would
        have refused it)."""
    if attn_mask is None:
        return None
    mask = np.asarray(attn_mask)
    if mask.ndim == 0 or mask.shape[-1] == 1:
        return attn_mask
    if mask.shape[-1] != length:
        raise ValueError(
            f"attn_mask: last axis {mask.shape[-1]}; expected 1 or the cache's length after "
            f"the append, {length}"
        )
    pad = [(0, 0)] * (mask.ndim - 1) + [(0, capacity - length)]
    return np.pad(mask, pad)  # False for bool, 0 for float


def cached_attention(
    query, key, value, cache: KVCache, *, attn_mask=None, scale=None, window=None
) -> np.ndarray:
    """Append ``key``/``value`` to ``cache``, then JAX attention over the cache's whole
    buffer (its capacity: the causal mask hides the positions not written yet) with
    ``query_start`` = the length before the append (an explicit bool mask).

    Shapes: query ``(B, Hq, Tnew, D)``, key ``(B, Hkv, Tnew, D)``, value ``(B, Hkv, Tnew, Dv)``;
    ``attn_mask`` broadcastable to ``(B, Hq, Tnew, len(cache))`` after the append ->
    ``(B, Hq, Tnew, Dv)``. Raises ValueError (oracle.rules.AttentionInputError) for a
    cache that is not a :class:`KVCache` or when query and key lengths differ, ValueError for
    an ``attn_mask`` whose last axis is neither 1 nor that length, and whatever the append or
    JAX raise; the cache is then exactly as before.
    """
    query = np.asarray(query)
    check_cache_instance(cache, KVCache)  # another object has none of its arrays to roll back
    check_cached_query(query, key, cache)
    with appended(cache, key, value) as start:
        capacity = cache._keys.shape[2]
        return _attend(
            query,
            cache._keys,
            cache._values,
            attn_mask=_padded_mask(attn_mask, len(cache), capacity),
            is_causal=True,
            query_start=start,
            scale=scale,
            window=window,
        )


def kv_cache_bytes(*, num_layers, batch, tokens, num_kv_heads, head_dim, dtype) -> int:
    """``2 * layers * batch * tokens * Hkv * head_dim * itemsize`` bytes, with the itemsize
    of ``jnp.dtype(dtype)``. Raises ValueError for a size that is not an int >= 1.
    Source: Pope et al. 2022, "Efficiently Scaling Transformer Inference"."""
    elements = kv_cache_elements(num_layers, batch, tokens, num_kv_heads, head_dim)
    return elements * jnp.dtype(dtype).itemsize
