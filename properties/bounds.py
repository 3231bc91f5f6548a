"""Per-element forward error bounds for attention, computed from the oracle's values.

Notation for one query row: exact scaled scores ``s_j`` (``-inf`` where hidden), row maximum
``m``, shifted scores ``x_j = s_j - m``, exact weights ``w_j``, values ``v_j``, ``gamma(n) =
n u / (1 - n u)``. Two unit roundoffs (``eps / 2``: 2**-53 float64, 2**-24 float32, 2**-11
float16, 2**-8 bfloat16), from the subject's declared :class:`Arithmetic`: ``u`` of the
*compute* dtype, in which products, sums, ``exp`` and divisions round, ``ua`` of the dtype
the weighted sum ``P V`` accumulates in (the compute dtype unless declared otherwise,
``accumulate_dtypes``), and ``us`` of the *storage* dtype (the inputs' and the result's), to
which the float mask is converted and the results are rounded; ``tiny``, ``tinya`` and
``tinys`` their smallest subnormals. A subject that computes float16 in float32
(impl, PyTorch's CPU kernels, FlashAttention) declares it (``compute_dtypes``, see
:mod:`properties.subject`); undeclared, every operation is charged the storage dtype's ``u``
(``u = us``), which at float16 and a few hundred keys demands next to nothing.

1. Scores (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., ch. 3,
   eq. 3.5: ``|fl(a.b) - a.b| <= gamma(n) |a|.|b|``). The ``D`` products and sums, the
   rounded default scale ``1/sqrt(D)`` (sqrt and divide), the scale multiplication (or a
   scaling of q and k by sqrt(scale) each, as PyTorch does) take at most ``D + 5`` roundings::

       delta_j = gamma(D + 5) * scale * sum_d |q_d k_jd|  +  u |s_j|  +  us |b_j|
                 +  gamma_s(4) |a_j|  [+ gamma_c(4) * scale * sum_d |q_d k_jd|]

   (``u |s_j|`` and ``us |b_j|``: adding the float mask ``b_j``, and converting it to the
   storage dtype; ``a_j = -slope |p - j|``, ALiBi's bias when the call has one: the distance,
   the slope, their product and its conversion to the storage dtype, as a subject that
   builds it as a float mask does, are at most four roundings of at most ``us`` relative
   each, ``gamma_s`` being ``gamma`` with ``us``; its addition is in ``u |s_j|``, ``s_j``
   the score with both biases). With ALiBi the mask's term is ``gamma_s(2) |b_j|``: a
   subject that forms ``a_j + b_j`` as one float mask rounds ``b_j`` twice (the sum, in a
   dtype at least as precise as the storage one, and its conversion), as ``torch_sdpa``
   does (in float64, then to the query's dtype). The bracketed term is for a subject that
   declares ``parameter_dtypes`` (the ONNX ``Attention`` op: the scale a FLOAT attribute,
   its ``Sqrt`` in float, the root cast to the inputs' type and multiplied into q and k):
   with ``uc`` that dtype's unit roundoff, an explicit scale becomes ``fl(s) = s (1 +
   d0)``, its root ``sqrt(fl(s)) (1 + d1)``, whose square is ``s (1 + d0) (1 + d1)^2``; the
   default ``1/sqrt(D)`` in that dtype is ``(1 + d2) / (1 + d1)`` off before its root, so
   the effective scale is ``s (1 + theta)`` with ``|theta| <= gamma_c(4)`` (Higham lemma
   3.1), an error of at most ``gamma_c(4) scale sum_d |q_d k_jd|`` in ``s_j`` (the casts and
   products in the compute dtype stay in the ``D + 5`` roundings). It holds while the
   scale and its root are normal numbers of that dtype; a scale past its range (``1e-300``
   or ``1e300`` in float32) is no rounding but another scale, and the subject fails, as it
   should. With ``softcap=c`` the scaled score ``s0_j`` becomes
   ``t_j = c tanh(s0_j / c)`` before the biases, which adds::

       u min(A_j, c / 2)  +  (5 u + 4 u^2) min(A_j, c)  +  2 tiny,     A_j = scale sum_d |q_d k_jd|

   The cap's derivative ``sech^2`` is at most 1, so the dot-product error above passes
   through it undiminished at worst; rounding ``s0_j / c`` moves the argument by at most
   ``u |s0_j| / c``, and ``c sech^2(y) u |y| <= u min(|s0_j|, 0.448 c)`` (``|y| sech^2(y)``
   peaks at 0.4477, near ``y = 0.772``); ``tanh`` is taken to be within 2 ulp, at most
   ``4 u`` relative (glibc's documented maximum for ``tanh`` on x86_64; measured here over
   20,000 random arguments: NumPy float32 1.35 ulp, float64 1.0 ulp), plus ``tiny`` per ulp
   below the normal range; multiplying by ``c`` rounds once more, and ``|t_j| <= min(|s0_j|,
   c) <= min(A_j, c)``. Under ``parameter_dtypes`` the cap itself is ``c' = c (1 + d)``,
   ``|d| <= uc``; ``dt/dc = tanh(y) - y sech^2(y)`` (``y = s0 / c``) lies in ``[0, min(1,
   |y|))`` (it is 0 at 0 with derivative ``2 y tanh(y) sech^2(y) < 1``), so ``|t(c') - t(c)|
   <= uc c min(1, |s0| / min(c, c')) <= 2 uc min(A_j, c)``, one more term (a cap that is
   normal in that dtype, as for the scale).
2. Softmax (Blanchard, Higham & Higham 2021, "Accurately computing the log-sum-exp and
   softmax functions", IMA J. Numer. Anal. 41(4)). Computing ``exp(x_j)`` from perturbed
   scores perturbs each exponent by ``eta_j = delta_j + xi_j + 2u(Tk + 1) + rho``: the
   score error; ``xi_j = 2u |x^_j|``, the rounding of the subtraction and of a running-max
   rescale in blocked (online) softmax, ``|x^_j| <= |x_j| + delta_j + max_k delta_k`` the
   subject's own shifted score (its maximum may be another key's); ``exp``'s own error of
   at most 1 ulp per evaluation (and per rescale); and ``rho = us / (1 - us)`` when the
   subject declares ``rounds_weights`` (the unnormalised
   weights ``exp(x_j)``, at most 1, rounded to the storage dtype before the weighted sum, as
   FlashAttention does with ``P``; ``|log(1 + d)| <= rho`` for ``|d| <= us``), else 0. A
   subject that declares ``exp2`` (FlashAttention's ``exp2(t_j c - t_m c)``, ``c = scale log2
   e`` rounded once, FMA or not; xFormers' memory-efficient kernel likewise) is charged
   ``xi_j = (gamma(3) + gamma(4)) |x^_j| + (1 + gamma(3)) u (|s^_j| + max_k |s^_k|)``
   (derived in :meth:`properties.arithmetic.Arithmetic.exponent_rounding`; ``|s^_j| <= |s_j|
   + delta_j``) and ``4u`` per ``exp2`` (2 ulps) instead of ``2u``. Since
   ``w_j = e^{x_j} / sum_k e^{x_k}``, a perturbation ``eta`` gives
   ``w~_j / w_j = e^{eta_j} / sum_k w_k e^{eta_k}``, which lies in
   ``[e^{-(eta_j + eta_bar)}, e^{eta_j + eta_bar}]`` with
   ``eta_bar = log(sum_k w_k e^{eta_k})`` (Jensen for the lower side). The sum and the
   division add ``gamma(Tk + 1)``, rounding the weight to the storage dtype ``us``::

       |w^_j - w_j| <= w_j (e^{eta_j + eta_bar} (1 + gamma(Tk + 1)) (1 + us) (1 + Tk tinys') - 1)
                       + tw,    tw = (Tk + 2) tiny + tinys [u != us] + tinys [rounds_weights]

   (``tinys' = tinys`` under ``rounds_weights``, else 0: a rounded ``exp(x_j)`` may flush to
   zero, an absolute error of at most ``tinys`` in it and, as the sum is at least 1, at most
   ``Tk tinys`` relative in the normaliser). Hidden keys: bound 0 (their weight must be
   exactly 0).
3. Weighted sum (Higham eq. 3.5 again, with the perturbed weights). The weights it sums are
   the subject's internal ones, not rounded to the storage dtype (unless ``rounds_weights``,
   already in ``eta``): their bound ``bp_j`` is ``bw_j`` without the factor ``(1 + us)`` and
   with ``tp = (Tk + 2) tiny + tinys [rounds_weights]`` for ``tw``::

       |o^_c - o_c| <= sum_j bp_j |v_jc| + gamma_a(Tk + 2) sum_j (w_j + bp_j) |v_jc|
                       + us |o_c| + to,    to = (Tk + 2) tinya' + tinys [u != us]

   (``gamma_a(Tk + 2)``: ``gamma`` with ``max(u, ua)``, for the ``Tk`` products and sums in
   the accumulation dtype and the division by the sum, of blocked softmax too, in at most
   the compute dtype's ``u``; ``tinya' = max(tiny, tinya)``; ``us |o_c|`` the final
   rounding, which every subject owes: its result is in the storage dtype, which the
   structure properties check). A subject that accumulates ``P V`` in bfloat16 declares
   ``ua = 2**-8``, and ``gamma_a(Tk + 2)`` is then infinite from 254 keys on (no
   worst-case bound: Higham's ``gamma_n`` needs ``n ua < 1``); the properties demand
   nothing of such a row rather than a fudged tolerance. A probabilistic bound was
   considered and not built (Higham & Mary 2019, "A new approach to probabilistic rounding
   error analysis", SIAM J. Sci. Comput. 41(5), thm. 2.4, and its martingale form:
   ``lambda sqrt(n) ua`` to first order, failing with probability at most ``2
   exp(-lambda^2 / 2)``). It says little here: at failure probability ``1e-6`` (``lambda =
   5.39``) and ``ua = 2**-8`` it is 0.34 relative at 256 keys and 0.67 at 1024. And its
   hypothesis, rounding errors independent with mean zero, fails for this very sum: the
   weights are positive, and once the running sum's half ulp passes them every addition
   rounds the same way (stagnation). A correct bfloat16 accumulator of 1024 tied keys with
   values 1 returns 0.25, a relative error of 0.75, outside that bound (meta test
   ``test_a_probabilistic_bound_would_false_alarm_on_a_correct_bfloat16_accumulator``): the
   bound would raise false alarms on a subject that does what it declares. A subject that declares float32 accumulation and accumulates in bfloat16 is
   held to ``gamma(Tk + 2)`` at ``2**-24`` and fails (mutant
   ``bfloat16_weighted_sum_accumulated_in_bfloat16``).

Every bound also carries ``2**-53 * |exact|`` for the oracle's own rounding to float64. With
``u = us`` (one dtype throughout) the terms in brackets vanish. The bounds are first-order
tight up to small constant factors: a float64 result scaled by ``1 + 1e-10`` fails them
whenever ``|o|`` is not tiny next to ``sum_j w_j |v_j|``.

4. Two computations of one exact result (a metamorphic law: GQA against K/V repeated,
   permuted keys, a mask against its expansion, a chunk against rows of the full call).
   The subject's results ``a`` and ``b`` of calls whose exact outputs are the same ``o``
   satisfy ``|a - o| <= beta_a`` and ``|b - o| <= beta_b`` (each its own bound of item 3),
   so by the triangle inequality ``|a - b| <= beta_a + beta_b`` (:func:`two_computations`);
   where both calls have the same bound (the same exact parts, the same sums of magnitudes,
   the same lengths, as for repeated K/V or permuted keys) that is ``2 beta``. No reference
   value enters the comparison, only the bounds.

5. Sinks (:mod:`oracle.rules.sinks`). A sink ``sigma_h`` is, in items 1-3, one more key of
   every row of head ``h``: ``A = 0`` (no dot product), its score ``sigma_h`` charged as a
   float-mask entry (``us |sigma_h|``: a subject may convert it to the storage dtype, as one
   that passes it in a float mask does), no ALiBi, value 0 (it adds no term to the weighted
   sum), weight ``w_sigma = 1 - sum_j w_j``, and ``Tk`` counts it. That is the computation:
   the denominator gets one more term ``exp(sigma_h - m)`` (a subtraction, an ``exp``, one
   more addition), and a blocked subject folds it in as one more rescale. A sink of ``-inf``
   is a hidden key (bound 0, as no sink).

6. Log-sum-exp, ``lse = log sum_j exp(s_j)`` over the visible keys (the sink not counted),
   computed as ``m^ + log sum_j exp(s^_j - m^)`` with ``m^`` the row's largest computed score
   (Blanchard, Higham & Higham 2021, alg. 2.1; a blocked subject's final running maximum).
   With the computed exponentials ``exp(x_j + eta'_j)``, ``|eta'_j| <= eta_j`` (item 2),
   ``log sum_j exp(s_j + eta'_j) - lse = log sum_j w_j e^{eta'_j}`` lies within
   ``max_j eta_j`` of 0 (``w_j`` the weights without the sink; the maximum, not item 2's
   weighted ``eta_bar``, because with a dominant sink the weights the oracle returns can all
   be 0). The sum rounds by at most ``gamma(Tk + 1)`` relative, ``|log(1 + t)| <=
   -log(1 - gamma(Tk + 1))``; ``log`` of a sum in ``[1, Tk (1 + gamma)]`` is within 1 ulp,
   ``2 u (log Tk + 1)``; adding ``m^`` rounds by ``u |lse|``, and a subject that stores
   ``lse`` in the storage dtype (when it computes in a wider one) by ``us |lse|`` more::

       |lse^ - lse| <= max_j eta_j - log(1 - gamma(Tk + 1)) + 2 u (log Tk + 1)
                       + (u + us [u != us] + 2**-53) |lse|

   evaluated in float64, times ``1 + 2**-40`` (:func:`lse_bounds`). A row that sees no key
   has ``lse = -inf``, exactly.

Item 7, the fp8 round trip of a quantized cache, is in :mod:`properties.quantization_bounds`.
"""

from __future__ import annotations

from typing import NamedTuple

import ml_dtypes
import numpy as np

from attnprops.oracle.rules import alibi_bias
from attnprops.oracle.rules import check_alibi_slopes
from attnprops.properties.arithmetic import U64
from attnprops.properties.arithmetic import Arithmetic
from attnprops.properties.arithmetic import gamma


class Bounds(NamedTuple):
    """Per-element absolute bounds, shaped like the oracle's weights and output."""

    weights: np.ndarray  # (B, Hq, Tq, Tk) or (Tq, Tk)
    output: np.ndarray | None  # (B, Hq, Tq, Dv) or (Tq, Dv)


def two_computations(bound: np.ndarray, other: np.ndarray | None = None) -> np.ndarray:
    """The bound on ``|a - b|`` for two computations ``a``, ``b`` of one exact result,
    within ``bound`` and ``other`` of it (``other`` omitted: the same bound for both, so
    ``2 * bound``): item 4 of the module doc."""
    return bound + (bound if other is None else other)


def _four_d(x: np.ndarray) -> np.ndarray:
    return x[None, None] if x.ndim == 2 else x


def _abs_bias(case) -> np.ndarray | float:
    """``|b_j|`` of a float mask (0 where it is ``-inf``), float64 and broadcastable to
    ``(B, Hq, Tq, Tk)``; 0.0 without a float mask."""
    if case.attn_mask is None or case.attn_mask.dtype == np.bool_:
        return 0.0
    mask = case.attn_mask.astype(np.float64)
    return np.where(np.isfinite(mask), np.abs(mask), 0.0)


def _abs_alibi(case) -> np.ndarray | float:
    """``|a_j| = |slope| |p - j|`` of ALiBi (``case.alibi_slopes``, ``(Hq,)`` or ``(B, Hq)``;
    ``p = query_start + i`` for the case's own rows), float64 ``(B or 1, Hq, Tq, Tk)``
    rounded up (the product's rounding, times ``1 + 2**-52``); 0.0 without ALiBi."""
    slopes = getattr(case, "alibi_slopes", None)
    if slopes is None:
        return 0.0
    B, Hq, Tq, _ = _four_d(case.query).shape
    Tk = case.key.shape[-2]
    start = Tk - Tq if case.query_start is None else case.query_start
    bias = alibi_bias(check_alibi_slopes(slopes, B, Hq), start, slice(0, Tq), slice(0, Tk))
    return np.abs(bias) * (1 + 2.0**-52)


def _softcap_error(
    cap: float | None, a: np.ndarray, u: float, tiny: float, uc: float = 0.0
) -> np.ndarray | float:
    """The score error the cap ``cap`` adds (item 1), from ``A_j`` (``a``), with the cap
    rounded at ``uc`` (``parameter_dtypes``; 0: exact); 0.0 without a cap."""
    if cap is None:
        return 0.0
    cubic = (5 * u + 4 * u * u + 2 * uc) * np.minimum(a, cap)
    return u * np.minimum(a, cap / 2) + cubic + 2 * tiny


def _with_sink_key(sinks, abs_qk, scores, weights, bias, alibi, value):
    """The sink (:mod:`oracle.rules.sinks`) as one more key of every row, the view the bounds
    take of it (item 5 of the module doc): ``A = 0``, score ``sigma_h`` (hidden when
    ``-inf``), mask magnitude ``|sigma_h|``, no ALiBi, value 0, and weight ``1 - sum_j w_j``
    (from the oracle's rounded weights, as every other weight)."""
    B, Hq, Tq, _ = scores.shape
    sink = np.broadcast_to(np.asarray(sinks, np.float64).reshape(1, Hq, 1, 1), (B, Hq, Tq, 1))
    zero = np.zeros((B, Hq, Tq, 1))
    sink_weight = np.clip(1 - weights.sum(axis=-1, keepdims=True), 0.0, 1.0)
    sink_weight = np.where(np.isfinite(sink), sink_weight, 0.0)
    cat = lambda a, b: np.concatenate([a, b], axis=-1)  # noqa: E731
    if value is not None:  # (B, Hkv, Tk + 1, Dv)
        value = np.concatenate([value, np.zeros(value.shape[:2] + (1, value.shape[3]))], axis=2)
    return (
        cat(abs_qk, zero),
        cat(scores, sink),
        cat(weights, sink_weight),
        cat(bias, np.where(np.isfinite(sink), np.abs(sink), 0.0)),
        cat(alibi, zero),
        value,
    )


def abs_scores(case) -> np.ndarray:
    """``A_j = scale * sum_d |q_d| |k_jd|`` of item 1, float64 ``(B, Hq, Tq, Tk)`` (the scale
    the case's, or ``1/sqrt(D)``)."""
    query = _four_d(case.query).astype(np.float64)  # (B, Hq, Tq, D)
    key = _four_d(case.key).astype(np.float64)  # (B, Hkv, Tk, D)
    scale = 1 / np.sqrt(query.shape[3]) if case.scale is None else case.scale
    return grouped_matmul(scale * np.abs(query), np.abs(key).swapaxes(-1, -2))


def grouped_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` with ``a`` ``(B, Hq, m, k)`` and ``b`` ``(B, Hkv, k, n)``: query head ``h``
    takes K/V head ``h // (Hq // Hkv)``, without repeating ``b`` (memory at kernel sizes)."""
    B, Hq, m, k = a.shape
    Hkv = b.shape[1]
    # A group's rows stacked, (G m, k) @ (k, n): one matrix product per (batch, K/V head),
    # not G broadcast ones (a decode's m = 1 is then a matrix, not G vector products: up to
    # 20x faster at kernel sizes).
    out = np.matmul(a.reshape(B, Hkv, (Hq // Hkv) * m, k), b)
    return out.reshape(B, Hq, m, b.shape[-1])


class _Rows(NamedTuple):
    """What the bounds read of a call and the oracle's parts, float64 and 4-D: ``A_j``
    (``abs_qk``), the exact scores and weights, ``|b_j|``, ``|a_j|``, the values, ``D``."""

    abs_qk: np.ndarray
    scores: np.ndarray
    weights: np.ndarray
    bias: np.ndarray
    alibi: np.ndarray
    value: np.ndarray | None
    head_dim: int


def _rows(case, parts, with_sinks: bool = True) -> _Rows:
    """:class:`_Rows` of ``case``, a sink as one more key (item 5) when ``with_sinks``."""
    value = None if case.value is None else _four_d(case.value).astype(np.float64)
    D = case.query.shape[-1]
    abs_qk = abs_scores(case)  # (B, Hq, Tq, Tk)
    scores = _four_d(parts.scores.value)
    weights = _four_d(parts.weights.value)
    bias = np.broadcast_to(_abs_bias(case), scores.shape)
    alibi = np.broadcast_to(_abs_alibi(case), scores.shape)
    sinks = getattr(case, "sinks", None)
    if with_sinks and sinks is not None:  # one more key: score sigma_h, |b| = |sigma_h|, v 0
        abs_qk, scores, weights, bias, alibi, value = _with_sink_key(
            sinks, abs_qk, scores, weights, bias, alibi, value
        )
    return _Rows(abs_qk, scores, weights, bias, alibi, value, D)


def _exponent_errors(case, rows: _Rows, arithmetic: Arithmetic) -> np.ndarray:
    """``eta_j`` of item 2, ``(B, Hq, Tq, Tk)`` (0 where hidden)."""
    Tk = rows.scores.shape[-1]
    u, us, rho = arithmetic.terms(Tk)[:3]
    visible = np.isfinite(rows.scores)
    mask_term = gamma(2, us) if getattr(case, "alibi_slopes", None) is not None else us
    tiny = float(ml_dtypes.finfo(arithmetic.compute).smallest_subnormal)
    with np.errstate(invalid="ignore", over="ignore"):
        finite_scores = np.where(visible, rows.scores, 0.0)
        row_max = np.where(visible, rows.scores, -np.inf).max(axis=-1, keepdims=True)
        row_max = np.where(np.isfinite(row_max), row_max, 0.0)
        shifted = np.where(visible, rows.scores - row_max, 0.0)
        delta = (
            (gamma(rows.head_dim + 5, u) + arithmetic.scale_error()) * rows.abs_qk
            + u * np.abs(finite_scores)
            + mask_term * rows.bias
            + gamma(4, us) * rows.alibi
            + _softcap_error(
                getattr(case, "softcap", None),
                rows.abs_qk,
                u,
                tiny,
                arithmetic.parameter_roundoff(),
            )
        )
        # the subject's own |s_j|, max_k |s_k| and |x_j| (its max may be another key's)
        score = np.abs(finite_scores) + delta
        largest = np.where(visible, score, 0.0).max(axis=-1, keepdims=True)
        slack = np.where(visible, delta, 0.0).max(axis=-1, keepdims=True)
        xi = arithmetic.exponent_rounding(np.abs(shifted) + delta + slack, score, largest)
        exps = arithmetic.exp_roundoff() * (Tk + 1)
        return np.where(visible, delta + xi + exps + rho, 0.0)


def attention_bounds(case, parts, arithmetic: Arithmetic | None = None) -> Bounds:
    """Bounds for ``case`` (an :class:`~properties.strategies.AttentionCase`-like object with
    ``query``, ``key``, ``value``, ``attn_mask``, ``scale``) given the oracle's ``parts``
    (:class:`oracle.OracleParts`), for a subject computing as ``arithmetic`` (default: one
    dtype, ``case.query.dtype``, throughout)."""
    arithmetic = arithmetic or Arithmetic.of(case.query.dtype)
    rows = _rows(case, parts)
    weights, value = rows.weights, rows.value
    sinks = getattr(case, "sinks", None)
    Tk = rows.scores.shape[-1]
    u, us, rho, tw, tp, to, tn = arithmetic.terms(Tk)
    visible = np.isfinite(rows.scores)
    eta = _exponent_errors(case, rows, arithmetic)
    with np.errstate(invalid="ignore", over="ignore"):
        positive = weights > 0  # 0 * inf must count as 0 where eta is enormous
        eta_bar = np.log1p(
            np.where(positive, weights * np.expm1(eta), 0.0).sum(axis=-1, keepdims=True)
        )
        inner = np.exp(eta + eta_bar) * (1 + gamma(Tk + 1, u)) * (1 + tn)
        bound_w = np.where(positive, weights * (inner * (1 + us) - 1), 0.0) + tw + U64 * weights
        # the weights inside the weighted sum are not rounded to the storage dtype
        bound_p = np.where(positive, weights * (inner - 1), 0.0) + tp + U64 * weights
    # A weight lies in [0, 1]: where the first-order bound exceeds 1 (float16 with huge
    # scores), the property can only demand a weight, not an accurate one.
    bound_w = np.where(visible, np.minimum(bound_w, 1.0), 0.0)
    bound_p = np.where(visible, np.minimum(bound_p, 1.0), 0.0)
    bound_o = None
    if value is not None:
        abs_v = np.abs(value)  # (B, Hkv, Tk, Dv)
        out = np.abs(_four_d(parts.output.value))
        with np.errstate(invalid="ignore"):  # inf * 0 where gamma is inf: no bound
            bound_o = (
                grouped_matmul(bound_p, abs_v)
                + gamma(Tk + 2, arithmetic.weighted_sum_roundoff())
                * grouped_matmul(weights + bound_p, abs_v)
                + (us + U64) * out
                + to
            )
        bound_o = np.where(np.isnan(bound_o), np.inf, bound_o)
    if sinks is not None:
        bound_w = bound_w[..., :-1]  # the sink's own weight is no result
    if case.query.ndim == 2:
        bound_w = bound_w[0, 0]
        bound_o = None if bound_o is None else bound_o[0, 0]
    return Bounds(weights=bound_w, output=bound_o)


def lse_bounds(case, parts, arithmetic: Arithmetic | None = None) -> np.ndarray:
    """Per-row bounds ``(B, Hq, Tq)`` (or ``(Tq,)``) on ``|lse^ - lse|`` (item 6 of the
    module doc), from the oracle's ``parts`` (its ``lse``); 0 where the row sees no key (its
    ``lse`` must be exactly ``-inf``)."""
    arithmetic = arithmetic or Arithmetic.of(case.query.dtype)
    rows = _rows(case, parts, with_sinks=False)
    Tk = rows.scores.shape[-1]
    u, us = arithmetic.terms(Tk)[:2]
    stored = us if arithmetic.storage != arithmetic.compute else 0.0
    lse = parts.lse.value[None, None] if case.query.ndim == 2 else parts.lse.value
    eta = _exponent_errors(case, rows, arithmetic)
    with np.errstate(invalid="ignore", over="ignore"):
        bound = (
            eta.max(axis=-1)
            - np.log1p(-gamma(Tk + 1, u))
            + 2 * u * (np.log(Tk) + 1)
            + (u + stored + U64) * np.abs(np.where(np.isfinite(lse), lse, 0.0))
        ) * (1 + 2.0**-40)
    bound = np.where(np.isfinite(lse), bound, 0.0)
    bound = np.where(np.isnan(bound), np.inf, bound)
    return bound[0, 0] if case.query.ndim == 2 else bound
