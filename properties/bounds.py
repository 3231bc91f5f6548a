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
    return n * u / (1 - n * u)


def _four_d(x: np.ndarray) -> np.ndarray:
    return x[None, None] if x.ndim == 2 else x


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
    Hkv, Tk = key.shape[1], key.shape[2]
    group = Hq // Hkv
    scale = 1 / np.sqrt(D) if case.scale is None else case.scale
    key_rep = np.repeat(np.abs(key), group, axis=1)  # (B, Hq, Tk, D)  test-side only
    abs_qk = scale * np.abs(query) @ key_rep.swapaxes(-1, -2)  # (B, Hq, Tq, Tk)
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
        v_rep = np.abs(np.repeat(value, group, axis=1))  # (B, Hq, Tk, Dv)
        out = np.abs(_four_d(parts.output.value))
        bound_o = (
            bound_w @ v_rep
            + gamma(Tk + 2, u) * (weights + bound_w) @ v_rep
            + (u + U64) * out
            + (Tk + 2) * tiny
        )
    if case.query.ndim == 2:
        bound_w = bound_w[0, 0]
        bound_o = None if bound_o is None else bound_o[0, 0]
    return Bounds(weights=bound_w, output=bound_o)
