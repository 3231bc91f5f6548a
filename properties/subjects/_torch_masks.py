"""Tensors and masks for the torch adapters (:mod:`torch_sdpa`, :mod:`torch_flex_attention`,
the Hugging Face subjects): NumPy arrays to tensors and back (bfloat16 bit for bit), this
project's conventions as an SDPA ``attn_mask`` (causality at ``query_start``, local windows,
packed documents, chunks, ALiBi; see :mod:`torch_sdpa`'s docstring for why each is mapped
so), a sink as one more key, and the rows' log-sum-exp from the CPU flash kernel."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from attnprops.oracle.rules import BFLOAT16
from attnprops.oracle.rules import sinks_within

__all__ = [
    "additive",
    "causal_mask",
    "cpu_lse",
    "first_position",
    "packing_mask",
    "sdpa_mask",
    "to_numpy",
    "to_tensor",
    "torch_dtype",
    "window_mask",
    "with_sink_key",
]

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
