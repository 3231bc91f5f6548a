"""Per-element forward error bounds for attention, computed from the oracle's values.

Notation for one query row: exact scaled scores ``s_j`` (``-inf`` where hidden), row maximum
``m``, shifted scores ``x_j = s_j - m``, exact weights ``w_j``, values ``v_j``, ``u`` the unit
roundoff of the subject's dtype (``eps / 2``: 2**-53 float64, 2**-24 float32, 2**-11
float16), ``gamma(n) = n u / (1 - n u)``, ``tiny`` the dtype's smallest subnormal.

1. Scores (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., ch. 3,
   eq. 3.5: ``|fl(a.b) - a.b| <= gamma(n) |a|.|b|``). The ``D`` products and sums, the
   rounded default scale ``1/sqrt(D)`` (sqrt and divide), the scale multiplication (or a
   scaling of q and k by sqrt(scale) each, as PyTorch does) take at most ``D + 5`` roundings::

       delta_j = gamma(D + 5) * scale * sum_d |q_d k_jd|  +  u (|s_j| + |b_j|)

   (the last term: adding the float mask ``b_j`` and converting it to the compute dtype).
2. Softmax (Blanchard, Higham & Higham 2021, "Accurately computing the log-sum-exp and
   softmax functions", IMA J. Numer. Anal. 41(4)). Computing ``exp(x_j)`` from perturbed
   scores perturbs each exponent by ``eta_j = delta_j + 2u|x_j| + 2u(Tk + 1)``: the score
   error, the rounding of the subtraction and of a running-max rescale in blocked (online)
   softmax, and ``exp``'s own error of at most 1 ulp per evaluation (and per rescale). Since
   ``w_j = e^{x_j} / sum_k e^{x_k}``, a perturbation ``eta`` gives
   ``w~_j / w_j = e^{eta_j} / sum_k w_k e^{eta_k}``, which lies in
   ``[e^{-(eta_j + eta_bar)}, e^{eta_j + eta_bar}]`` with
   ``eta_bar = log(sum_k w_k e^{eta_k})`` (Jensen for the lower side). The sum and the
   division add ``gamma(Tk + 1)``, rounding to the output dtype ``u``::

       |w^_j - w_j| <= w_j (e^{eta_j + eta_bar} (1 + gamma(Tk + 1)) (1 + u) - 1) + (Tk + 2) tiny

   Hidden keys: bound 0 (their weight must be exactly 0).
3. Weighted sum (Higham eq. 3.5 again, with the perturbed weights)::

       |o^_c - o_c| <= sum_j bw_j |v_jc| + gamma(Tk + 2) sum_j (w_j + bw_j) |v_jc|
                       + u |o_c| + (Tk + 2) tiny

Every bound also carries ``2**-53 * |exact|`` for the oracle's own rounding to float64. The
bounds are first-order tight up to small constant factors: a float64 result scaled by
``1 + 1e-10`` fails them whenever ``|o|`` is not tiny next to ``sum_j w_j |v_j|``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

U64 = 2.0**-53


class Bounds(NamedTuple):
    """Per-element absolute bounds, shaped like the oracle's weights and output."""

    weights: np.ndarray  # (B, Hq, Tq, Tk) or (Tq, Tk)
    output: np.ndarray | None  # (B, Hq, Tq, Dv) or (Tq, Dv)


def unit_roundoff(dtype) -> float:
    return float(np.finfo(dtype).eps) / 2


def gamma(n: int, u: float) -> float:
    """Higham's ``gamma_n = n u / (1 - n u)``, defined for ``n u < 1``; ``inf`` beyond (no
    accuracy can be demanded of ``n`` roundings: float16's ``u = 2**-11`` at ``n >= 2048``)."""
    return n * u / (1 - n * u) if n * u < 1 else np.inf


def _four_d(x: np.ndarray) -> np.ndarray:
    return x[None, None] if x.ndim == 2 else x


def _grouped_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` with ``a`` ``(B, Hq, m, k)`` and ``b`` ``(B, Hkv, k, n)``: query head ``h``
    takes K/V head ``h // (Hq // Hkv)``, without repeating ``b`` (memory at kernel sizes)."""
    B, Hq, m, k = a.shape
    Hkv = b.shape[1]
    out = np.matmul(a.reshape(B, Hkv, Hq // Hkv, m, k), b[:, :, None])
    return out.reshape(B, Hq, m, b.shape[-1])


def attention_bounds(case, parts) -> Bounds:
    """Bounds for ``case`` (an :class:`~properties.strategies.AttentionCase`-like object with
    ``query``, ``key``, ``value``, ``attn_mask``, ``scale``) given the oracle's ``parts``
    (:class:`oracle.OracleParts`). The subject's dtype is ``case.query.dtype``."""
    dtype = case.query.dtype
    u = unit_roundoff(dtype)
    tiny = float(np.finfo(dtype).smallest_subnormal)
    query = _four_d(case.query).astype(np.float64)  # (B, Hq, Tq, D)
    key = _four_d(case.key).astype(np.float64)  # (B, Hkv, Tk, D)
    value = None if case.value is None else _four_d(case.value).astype(np.float64)
    B, Hq, Tq, D = query.shape
    Tk = key.shape[2]
    scale = 1 / np.sqrt(D) if case.scale is None else case.scale
    abs_qk = _grouped_matmul(scale * np.abs(query), np.abs(key).swapaxes(-1, -2))  # (B,Hq,Tq,Tk)
    scores = _four_d(parts.scores.value)
    weights = _four_d(parts.weights.value)
    visible = np.isfinite(scores)
    bias = 0.0
    if case.attn_mask is not None and case.attn_mask.dtype != np.bool_:
        mask = case.attn_mask.astype(np.float64)
        bias = np.where(np.isfinite(mask), np.abs(mask), 0.0)
        bias = np.broadcast_to(bias, (B, Hq, Tq, Tk))
    with np.errstate(invalid="ignore", over="ignore"):
        finite_scores = np.where(visible, scores, 0.0)
        row_max = np.where(visible, scores, -np.inf).max(axis=-1, keepdims=True)
        row_max = np.where(np.isfinite(row_max), row_max, 0.0)
        shifted = np.where(visible, scores - row_max, 0.0)
        delta = gamma(D + 5, u) * abs_qk + u * (np.abs(finite_scores) + bias)
        eta = np.where(visible, delta + 2 * u * np.abs(shifted) + 2 * u * (Tk + 1), 0.0)
        positive = weights > 0  # 0 * inf must count as 0 where eta is enormous
        eta_bar = np.log1p(np.where(positive, weights * np.expm1(eta), 0.0).sum(axis=-1, keepdims=True))
        ratio = np.exp(eta + eta_bar) * (1 + gamma(Tk + 1, u)) * (1 + u) - 1
        bound_w = np.where(positive, weights * ratio, 0.0) + (Tk + 2) * tiny + U64 * weights
    # A weight lies in [0, 1]: where the first-order bound exceeds 1 (float16 with huge
    # scores), the property can only demand a weight, not an accurate one.
    bound_w = np.where(visible, np.minimum(bound_w, 1.0), 0.0)
    bound_o = None
    if value is not None:
        abs_v = np.abs(value)  # (B, Hkv, Tk, Dv)
        out = np.abs(_four_d(parts.output.value))
        with np.errstate(invalid="ignore"):  # inf * 0 where gamma is inf: no bound
            bound_o = (
                _grouped_matmul(bound_w, abs_v)
                + gamma(Tk + 2, u) * _grouped_matmul(weights + bound_w, abs_v)
                + (u + U64) * out
                + (Tk + 2) * tiny
            )
        bound_o = np.where(np.isnan(bound_o), np.inf, bound_o)
    if case.query.ndim == 2:
        bound_w = bound_w[0, 0]
        bound_o = None if bound_o is None else bound_o[0, 0]
    return Bounds(weights=bound_w, output=bound_o)


def agreement_bounds(case, visible: np.ndarray) -> np.ndarray:
    """Per-element bounds ``(B, Hq, Tq, Dv)`` (or ``(Tq, Dv)``) on ``|o^_c - o_c|`` that need
    no exact values: an upper bound of :func:`attention_bounds`'s output bound, for kernel-sized
    calls whose properties compare two computations of one exact result (each within its bound,
    so they agree within twice this) without running a reference.

    ``visible``: bool ``(B, Hq, Tq, Tk)`` (the rulebook's visibility). Per query row, with
    ``A_j = scale sum_d |q_d k_jd|``, ``S = max_j (A_j + |b_j|)`` and ``V_c = max_j |v_jc|``
    (``j`` visible; ``V_c`` over all keys, a further upper bound)::

        |s_j| <= A_j + |b_j| <= S,   |x_j| = |s_j - m| <= 2 S,   sum_j w_j |v_jc| <= V_c
        eta_j <= E = gamma(D + 5) max_j A_j + u (S + max_j |b_j|) + 4 u S + 2 u (Tk + 1)
        eta_j + eta_bar <= 2 E   (eta_bar = log sum_k w_k e^{eta_k} <= max_k eta_k)
        R = e^{2E} (1 + gamma(Tk + 1)) (1 + u) - 1    (bounds the ratio of item 2 above)

    so the weighted-sum bound of item 3 is at most::

        [R + U64 + gamma(Tk + 2) (1 + R + U64) + u + U64] V_c + (Tk + 2) tiny (1 + 2 Tk V_c)

    evaluated in float64 and multiplied by ``1 + 2**-40``, which covers the rounding of this
    evaluation itself (fewer than 100 operations, each within ``2**-53`` relative; ``exp``
    within 1 ulp). Looser than the per-element bound (maxima instead of weighted sums): it
    catches wrong keys, blocks and rescalings, not last-digit errors.
    """
    dtype = case.query.dtype
    u = unit_roundoff(dtype)
    tiny = float(np.finfo(dtype).smallest_subnormal)
    query = _four_d(case.query).astype(np.float64)  # (B, Hq, Tq, D)
    key = _four_d(case.key).astype(np.float64)  # (B, Hkv, Tk, D)
    value = _four_d(case.value).astype(np.float64)  # (B, Hkv, Tk, Dv)
    B, Hq, Tq, D = query.shape
    Hkv, Tk = key.shape[1], key.shape[2]
    group = Hq // Hkv
    scale = 1 / np.sqrt(D) if case.scale is None else case.scale
    with np.errstate(over="ignore", invalid="ignore"):
        a = _grouped_matmul(scale * np.abs(query), np.abs(key).swapaxes(-1, -2))  # A_j
        bias = np.zeros(1)
        if case.attn_mask is not None and case.attn_mask.dtype != np.bool_:
            mask = case.attn_mask.astype(np.float64)
            bias = np.where(np.isfinite(mask), np.abs(mask), 0.0)
            bias = _four_d(bias) if bias.ndim == 2 else bias
        a_max = np.where(visible, a, 0.0).max(axis=-1)  # (B, Hq, Tq)
        b_max = np.broadcast_to(np.where(visible, bias, 0.0), visible.shape).max(axis=-1)
        s_max = np.where(visible, a + bias, 0.0).max(axis=-1)
        e = gamma(D + 5, u) * a_max + u * (s_max + b_max) + 4 * u * s_max + 2 * u * (Tk + 1)
        r = np.expm1(2 * e) * (1 + gamma(Tk + 1, u)) * (1 + u) + gamma(Tk + 1, u) * (1 + u) + u
        factor = r + U64 + gamma(Tk + 2, u) * (1 + r + U64) + u + U64  # (B, Hq, Tq)
        v_max = np.repeat(np.abs(value).max(axis=2), group, axis=1)[:, :, None]  # (B,Hq,1,Dv)
        bound = (factor[..., None] * v_max
                 + (Tk + 2) * tiny * (1 + 2 * Tk * v_max)) * (1 + 2.0**-40)
    bound = np.where(np.isnan(bound), np.inf, bound)
    return bound[0, 0] if case.query.ndim == 2 else bound
