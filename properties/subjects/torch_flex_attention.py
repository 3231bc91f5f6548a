r"""Subject: PyTorch's FlexAttention, ``torch.nn.attention.flex_attention.flex_attention``, on
the CPU (eager: its unfused reference path; ``torch.compile`` is not used here).

Install torch first (``pip install torch``; from a clone, ``pip install -e .[torch]``). Run:
``attnprops check --impl attnprops.properties.subjects.torch_flex_attention``.

FlexAttention expresses each variant as a user function, the way its documentation and
attention-gym write them, and that is what this adapter passes:

- Hiding (``mask_mod(b, h, q_idx, kv_idx)``, through ``create_block_mask``): causality on
  absolute positions (``kv_idx <= query_start + q_idx``; FlexAttention's own causal example
  is top-left, ``q_idx >= kv_idx``), the local window (``p - left <= kv_idx <= p + right``),
  documents (``query_segments[b, q_idx] == key_segments[b, kv_idx]``), chunks (``p // C ==
  kv_idx // C``) and a bool ``attn_mask`` (read at ``[b, h, q_idx, kv_idx]`` of the mask
  broadcast to ``(B, Hq, Tq, Tk)``).
- Scores (``score_mod(score, b, h, q_idx, kv_idx)``, on the scaled score): the soft cap
  ``c * tanh(score / c)`` first, then a float ``attn_mask`` added, then ALiBi's ``-slope *
  |p - kv_idx|``.
- ``lse``: ``return_aux=AuxRequest(lse=True)`` (natural log; ``-inf`` for a row that sees no
  key, which FlexAttention's reference path sets itself).
- GQA: ``enable_gqa=True`` (query head ``h`` reads K/V head ``h // G``). 2-D inputs get two
  leading axes. No sinks (FlexAttention has no sink argument), no KV cache, no weights.

Declared (:data:`ATTNPROPS_CAPABILITIES`): no input validation of the project's kind; a row
that sees no key gives zeros (``fully_masked_rows="zeros"``). Arithmetic: the eager path
computes the scores and the softmax in float32 for float16 inputs and then rounds the
normalised weights to float16 for ``P @ V`` (``torch/_higher_order_ops/flex_attention.py``,
``math_attention``), which none of the declarable conventions describes, so nothing is
declared for float16 and the bounds charge float16's unit roundoff to every operation (the
conservative default).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention

__version__ = torch.__version__

ATTNPROPS_CAPABILITIES = {
    "dtypes": ("float16", "float32", "float64"),
    "validates_inputs": False,
    "fully_masked_rows": "zeros",
    "weights": False,
    "kv_cache": False,
    "window": "offsets",
    "segment_ids": True,
    "chunk_size": True,
    "alibi": True,
    "softcap": True,
    "lse": True,
}

__all__ = ["attention"]


def _tensor(x) -> torch.Tensor:
    """A tensor holding a copy of ``x`` (the caller's arrays are never shared)."""
    return torch.from_numpy(np.array(x, copy=True))


def _mask_mod(shape, *, attn_mask, is_causal, start, window, segment_ids, chunk_size):
    """The ``mask_mod`` of every rule that hides keys (module docstring), or None when none
    hides any. ``shape``: ``(B, Hq, Tq, Tk)``."""
    B, Hq, Tq, Tk = shape
    rules = []
    if attn_mask is not None and attn_mask.dtype == np.bool_:
        full = _tensor(np.broadcast_to(attn_mask, shape))
        rules.append(lambda b, h, i, j: full[b, h, i, j])
    if is_causal:
        rules.append(lambda b, h, i, j: j <= i + start)
    if window is not None:
        reach = Tq + Tk + abs(start)  # a longer side reaches every key (and fits an int64)
        left, right = (None if side is None else min(int(side), reach) for side in window)
        if left is not None:
            rules.append(lambda b, h, i, j: j >= i + start - left)
        if right is not None:
            rules.append(lambda b, h, i, j: j <= i + start + right)
    if segment_ids is not None:
        query_ids, key_ids = (np.asarray(x) for x in segment_ids)
        same = query_ids[..., :, None] == key_ids[..., None, :]  # (B or 1, Tq, Tk) or (Tq, Tk)
        same = _tensor(np.broadcast_to(same.reshape((-1, Tq, Tk)), (B, Tq, Tk)))
        rules.append(lambda b, h, i, j: same[b, i, j])
    if chunk_size is not None:
        C = int(chunk_size)
        rules.append(lambda b, h, i, j: torch.div(i + start, C, rounding_mode="floor") == j // C)
    if not rules:
        return None

    def mask_mod(b, h, i, j):
        visible = rules[0](b, h, i, j)
        for rule in rules[1:]:
            visible = visible & rule(b, h, i, j)
        return visible

    return mask_mod


def _score_mod(shape, *, attn_mask, start, alibi_slopes, softcap):
    """The ``score_mod`` of the cap, a float mask and ALiBi, in that order; None without."""
    B, Hq, Tq, Tk = shape
    bias = None
    if attn_mask is not None and attn_mask.dtype != np.bool_:
        bias = _tensor(np.broadcast_to(attn_mask, shape))
    slopes = None
    if alibi_slopes is not None:
        slopes = np.asarray(alibi_slopes, dtype=np.float64).reshape(-1, Hq)
        slopes = _tensor(np.broadcast_to(slopes, (B, Hq)))
    if bias is None and slopes is None and softcap is None:
        return None

    def score_mod(score, b, h, i, j):
        if softcap is not None:
            score = softcap * torch.tanh(score / softcap)
        if bias is not None:
            score = score + bias[b, h, i, j].to(score.dtype)
        if slopes is not None:
            score = score - slopes[b, h].to(score.dtype) * (i + start - j).abs().to(score.dtype)
        return score

    return score_mod


def attention(
    query,
    key,
    value,
    *,
    attn_mask=None,
    is_causal=False,
    query_start=None,
    scale=None,
    window=None,
    segment_ids=None,
    chunk_size=None,
    alibi_slopes=None,
    softcap=None,
    return_lse=False,
):
    """Attention through FlexAttention (module docstring), this project's conventions.

    Args:
        query ``(B, Hq, Tq, D)`` or ``(Tq, D)``; key ``(B, Hkv, Tk, D)``; value ``(B, Hkv, Tk,
        Dv)``: float16/32/64 NumPy arrays of one dtype. ``attn_mask``, ``is_causal``,
        ``query_start``, ``scale``, ``window``, ``segment_ids``, ``chunk_size``,
        ``alibi_slopes``, ``softcap`` as in :func:`impl.attention`.
        return_lse: also return each row's log-sum-exp ``(B, Hq, Tq)`` (``(Tq,)``).

    Returns:
        The output in the input dtype (``(output, lse)`` with ``return_lse``; ``lse`` in
        float32 for float16/32 inputs, float64 for float64).

    Raises:
        Whatever FlexAttention raises; no validation of its own (``validates_inputs=False``).
    """
    two_d = np.ndim(query) == 2
    q, k, v = (_tensor(x) for x in (query, key, value))
    if two_d:
        q, k, v = q[None, None], k[None, None], v[None, None]
    B, Hq, Tq, _ = q.shape
    Tk = k.shape[2]
    shape = (B, Hq, Tq, Tk)
    start = Tk - Tq if query_start is None else int(query_start)
    mask = None if attn_mask is None else np.asarray(attn_mask)
    if mask is not None and two_d:
        mask = mask.reshape((1, 1) + mask.shape[-2:]) if mask.ndim >= 2 else mask
    mask_mod = _mask_mod(
        shape,
        attn_mask=mask,
        is_causal=is_causal,
        start=start,
        window=window,
        segment_ids=segment_ids,
        chunk_size=chunk_size,
    )
    score_mod = _score_mod(
        shape, attn_mask=mask, start=start, alibi_slopes=alibi_slopes, softcap=softcap
    )
    with warnings.catch_warnings():  # "called without torch.compile()": the eager path, chosen
        warnings.simplefilter("ignore", UserWarning)
        block_mask = None
        if mask_mod is not None:
            block_mask = create_block_mask(mask_mod, B, Hq, Tq, Tk, device="cpu")
        out, aux = flex_attention(
            q,
            k,
            v,
            score_mod=score_mod,
            block_mask=block_mask,
            scale=None if scale is None else float(scale),
            enable_gqa=q.shape[1] != k.shape[1],
            return_aux=AuxRequest(lse=True),
        )
    out, lse = out.detach().numpy().copy(), aux.lse.detach().numpy().copy()
    if two_d:
        out, lse = out[0, 0], lse[0, 0]
    return (out, lse) if return_lse else out
