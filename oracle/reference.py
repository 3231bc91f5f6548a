"""Reference attention at 50 significant digits, written as plain loops over the formula.

This is the specification; readability beats speed. For every query row::

    s_j = scale * sum_d query[d] * key_j[d]   (-> c tanh(s_j / c) with softcap=c)
          (+ attn_mask_j)  (- slope |p - j|)                              j visible
    w_j = exp(s_j - max_k s_k) / sum_k exp(s_k - max_k s_k)        0 where j is hidden
    o   = sum_j w_j * value_j

(Vaswani et al. 2017, eq. 1.) Each binary64 input is converted exactly (a float is an integer
times a power of two; no decimal round trip). Both dot products, ``query . key_j`` and the
weighted sum ``sum_j w_j value_j[c]`` of the 50-digit weights, are computed *exactly* in integer
arithmetic (each vector converted to integers once) and rounded once to 50 digits: the result of
``mpmath.fdot`` (exact products, exact sum, one rounding), which the weighted sum falls back to
when its terms' exponents are more than twice the precision apart (``fdot`` then drops the far
smaller terms instead of building huge integers). The scale, ``exp`` and the normalization are
computed at 50 significant digits inside ``mpmath.workdps(50)`` (a local context, never a
global setting), with gmpy2 as mpmath's backend when installed.

Every function returns an :class:`OracleResult`: the 50-digit values (an object array of
``mpmath.mpf``) and their float64 values, each rounded to nearest from the 50-digit value.
Input rules are those of :mod:`oracle.rules`, applied by the same code as the implementation.
"""

from __future__ import annotations

from dataclasses import dataclass

import mpmath
import numpy as np

from attnprops.oracle.exact import DIGITS
from attnprops.oracle.exact import exact_vector
from attnprops.oracle.exact import scaled
from attnprops.oracle.exact import to_float
from attnprops.oracle.exact import weighted_sum
from attnprops.oracle.exact_scores import Scores
from attnprops.oracle.exact_scores import cap_digits
from attnprops.oracle.exact_scores import capped_tanh
from attnprops.oracle.exact_scores import exact_difference
from attnprops.oracle.exact_scores import exact_scores
from attnprops.oracle.exact_scores import exact_slope
from attnprops.oracle.exact_scores import sink_shift
from attnprops.oracle.rules import check_attention_inputs
from attnprops.oracle.rules import kv_cache_bytes
from attnprops.oracle.rules import sink_at
from attnprops.oracle.rules import takes_options

__all__ = [
    "OracleResult",
    "OracleParts",
    "attention",
    "attention_parts",
    "attention_scores",
    "attention_weights",
    "kv_cache_bytes",
]


@dataclass(frozen=True)
class OracleResult:
    """``exact``: object array of 50-digit ``mpmath.mpf``; ``value``: float64, same shape."""

    exact: np.ndarray
    value: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.shape


def _result(exact: np.ndarray, two_d: bool) -> OracleResult:
    if two_d:
        exact = exact[0, 0]
    value = (
        np.vectorize(to_float, otypes=[np.float64])(exact) if exact.size else exact.astype(float)
    )
    return OracleResult(exact=exact, value=value)


def _weights(scores: Scores, lse: np.ndarray | None = None) -> np.ndarray:
    """Softmax over the last axis at 50 digits; a row with no visible key stays all zeros.
    ``lse``: an object array ``(B, Hq, Tq)`` to fill with each row's log-sum-exp of its
    visible scores, ``s_m + log sum_j exp(s_j - s_m)`` (the sink not counted; ``-inf`` for a
    row with no visible key), or None.

    With sinks (:mod:`oracle.rules.sinks`) the denominator also holds ``exp(sigma_h - s_m)``
    (:func:`sink_shift`), which a sink of ``-inf`` makes 0; a row with no visible key and a
    finite sink is all zeros.

    Each exponent is ``x_j = scale (d_j - d_m) + (b_j - b_m)`` for the key ``m`` of the
    largest 50-digit score, with the dot products ``d`` and the mask ``b`` subtracted
    exactly before one rounding each: ``exp(s_j - s_m)`` from 50-digit scores would keep
    only the digits of ``s_j`` below ``|s_m|``'s 50th (a mask of ``-1e308`` on every key
    left nothing of the dot products: uniform weights)."""
    values = scores.values
    weights = np.empty(values.shape, dtype=object)
    digits = None if scores.softcap is None else cap_digits(scores.softcap)
    for index in np.ndindex(values.shape[:-1]):
        row = values[index]
        visible = [j for j, s in enumerate(row) if s != mpmath.mpf("-inf")]
        if not visible:
            weights[index] = [mpmath.mpf(0)] * len(row)
            if lse is not None:
                lse[index] = mpmath.mpf("-inf")
            continue
        m = max(visible, key=lambda j: row[j])
        dots, shift = scores.dots[index], scores.dot_shift[index]
        exps = [mpmath.mpf(0)] * len(row)
        if scores.alibi is not None:
            b, h, i = index
            slope, p = exact_slope(scores.alibi, b, h), scores.query_start + i
        if scores.softcap is not None:  # the row's largest key's tanh, once
            tanh_m = capped_tanh(scores, dots[m], shift, digits)
        for j in visible:
            x = scores.scale * scaled(dots[j] - dots[m], shift)
            if scores.softcap is not None and x:  # c (tanh(s_j/c) - tanh(s_m/c)); a tie is 0
                with mpmath.workdps(digits):
                    capped = mpmath.mpf(scores.softcap) * (
                        capped_tanh(scores, dots[j], shift, digits) - tanh_m
                    )
                x = +capped  # rounded to the working precision
            if scores.bias is not None:
                x = x + exact_difference(scores.bias[index + (j,)], scores.bias[index + (m,)])
            if scores.alibi is not None:  # -slope (|p - j| - |p - m|), exact
                x = x - slope * (abs(p - j) - abs(p - m))
            exps[j] = mpmath.exp(x)
        sink = sink_at(scores.sinks, index[1])
        total = mpmath.fsum(exps)
        if lse is not None:  # exps[m] == 1: s_m + log1p(the other terms), which keeps the
            # digits of a tiny sum (log(1 + 9e-37) at 50 digits kept 13 of them)
            rest = mpmath.fsum(e for j, e in enumerate(exps) if j != m)
            lse[index] = row[m] + mpmath.log1p(rest)
        if sink != -np.inf:  # the sink's term joins the denominator only
            total += mpmath.exp(sink_shift(scores, index, m))
        weights[index] = [e / total for e in exps]
    return weights


@takes_options
def attention_scores(
    query,
    key,
    *,
    fully_masked_rows="raise",
    **options,
) -> OracleResult:
    """Scaled scores plus float mask at 50 digits, ``-inf`` where hidden.

    Shapes and rules as :func:`impl.attention_weights`: query ``(B, Hq, Tq, D)``, key
    ``(B, Hkv, Tk, D)`` (or 2-D) -> ``(B, Hq, Tq, Tk)``. The keyword options are those of
    :mod:`oracle.rules.options`, each applied exactly (ALiBi's bias exactly, ``c tanh(s /
    c)`` at 50 digits; scores do not show a sink). ``fully_masked_rows`` is ``"raise"`` (this
    project's rule) or ``"zeros"`` (PyTorch >= 2.5, FlashAttention).

    Raises:
        oracle.rules.AttentionInputError, like the implementation.
    """
    problem = check_attention_inputs(
        query, key, None, fully_masked_rows=fully_masked_rows, needs_value=False, **options
    )
    with mpmath.workdps(DIGITS):
        return _result(exact_scores(problem).values, problem.two_d)


@takes_options
def attention_weights(
    query,
    key,
    *,
    fully_masked_rows="raise",
    **options,
) -> OracleResult:
    """Attention weights at 50 digits, ``(B, Hq, Tq, Tk)``; hidden keys are exactly 0.

    Under ``fully_masked_rows="zeros"``, or with a finite sink, a row with no visible key is
    all zeros; with sinks a row sums to ``sigmoid(lse - sigma_h)``.
    Source: Vaswani et al. 2017, eq. 1. Raises oracle.rules.AttentionInputError.
    """
    problem = check_attention_inputs(
        query, key, None, fully_masked_rows=fully_masked_rows, needs_value=False, **options
    )
    with mpmath.workdps(DIGITS):
        return _result(_weights(exact_scores(problem)), problem.two_d)


@takes_options
def attention(
    query,
    key,
    value,
    *,
    fully_masked_rows="raise",
    **options,
) -> OracleResult:
    """Attention output at 50 digits, ``(B, Hq, Tq, Dv)`` (or ``(Tq, Dv)`` for 2-D inputs).

    ``output[b, h, i] = sum_j weights[b, h, i, j] * value[b, h // G, j]`` with G = Hq // Hkv.
    Under ``fully_masked_rows="zeros"``, or with a finite sink (:mod:`oracle.rules.sinks`), a
    row with no visible key gives a zero output row.
    Source: Vaswani et al. 2017, eq. 1; Ainslie et al. 2023 for the head grouping.
    Raises oracle.rules.AttentionInputError.
    """
    return attention_parts(query, key, value, fully_masked_rows=fully_masked_rows, **options).output


@dataclass(frozen=True)
class OracleParts:
    """Scores (``-inf`` where hidden), weights and output of one call, all at 50 digits, and
    each row's log-sum-exp ``lse = log sum_j exp(s_j)`` over its visible keys (natural log,
    in the scores' units; the sink not counted; ``-inf`` for a row with no visible key):
    ``(B, Hq, Tq)`` (``(Tq,)`` for 2-D inputs)."""

    scores: OracleResult
    weights: OracleResult
    output: OracleResult
    lse: OracleResult


@takes_options
def attention_parts(
    query,
    key,
    value,
    *,
    fully_masked_rows="raise",
    **options,
) -> OracleParts:
    """Scores, weights, output and log-sum-exp of one attention call in one pass (see
    :func:`attention` and :class:`OracleParts`)."""
    problem = check_attention_inputs(
        query, key, value, fully_masked_rows=fully_masked_rows, **options
    )
    B, Hq, Tq, _ = problem.query.shape
    Dv = problem.value.shape[3]
    with mpmath.workdps(DIGITS):
        # value columns: values[b][kv_head][c] is (value[b, kv_head, j, c])_j, as mpf and exact
        values = [
            [
                [
                    ([mpmath.mpf(x) for x in column], exact_vector(column))
                    for column in np.transpose(head).tolist()
                ]
                for head in batch
            ]
            for batch in problem.value.tolist()
        ]
        scores = exact_scores(problem)
        lse = np.empty((B, Hq, Tq), dtype=object)
        weights = _weights(scores, lse)
        output = np.empty((B, Hq, Tq, Dv), dtype=object)
        for b in range(B):
            for h in range(Hq):
                kv_head = h // problem.group
                for i in range(Tq):
                    row = list(weights[b, h, i])
                    row_exact = exact_vector(row, max_span=2 * mpmath.mp.prec)
                    for c in range(Dv):
                        # sum_j w_j * value[j, c]: exact products, exact sum, rounded once
                        output[b, h, i, c] = weighted_sum(row, row_exact, *values[b][kv_head][c])
        return OracleParts(
            scores=_result(scores.values, problem.two_d),
            weights=_result(weights, problem.two_d),
            output=_result(output, problem.two_d),
            lse=_result(lse, problem.two_d),
        )
