"""Vectorized NumPy scaled dot-product attention (the project's default subject).

Formula (Vaswani et al. 2017, "Attention Is All You Need", eq. 1)::

    scores  = scale * query @ key^T  (+ float attn_mask)       # (B, Hq, Tq, Tk)
    weights = softmax(scores masked to -inf, axis=keys)        # (B, Hq, Tq, Tk)
    output  = weights @ value                                  # (B, Hq, Tq, Dv)

Shape legend: B batch, Hq query heads, Hkv key/value heads, G = Hq // Hkv, Tq query
positions, Tk key positions, D head_dim, Dv value head dim. Query head ``h`` reads K/V head
``h // G``; K/V are never repeated to Hq (the query heads are grouped by a reshape instead).
The softmax subtracts the row maximum of the visible scores (no overflow in ``exp``) and masked
keys get weight exactly 0. float16 inputs are computed in float32 and the result is rounded
back to float16. Every rule on inputs is in :mod:`oracle.rules`; this module applies it.
"""

from __future__ import annotations

import numpy as np

from oracle.rules import AttentionProblem, check_attention_inputs, compute_dtype, raise_score_overflow


def _masked_scores(problem: AttentionProblem) -> np.ndarray:
    """Scaled scores plus float mask, ``-inf`` where not visible. ``(B, Hq, Tq, Tk)``."""
    ct = compute_dtype(problem.dtype)
    B, Hq, Tq, D = problem.query.shape
    Hkv, Tk, G = problem.num_kv_heads, problem.key.shape[2], problem.group
    scale = 1.0 / np.sqrt(D) if problem.scale is None else problem.scale
    key = problem.key.astype(ct, copy=False)[:, :, None]  # (B, Hkv, 1, Tk, D)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        # Scale the query before the product, so a dot product that only the scale brings
        # back into range does not overflow (left: partial sums beyond the range).
        query = problem.query.astype(ct, copy=False) * ct.type(scale)  # (B, Hq, Tq, D)
        query = query.reshape(B, Hkv, G, Tq, D)  # (B, Hkv, G, Tq, D)
        scores = np.matmul(query, key.swapaxes(-1, -2))  # (B, Hkv, G, Tq, Tk)
        scores = scores.reshape(B, Hq, Tq, Tk)  # (B, Hq, Tq, Tk)
        if problem.bias is not None:
            scores = scores + problem.bias.astype(ct, copy=False)
        scores = np.where(problem.visible, scores, ct.type(-np.inf))
    if not np.isfinite(scores[problem.visible]).all():
        raise_score_overflow(problem)
    return scores


def _softmax(scores: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """Softmax over the last axis with max subtraction; rows with no visible key give zeros."""
    has_key = visible.any(axis=-1, keepdims=True)  # (B, Hq, Tq, 1)
    row_max = np.where(has_key, scores.max(axis=-1, keepdims=True), 0)
    with np.errstate(invalid="ignore"):
        exp = np.exp(scores - row_max)  # exp(-inf) == 0 for hidden keys
    total = exp.sum(axis=-1, keepdims=True)
    return exp / np.where(has_key, total, 1)


def attention_weights(
    query, key, *, attn_mask=None, is_causal=False, query_start=None, scale=None
) -> np.ndarray:
    """Attention weights ``softmax(scale * query @ key^T + mask)`` along the key axis.

    Args:
        query: ``(B, Hq, Tq, D)`` or ``(Tq, D)``; float16, float32 or float64.
        key: ``(B, Hkv, Tk, D)`` or ``(Tk, D)``, same dtype, ``Hq % Hkv == 0``.
        attn_mask: ``None``; bool broadcastable to ``(B, Hq, Tq, Tk)``, True = may attend; or
            float of the same shapes added to the scaled scores (finite or ``-inf``).
        is_causal: key ``j`` visible to local query ``i`` iff ``j <= query_start + i``.
        query_start: absolute position of the first query (``None``: ``Tk - Tq``).
        scale: finite float > 0; ``None`` means ``1/sqrt(D)``.

    Returns:
        ``(B, Hq, Tq, Tk)`` (or ``(Tq, Tk)``) in the input dtype; rows sum to 1, hidden keys
        are exactly 0.

    Raises:
        oracle.rules.AttentionInputError (a ValueError) for any broken rule, including a
        query row with no visible key and scaled scores that overflow. Inputs are not
        modified. Source: Vaswani et al. 2017, eq. 1.
    """
    problem = check_attention_inputs(
        query, key, attn_mask=attn_mask, is_causal=is_causal, query_start=query_start,
        scale=scale, needs_value=False,
    )
    weights = _softmax(_masked_scores(problem), problem.visible).astype(problem.dtype)
    return weights[0, 0] if problem.two_d else weights


def attention(
    query, key, value, *, attn_mask=None, is_causal=False, query_start=None, scale=None
) -> np.ndarray:
    """Scaled dot-product attention ``softmax(scale * query @ key^T + mask) @ value``.

    Args:
        query: ``(B, Hq, Tq, D)`` or ``(Tq, D)``; float16, float32 or float64.
        key: ``(B, Hkv, Tk, D)`` or ``(Tk, D)``, same dtype, ``Hq % Hkv == 0``.
        value: ``(B, Hkv, Tk, Dv)`` or ``(Tk, Dv)``, same dtype.
        attn_mask, is_causal, query_start, scale: as in :func:`attention_weights`.

    Returns:
        ``(B, Hq, Tq, Dv)`` (or ``(Tq, Dv)``) in the input dtype (float16 is computed in
        float32).

    Raises:
        oracle.rules.AttentionInputError for any broken rule (see :mod:`oracle.rules`).
        Inputs are not modified. Source: Vaswani et al. 2017, eq. 1; GQA grouping from
        Ainslie et al. 2023.
    """
    problem = check_attention_inputs(
        query, key, value, attn_mask=attn_mask, is_causal=is_causal, query_start=query_start,
        scale=scale,
    )
    ct = compute_dtype(problem.dtype)
    B, Hq, Tq, _ = problem.query.shape
    Hkv, G, Dv = problem.num_kv_heads, problem.group, problem.value.shape[3]
    weights = _softmax(_masked_scores(problem), problem.visible)  # (B, Hq, Tq, Tk)
    grouped = weights.reshape(B, Hkv, G, Tq, -1)  # (B, Hkv, G, Tq, Tk)
    value = problem.value.astype(ct, copy=False)[:, :, None]  # (B, Hkv, 1, Tk, Dv)
    output = np.matmul(grouped, value).reshape(B, Hq, Tq, Dv).astype(problem.dtype)
    return output[0, 0] if problem.two_d else output
