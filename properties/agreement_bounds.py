"""Agreement bounds: per-element bounds that need no exact values, for kernel-sized calls.

An upper bound of :func:`properties.bounds.attention_bounds`'s output bound, from per-row
maxima instead of weighted sums (the derivation is in :func:`agreement_bounds`; items 1-5 of
:mod:`properties.bounds` are what it bounds). Two computations of one exact result, each
within it, agree within twice it (item 4), so the kernel-sized structural properties compare
two subject calls, or a subject call and a float64 evaluation, without a reference.
"""

from __future__ import annotations

from typing import NamedTuple

import ml_dtypes
import numpy as np

from attnprops.properties.arithmetic import U64
from attnprops.properties.arithmetic import Arithmetic
from attnprops.properties.arithmetic import gamma
from attnprops.properties.bounds import _abs_alibi
from attnprops.properties.bounds import _abs_bias
from attnprops.properties.bounds import _four_d
from attnprops.properties.bounds import _softcap_error
from attnprops.properties.bounds import abs_scores

__all__ = ["RowMaxima", "agreement_bounds", "agreement_from", "row_maxima"]


def agreement_bounds(case, visible: np.ndarray, arithmetic: Arithmetic | None = None) -> np.ndarray:
    """Per-element bounds ``(B, Hq, Tq, Dv)`` (or ``(Tq, Dv)``) on ``|o^_c - o_c|`` that need
    no exact values: an upper bound of :func:`properties.bounds.attention_bounds`'s output bound (same
    ``arithmetic``), for kernel-sized calls whose properties compare two computations of one
    exact result (each within its bound, so they agree within twice this) without running a
    reference.

    ``visible``: bool ``(B, Hq, Tq, Tk)`` (the rulebook's visibility). Per query row, with
    ``A_j = scale sum_d |q_d k_jd|``, ``S = max_j (A_j + |b_j| + |a_j|)`` (``a_j`` ALiBi's
    bias) and ``V_c = max_j |v_jc|`` (``j`` visible; ``V_c`` over all keys, a further upper
    bound)::

        |s_j| <= A_j + |b_j| + |a_j| <= S,   |x_j| = |s_j - m| <= 2 S,   sum_j w_j |v_jc| <= V_c
        eta_j <= E = d + xi(2 (S + d), S + d, S + d) + 2 u (Tk + 1) + rho,
        d = (gamma(D + 5) + gamma_c(4)') max_j A_j + u S + us' max_j |b_j|
            + gamma_s(4) max_j |a_j| + C        (delta_j at its largest)

    (``xi``: item 2's rounding of the shifted scores and rescales,
    :meth:`~properties.arithmetic.Arithmetic.exponent_rounding`, ``4 u (S + d)`` for ``exp``,
    at the subject's own ``|s^_j| <= S + d`` and ``|x^_j| <= 2 (S + d)``; ``4u`` per
    evaluation instead of ``2u`` under ``exp2``)

    (``C``: the cap's term of item 1 at ``max_j A_j``, an upper bound of it at every ``j``;
    0 without ``softcap``; ``gamma_c(4)'``: item 1's scale term, 0 without ``parameter_dtypes`` (which also adds
    ``2 uc min(A_j, c)`` to ``C``);
    ``us'``: ``gamma_s(2)`` with ALiBi, else ``us``; a sink is one
    more key of item 5, ``|b| = |sigma_h|``, so ``S`` and ``max_j |b_j|`` take it and ``Tk``
    counts it)
        eta_j + eta_bar <= 2 E   (eta_bar = log sum_k w_k e^{eta_k} <= max_k eta_k)
        R = e^{2E} (1 + gamma(Tk + 1)) (1 + tn) - 1   (bounds bp_j / w_j of item 3)

    so the weighted-sum bound of item 3 is at most::

        [R + U64 + gamma_a(Tk + 2) (1 + R + U64) + us + U64] V_c + to + 2 Tk tp V_c

    evaluated in float64 and multiplied by ``1 + 2**-40``, which covers the rounding of this
    evaluation itself (fewer than 100 operations, each within ``2**-53`` relative; ``exp``
    within 1 ulp). Looser than the per-element bound (maxima instead of weighted sums): it
    catches wrong keys, blocks and rescalings, not last-digit errors.
    """
    return agreement_from(
        row_maxima(case, visible),
        arithmetic or Arithmetic.of(case.query.dtype),
        query_ndim=case.query.ndim,
    )


class RowMaxima(NamedTuple):
    """What :func:`agreement_bounds` reads of a call, per query row (``(B, Hq, Tq)``, and
    ``v_max`` ``(B, Hq, 1, Dv)``), whatever the arithmetic: compute it once with
    :func:`row_maxima` to bound several arithmetics of one call (:func:`agreement_from`)."""

    a_max: np.ndarray
    b_max: np.ndarray
    alibi_max: np.ndarray | float
    s_max: np.ndarray
    v_max: np.ndarray
    head_dim: int
    key_len: int
    softcap: float | None = None


def row_maxima(case, visible: np.ndarray) -> RowMaxima:
    """``max_j A_j``, ``max_j |b_j|``, ``max_j |a_j|``, ``S`` and ``V_c`` of
    :func:`agreement_bounds`."""
    value = _four_d(case.value).astype(np.float64)  # (B, Hkv, Tk, Dv)
    Hq, D = _four_d(case.query).shape[1], case.query.shape[-1]
    Hkv, Tk = value.shape[1], value.shape[2]
    with np.errstate(over="ignore", invalid="ignore"):
        a = abs_scores(case)  # A_j
        bias = _abs_bias(case)
        alibi = _abs_alibi(case)
        # every term is >= 0: a row's maximum over its visible keys, 0 for a row with none
        a_max = a.max(axis=-1, where=visible, initial=0.0)  # (B, Hq, Tq)
        zero = np.zeros_like(a_max)
        # without a float mask or ALiBi (their terms 0.0) no (B, Hq, Tq, Tk) array is built
        # for them, and S is A's maximum itself: A + 0 + 0 is A, bit for bit
        b_max, alibi_max, s_max = zero, zero, a_max
        if np.ndim(bias):
            b_max = np.broadcast_to(bias, visible.shape).max(axis=-1, where=visible, initial=0.0)
        if np.ndim(alibi):
            alibi_max = np.broadcast_to(alibi, visible.shape).max(
                axis=-1, where=visible, initial=0.0
            )
        if np.ndim(bias) or np.ndim(alibi):
            s_max = (a + bias + alibi).max(axis=-1, where=visible, initial=0.0)
    v_max = np.repeat(np.abs(value).max(axis=2), Hq // Hkv, axis=1)[:, :, None]  # (B,Hq,1,Dv)
    sinks = getattr(case, "sinks", None)
    if sinks is not None:  # one more key (item 5): A = 0, |b| = |sigma_h|, value 0
        sigma = np.abs(np.asarray(sinks, np.float64))
        sigma = np.where(np.isfinite(sigma), sigma, 0.0)[None, :, None]  # (1, Hq, 1)
        b_max, s_max, Tk = np.maximum(b_max, sigma), np.maximum(s_max, sigma), Tk + 1
    return RowMaxima(a_max, b_max, alibi_max, s_max, v_max, D, Tk, getattr(case, "softcap", None))


def agreement_from(maxima: RowMaxima, arithmetic: Arithmetic, *, query_ndim: int = 4) -> np.ndarray:
    """:func:`agreement_bounds` from a call's :func:`row_maxima` (``query_ndim`` 2: the
    bound of a 2-D call, ``(Tq, Dv)``)."""
    D, Tk = maxima.head_dim, maxima.key_len
    u, us, rho, tw, tp, to, tn = arithmetic.terms(Tk)
    tiny = float(ml_dtypes.finfo(arithmetic.compute).smallest_subnormal)
    with np.errstate(over="ignore", invalid="ignore"):
        d = (  # item 1's delta_j at its largest
            (gamma(D + 5, u) + arithmetic.scale_error()) * maxima.a_max
            + u * maxima.s_max
            + (gamma(2, us) if np.any(maxima.alibi_max) else us) * maxima.b_max
            + gamma(4, us) * maxima.alibi_max
            + _softcap_error(maxima.softcap, maxima.a_max, u, tiny, arithmetic.parameter_roundoff())
        )
        score = maxima.s_max + d  # the subject's |s^_j| <= S + d, |x^_j| <= 2 (S + d)
        xi = arithmetic.exponent_rounding(2 * score, score, score)
        e = d + xi + arithmetic.exp_roundoff() * (Tk + 1) + rho
        c = (1 + gamma(Tk + 1, u)) * (1 + tn)  # R = expm1(2E) c + (c - 1)
        c_minus_1 = np.expm1(np.log1p(gamma(Tk + 1, u)) + np.log1p(tn))
        r = np.expm1(2 * e) * c + c_minus_1
        ua = arithmetic.weighted_sum_roundoff()
        factor = r + U64 + gamma(Tk + 2, ua) * (1 + r + U64) + us + U64  # (B, Hq, Tq)
        v_max = maxima.v_max
        bound = (factor[..., None] * v_max + to + 2 * Tk * tp * v_max) * (1 + 2.0**-40)
    bound = np.where(np.isnan(bound), np.inf, bound)
    return bound[0, 0] if query_ndim == 2 else bound
