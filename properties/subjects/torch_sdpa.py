r"""Subject: ``torch.nn.functional.scaled_dot_product_attention`` (SDPA) on the CPU.

Install torch first (``pip install torch``; from a clone, the extra ``pip install -e .[torch]`` pins a CPU build). Run:
``attnprops check --impl attnprops.properties.subjects.torch_sdpa``.

What the adapter maps, and why (every mapping was checked by ``python -m
properties.subjects.probe torch_sdpa``, see ``docs/conventions.md``):

- Layout: SDPA already takes ``(B, H, T, D)`` (any leading dims, so 2-D ``(T, D)`` works as
  is); NumPy arrays are copied into tensors and the result is copied back to NumPy.
- Mask polarity: SDPA's bool ``attn_mask`` is True = take part in attention, the same as
  this project's; a float mask is additive in both. Float masks are cast to the query's dtype
  (SDPA's documented requirement; the rounding is inside the bound's ``u |b|`` term).
- Causality: SDPA's ``is_causal=True`` is *top-left* aligned (query ``i`` sees keys
  ``0..i`` whatever ``Tk``), and SDPA refuses ``attn_mask`` together with ``is_causal``. The
  adapter therefore never passes ``is_causal``: it builds the bool mask ``j <= query_start + i``
  (``query_start=None`` meaning ``Tk - Tq``), AND-ed with the caller's mask.
- Local windows: SDPA has none (FlexAttention would express one as a ``mask_mod``). The
  adapter's ``window=(left, right)`` is AND-ed into the same bool mask (``p - left <= j <= p +
  right``, ``p = query_start + i``), so the window properties test SDPA with the masks a
  windowed model builds for it; a side past the sequence is unbounded (kept out of int64).
  Packed documents (``segment_ids``) and chunks (``chunk_size``) are AND-ed in the same way
  (FlexAttention's document and chunk ``mask_mod``\ s, as explicit masks). ALiBi
  (``alibi_slopes``) is added to the float mask: ``-slope * |p - j|`` in float64, converted
  to the query's dtype with the rest of the mask. Sinks (``sinks``, one logit per query head)
  are one more key: a zero key and a zero value appended to K and V, its float-mask column
  the head's sink (score ``scale * q . 0 + sigma_h = sigma_h``, value 0), so SDPA's softmax
  holds ``exp(sigma_h - m)`` in each denominator (:func:`with_sink_key`).
- Log-sum-exp (``return_lse=True``): SDPA returns none; the adapter takes it from
  ``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu`` (the CPU flash kernel
  SDPA dispatches to, which returns ``(output, logsumexp)``), called with the same float mask
  but without the sink key (the ``lse`` does not count the sink), K/V repeated to the query
  heads (``h // G``), 2-D inputs given two leading axes and the head dims padded with zero
  columns to one size (the kernel wants ``D == Dv``; the zeros change no score, and the
  scale is then passed explicitly). A row that sees no key gets ``-inf`` here: the kernel
  writes ``0`` there ([F5](../../docs/findings.md)), so the adapter maps its convention to
  this project's from the mask it built, as it maps the causal alignment.
- GQA: ``enable_gqa=True`` when ``Hq != Hkv`` (SDPA maps query head ``h`` to K/V head
  ``h // (Hq // Hkv)``, this project's convention).
- ``attention_weights`` is SDPA applied to an identity value matrix: ``softmax(...) @ I``
  is the weights, exactly (every other product is an exact zero), so the weights properties
  test SDPA's own softmax.
- KV cache: SDPA has none. :class:`KVCache` stores torch tensors ``(B, Hkv, T, D)`` and
  :func:`cached_attention` calls SDPA over the whole cache with ``query_start`` = the cache
  length before the append, so the cache properties exercise SDPA with offsets.

Declared (:data:`ATTNPROPS_CAPABILITIES`): SDPA does not validate its inputs the project's way
(NaN/inf pass through, shape errors are ``RuntimeError``), a fully masked query row gives
a zero output row (``fully_masked_rows="zeros"``), as in PyTorch >= 2.5, and float16 and
bfloat16 are computed in float32 with the unnormalised weights rounded to the input dtype
before the product with the values (``compute_dtypes``, ``rounds_weights``: what the error
bounds charge).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from attnprops.oracle.rules import (
    BFLOAT16,
    check_cache_append,
    check_cache_config,
    check_cached_query,
    kv_cache_elements,
    sinks_within,
    takes_options,
)

__version__ = torch.__version__
ATTNPROPS_EXPECTED_FAILURES = "torch_sdpa.xfail.txt"  # known deviations, docs/findings.md

ATTNPROPS_CAPABILITIES = {
    "dtypes": ("bfloat16", "float16", "float32", "float64"),
    "validates_inputs": False,
    "fully_masked_rows": "zeros",
    # float16 and bfloat16 are computed in float32, the exponentials rounded to the input
    # dtype before P @ V (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp: accum_t = float
    # for reduced types, _exp_reduce_sum_fusion_kernel writes exp(s - m) to the reduced-type
    # buffer; the math fallback converts reduced types to float32 on the CPU)
    "compute_dtypes": {"float16": "float32", "bfloat16": "float32"},
    "rounds_weights": True,
    "window": "offsets",  # built into the bool mask (see the module docstring)
    "segment_ids": True,  # likewise
    "chunk_size": True,  # likewise
    "alibi": True,  # a float mask
    "sinks": True,  # a zero key whose float-mask column is the sink (with_sink_key)
    "lse": True,  # from the CPU flash kernel (cpu_lse); -inf for rows without keys (F5)
}

_TORCH_DTYPES = {
    BFLOAT16: torch.bfloat16,
    np.dtype(np.float16): torch.float16,
    np.dtype(np.float32): torch.float32,
    np.dtype(np.float64): torch.float64,
}


def torch_dtype(dtype) -> torch.dtype:
    """The torch dtype of a NumPy dtype (bfloat16, float16/32/64); ``TypeError`` for any
    other."""
    try:
        return _TORCH_DTYPES[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise TypeError(f"dtype {dtype!r}: use bfloat16, float16, float32 or float64") from None


def to_tensor(x) -> torch.Tensor:
    """A tensor holding a *copy* of ``x`` (any array-like; read-only and non-contiguous
    NumPy arrays included), so nothing the caller owns is ever shared with torch. A bfloat16
    array (``ml_dtypes``', which ``torch.from_numpy`` does not know) travels as its 16 bits:
    the same format as ``torch.bfloat16``, so the values are exact."""
    array = np.array(x, copy=True)
    if array.dtype == BFLOAT16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """The tensor's values as a new NumPy array (same dtype; ``torch.bfloat16`` as
    ``ml_dtypes``' bfloat16, bit for bit)."""
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(BFLOAT16).copy()
    return t.numpy().copy()


def first_position(query_len: int, key_len: int, query_start: int | None) -> int:
    """The absolute position of the first query: ``query_start``, ``None`` meaning
    ``Tk - Tq`` (the queries are the last ``Tq`` positions: the KV-cache alignment)."""
    return key_len - query_len if query_start is None else int(query_start)


def additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A mask as an additive float mask in ``dtype``: a bool one as 0 (attend) / ``-inf``
    (hide), a float one converted."""
    if mask.dtype == torch.bool:
        return torch.where(mask, torch.tensor(0.0, dtype=dtype), float("-inf")).to(dtype)
    return mask.to(dtype)


def causal_mask(query_len: int, key_len: int, query_start: int | None) -> torch.Tensor:
    """Bool ``(Tq, Tk)``: key ``j`` visible to local query ``i`` iff ``j <= query_start + i``.

    ``query_start=None`` means ``Tk - Tq`` (the queries are the last ``Tq`` positions: the
    KV-cache alignment). PyTorch's own ``is_causal`` is this mask with ``query_start=0``.
    """
    start = first_position(query_len, key_len, query_start)
    rows = torch.arange(query_len).unsqueeze(-1)  # (Tq, 1)
    cols = torch.arange(key_len).unsqueeze(0)  # (1, Tk)
    return cols <= rows + start


def window_mask(
    query_len: int, key_len: int, query_start: int | None, window
) -> torch.Tensor | None:
    """Bool ``(Tq, Tk)``: True where the local window ``(left, right)`` lets local query ``i``
    (at position ``p = query_start + i``) see key ``j``: ``p - left <= j <= p + right``,
    either side ``None`` unbounded; ``None`` for no window. A side longer than the sequence
    is unbounded (so ``2**63`` never reaches torch's int64)."""
    if window is None:
        return None
    start = first_position(query_len, key_len, query_start)
    reach = key_len + query_len + abs(start)  # no query is farther than this from any key
    left, right = (None if side is None else min(int(side), reach) for side in window)
    offset = torch.arange(key_len).unsqueeze(0) - (torch.arange(query_len).unsqueeze(-1) + start)
    visible = torch.ones((query_len, key_len), dtype=torch.bool)
    if left is not None:
        visible &= offset >= -left
    if right is not None:
        visible &= offset <= right
    return visible


def packing_mask(
    query_len: int, key_len: int, query_start: int | None, segment_ids, chunk_size
) -> torch.Tensor | None:
    """Bool, broadcastable to ``(B, 1, Tq, Tk)``: True where query ``i`` and key ``j`` are in
    the same document (``segment_ids=(query_segments, key_segments)``, ``(B, T)`` or
    ``(T,)``) and the same chunk (``p // chunk_size == j // chunk_size``, ``p = query_start +
    i``); ``None`` when neither is given."""
    visible = None
    if segment_ids is not None:  # compared by NumPy: exact across integer dtypes, any strides
        query_ids, key_ids = (np.asarray(x) for x in segment_ids)
        same = query_ids[..., :, None] == key_ids[..., None, :]  # (B, Tq, Tk) or (Tq, Tk)
        visible = torch.from_numpy(np.ascontiguousarray(same))
        if visible.ndim == 3:
            visible = visible[:, None]
    if chunk_size is not None:
        start = first_position(query_len, key_len, query_start)
        p = torch.arange(query_len) + start
        same = torch.div(p, chunk_size, rounding_mode="floor")[:, None] == torch.div(
            torch.arange(key_len), chunk_size, rounding_mode="floor"
        )
        visible = same if visible is None else visible & same
    return visible


def sdpa_mask(
    attn_mask,
    dtype: torch.dtype,
    *,
    is_causal: bool,
    query_start,
    query_len: int,
    key_len: int,
    window=None,
    segment_ids=None,
    chunk_size=None,
    alibi_slopes=None,
    two_d: bool = False,
) -> torch.Tensor | None:
    """The ``attn_mask`` to pass to SDPA (which is then called with ``is_causal=False``).

    Args:
        attn_mask: ``None``, bool (True = may attend) or float additive, broadcastable to
            ``(B, Hq, Tq, Tk)`` (``(Tq, Tk)`` for 2-D inputs).
        dtype: the query's torch dtype (a float mask is cast to it).
        is_causal, query_start: this project's causal rule (see :func:`causal_mask`).
        query_len, key_len: ``Tq`` and ``Tk``.
        window: ``(left, right)`` or None (see :func:`window_mask`).
        segment_ids, chunk_size: packed documents and chunks, or None (:func:`packing_mask`).
        alibi_slopes: ``(Hq,)`` or ``(B, Hq)``, or None: ``-slope * |p - j|`` joins the float
            mask (a bool mask becomes 0 / ``-inf``), computed in float64, then cast to
            ``dtype``.
        two_d: the inputs are ``(T, D)``: the mask is returned as ``(Tq, Tk)`` (documents and
            ALiBi build it with leading axes of 1).

    Returns:
        ``None``, a bool tensor (True = attend) or a float tensor (``-inf`` = hide).
    """
    mask = None if attn_mask is None else to_tensor(attn_mask)
    if mask is not None and mask.ndim < 2:  # SDPA wants (..., Tq, Tk); NumPy broadcasting
        mask = mask.reshape((1,) * (2 - mask.ndim) + tuple(mask.shape))  # prepends axes
    if mask is not None and mask.is_floating_point() and alibi_slopes is None:
        mask = mask.to(dtype)  # integer masks go to SDPA as they are; ALiBi's below
    positions = window_mask(query_len, key_len, query_start, window)
    if is_causal:
        causal = causal_mask(query_len, key_len, query_start)
        positions = causal if positions is None else positions & causal
    packed = packing_mask(query_len, key_len, query_start, segment_ids, chunk_size)
    if packed is not None:
        positions = packed if positions is None else positions & packed
    if alibi_slopes is not None:  # ALiBi joins the float mask, in float64 first
        start = first_position(query_len, key_len, query_start)
        p = torch.arange(query_len, dtype=torch.float64) + start
        distance = (p[:, None] - torch.arange(key_len, dtype=torch.float64)).abs()
        slopes = torch.as_tensor(np.asarray(alibi_slopes, dtype=np.float64))
        slopes = slopes.reshape((1,) * (2 - slopes.ndim) + tuple(slopes.shape))
        bias = -slopes[:, :, None, None] * distance  # (B or 1, Hq, Tq, Tk)
        if mask is not None:  # the caller's mask as given: the sum is rounded to dtype once
            bias = bias + additive(mask, torch.float64)
        mask = bias.to(dtype)
    if positions is not None:
        if mask is None:
            mask = positions
        elif mask.dtype == torch.bool:
            mask = mask & positions
        else:
            mask = torch.where(positions, mask, torch.tensor(float("-inf"), dtype=dtype))
    if two_d and mask is not None and mask.ndim > 2:  # (T, D) inputs take a (Tq, Tk) mask
        mask = mask.reshape(mask.shape[-2:])
    return mask


def with_sink_key(mask, key, value, sinks, query_len: int):
    """The sinks (``(Hq,)``, :mod:`oracle.rules.sinks`) as one more key for SDPA: K and V get
    a zero row each (``(..., Tk + 1, D)``, ``(..., Tk + 1, Dv)``) and the mask a float column
    ``sigma_h`` (in the query's dtype; a bool mask becomes 0 / ``-inf``, no mask 0), broadcast
    to ``(B or 1, Hq, Tq, Tk + 1)`` (``(Tq, Tk + 1)`` for 2-D inputs). Returns ``(mask, key,
    value)``. SDPA takes a float mask in the query's dtype only, so a sink is rounded to it,
    and one beyond its range is clipped to it: for float16 a sink above 65504, beside
    scores that SDPA computes in float32 beyond 65504, is not expressible (the suite draws
    sinks in the query's dtype)."""
    dtype, Tk = key.dtype, key.shape[-2]
    # (Hq,), clipped to the dtype's range: a cast to inf would give NaN
    logits = to_tensor(sinks_within(sinks, float(torch.finfo(dtype).max))).to(dtype)
    Hq = logits.shape[0]
    if mask is None:
        mask = torch.zeros((query_len, Tk), dtype=dtype)
    else:
        mask = additive(mask, dtype)
    if key.ndim == 2:  # (T, D) inputs: one head
        column = logits.reshape(1, 1).expand(query_len, 1)
        mask = torch.cat([mask.reshape(query_len, Tk), column], dim=-1)
    else:
        mask = mask.reshape((1,) * (4 - mask.ndim) + tuple(mask.shape))
        mask = mask.expand(mask.shape[0], Hq, query_len, Tk)
        column = logits.reshape(1, Hq, 1, 1).expand(mask.shape[0], Hq, query_len, 1)
        mask = torch.cat([mask, column], dim=-1)
    zeros = lambda x: torch.zeros(x.shape[:-2] + (1, x.shape[-1]), dtype=dtype)  # noqa: E731
    key = torch.cat([key, zeros(key)], dim=-2)
    value = torch.cat([value, zeros(value)], dim=-2)
    return mask, key, value


def cpu_lse(query, key, value, mask, scale) -> torch.Tensor:
    """Each row's ``log sum_j exp(s_j)`` from the CPU flash kernel (module docstring):
    ``(B, Hq, Tq)`` (``(Tq,)`` for 2-D inputs), float32 for float16/float32 inputs, float64
    for float64; ``-inf`` for a row the mask (as :func:`sdpa_mask` built it, without sinks)
    leaves without a key."""
    two_d = query.ndim == 2
    if two_d:
        query, key, value = query[None, None], key[None, None], value[None, None]
    if query.shape[2] == 0 or key.shape[2] == 0:  # the kernel dies (SIGFPE) on empty axes
        wide = query.dtype == torch.float64
        lse = torch.full(query.shape[:3], float("-inf"), dtype=query.dtype if wide else None)
        return lse[0, 0] if two_d else lse
    group = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(group, dim=1), value.repeat_interleave(group, dim=1)
    D, Dv = query.shape[-1], value.shape[-1]
    if D != Dv:  # zero columns: the same scores and weights
        width = max(D, Dv)
        pad = lambda x: F.pad(x, (0, width - x.shape[-1]))  # noqa: E731
        query, key, value = pad(query), pad(key), pad(value)
        scale = 1.0 / float(np.sqrt(D)) if scale is None else scale
    B, Hq, Tq, _ = query.shape
    Tk = key.shape[-2]
    if mask is not None:
        mask = additive(mask, query.dtype)
        mask = mask.reshape((1,) * (4 - mask.ndim) + tuple(mask.shape))
        mask = mask.expand(B, Hq, Tq, Tk).contiguous()
    kernel = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    _, lse = kernel(
        query.contiguous(),
        key.contiguous(),
        value.contiguous(),
        0.0,
        False,
        attn_mask=mask,
        scale=None if scale is None else float(scale),
    )
    if mask is not None:  # the kernel's 0 for a row without keys -> -inf (F5)
        lse = torch.where(torch.isneginf(mask).all(dim=-1), float("-inf"), lse)
    return lse[0, 0] if two_d else lse


@takes_options(without=("softcap",))
def sdpa(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    *,
    return_lse=False,
    **options,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """SDPA on tensors under this project's conventions (see the module docstring).

    Shapes: query ``(B, Hq, Tq, D)`` or ``(Tq, D)``, key ``(B, Hkv, Tk, D)``, value
    ``(B, Hkv, Tk, Dv)`` -> ``(B, Hq, Tq, Dv)``; with ``return_lse`` also the rows' ``lse``
    (:func:`cpu_lse`). Whatever SDPA raises is passed on (``RuntimeError`` for most shape
    errors).
    """
    mask = sdpa_mask(
        options["attn_mask"],
        query.dtype,
        is_causal=options["is_causal"],
        query_start=options["query_start"],
        query_len=query.shape[-2],
        key_len=key.shape[-2],
        window=options["window"],
        segment_ids=options["segment_ids"],
        chunk_size=options["chunk_size"],
        alibi_slopes=options["alibi_slopes"],
        two_d=query.ndim == 2,
    )
    scale, sinks = options["scale"], options["sinks"]
    lse = cpu_lse(query, key, value, mask, scale) if return_lse else None
    if sinks is not None:
        mask, key, value = with_sink_key(mask, key, value, sinks, query.shape[-2])
    gqa = query.ndim == 4 and key.ndim == 4 and query.shape[1] != key.shape[1]
    out = F.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=mask,
        is_causal=False,
        scale=None if scale is None else float(scale),
        enable_gqa=gqa,
    )
    return (out, lse) if return_lse else out


@takes_options(without=("softcap",))
def attention(
    query,
    key,
    value,
    *,
    return_lse=False,
    **options,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Scaled dot-product attention through ``torch.nn.functional.scaled_dot_product_attention``.

    Args:
        query: ``(B, Hq, Tq, D)`` or ``(Tq, D)``; bfloat16, float16, float32 or float64 NumPy array.
        key: ``(B, Hkv, Tk, D)`` or ``(Tk, D)``, same dtype; value: ``(B, Hkv, Tk, Dv)``.
        the keyword options of :mod:`oracle.rules.options` but ``softcap`` (SDPA has no
            cap): the window, documents and chunks become an explicit mask
            (:func:`window_mask`, :func:`packing_mask`), ALiBi joins the float mask
            (:func:`sdpa_mask`), a sink is one more key (:func:`with_sink_key`).
        return_lse: also return each row's log-sum-exp (:func:`cpu_lse`).

    Returns:
        ``(B, Hq, Tq, Dv)`` (or ``(Tq, Dv)``), the input dtype; with ``return_lse`` the pair
        ``(output, lse)``.

    Raises:
        Whatever SDPA raises (mostly ``RuntimeError``); no input validation of its own
        (declared ``validates_inputs=False``). A fully masked row gives zeros.
    """
    q, k, v = to_tensor(query), to_tensor(key), to_tensor(value)
    out = sdpa(q, k, v, return_lse=return_lse, **options)
    if return_lse:
        return to_numpy(out[0]), to_numpy(out[1])
    return to_numpy(out)


def attention_weights(query, key, **options) -> np.ndarray:
    """Attention weights ``(B, Hq, Tq, Tk)`` (or ``(Tq, Tk)``), computed by SDPA.

    SDPA does not return its weights; with the identity as value matrix its output *is* the
    weights (``w @ I = w`` exactly). Arguments as :func:`attention`; same dtype and errors.
    """
    q, k = to_tensor(query), to_tensor(key)
    key_len = k.shape[-2]
    eye = torch.eye(key_len, dtype=k.dtype)  # (Tk, Tk)
    identity = eye if k.ndim == 2 else eye.expand(k.shape[0], k.shape[1], key_len, key_len)
    return to_numpy(sdpa(q, k, identity.contiguous(), **options))


class KVCache:
    """A per-layer K/V cache of torch tensors ``(B, Hkv, T, D)`` / ``(B, Hkv, T, Dv)``.

    Args:
        batch, num_kv_heads, head_dim: sizes (ints >= 1).
        value_dim: ``Dv`` (``None``: ``head_dim``).
        dtype: bfloat16, float16, float32 or float64 (NumPy dtype); appended arrays must
            match it.

    ``keys``/``values`` are read-only NumPy views of the cached tensors; ``append`` stores
    copies (``torch.cat`` allocates) and is atomic. Holds ``Hkv`` heads, never ``Hq``.

    Raises:
        oracle.rules.AttentionInputError (a ValueError) for bad sizes or a dtype other than
        float16/32/64: the rulebook's check_cache_config, as impl's cache.
    """

    def __init__(self, batch, num_kv_heads, head_dim, value_dim=None, *, dtype=np.float64):
        self.batch, self.num_kv_heads, self.head_dim, self.value_dim, self.dtype = (
            check_cache_config(batch, num_kv_heads, head_dim, value_dim, dtype)
        )
        tdtype = torch_dtype(self.dtype)
        self._keys = torch.empty((self.batch, self.num_kv_heads, 0, self.head_dim), dtype=tdtype)
        self._values = torch.empty((self.batch, self.num_kv_heads, 0, self.value_dim), dtype=tdtype)

    def __len__(self) -> int:
        return self._keys.shape[2]

    @staticmethod
    def _view(t: torch.Tensor) -> np.ndarray:
        view = (
            t.view(torch.int16).numpy().view(BFLOAT16) if t.dtype == torch.bfloat16 else t.numpy()
        )
        view.flags.writeable = False
        return view

    @property
    def keys(self) -> np.ndarray:
        """Read-only ``(B, Hkv, T, D)`` NumPy view of the cached keys."""
        return self._view(self._keys)

    @property
    def values(self) -> np.ndarray:
        """Read-only ``(B, Hkv, T, Dv)`` NumPy view of the cached values."""
        return self._view(self._values)

    def append(self, key, value) -> int:
        """Append ``key`` ``(B, Hkv, Tnew, D)`` and ``value`` ``(B, Hkv, Tnew, Dv)``.

        Returns the length before the append (the absolute position of the first new token).

        Raises:
            oracle.rules.AttentionInputError (a ValueError: shape, dtype, NaN or infinity,
            checked by the rulebook's check_cache_append); the cache is then unchanged.
        """
        key, value = check_cache_append(self, key, value)  # the library has no cache rules
        start = len(self)
        keys = torch.cat([self._keys, to_tensor(key)], dim=2)
        values = torch.cat([self._values, to_tensor(value)], dim=2)
        self._keys, self._values = keys, values  # both or neither
        return start


def cached_attention(
    query, key, value, cache: KVCache, *, attn_mask=None, scale=None, window=None, sinks=None
) -> np.ndarray:
    """Append ``key``/``value`` to ``cache``, then SDPA over the whole cache.

    Args:
        query: ``(B, Hq, Tnew, D)``, one query per appended token.
        key: ``(B, Hkv, Tnew, D)``; value: ``(B, Hkv, Tnew, Dv)``; the cache's dtype.
        cache: a :class:`KVCache` (modified in place).
        attn_mask: ``None`` or a mask broadcastable to ``(B, Hq, Tnew, T_total)``.
        scale, window, sinks: as in :func:`attention`.

    Returns:
        ``(B, Hq, Tnew, Dv)``: causal attention with ``query_start`` = the cache length before
        the append (query ``i`` sees positions ``0 .. start + i``), passed to SDPA as an
        explicit bool mask.

    Raises:
        ValueError when the query and the new keys differ in length, and whatever the append
        or SDPA raise; the cache is then exactly as before.
    """
    query = np.asarray(query)
    check_cached_query(query, key, cache)
    before = cache._keys, cache._values
    start = cache.append(key, value)
    try:
        out = sdpa(
            to_tensor(query),
            cache._keys,
            cache._values,
            attn_mask=attn_mask,
            is_causal=True,
            query_start=start,
            scale=scale,
            window=window,
            sinks=sinks,
        )
    except BaseException:
        cache._keys, cache._values = before
        raise
    return to_numpy(out)


def kv_cache_bytes(*, num_layers, batch, tokens, num_kv_heads, head_dim, dtype) -> int:
    """K/V cache payload in bytes: ``2 * layers * batch * tokens * Hkv * head_dim *
    element_size`` with torch's ``element_size`` for ``dtype`` (a NumPy dtype or its name).

    Raises ValueError for a size that is not an int >= 1, TypeError for another dtype.
    Source: Pope et al. 2022, "Efficiently Scaling Transformer Inference" (the 2 is K and V).
    """
    elements = kv_cache_elements(num_layers, batch, tokens, num_kv_heads, head_dim)
    return elements * torch.empty((), dtype=torch_dtype(dtype)).element_size()
