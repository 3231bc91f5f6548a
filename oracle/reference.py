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

import operator
from dataclasses import dataclass
from typing import NamedTuple

import mpmath
import numpy as np

from attnprops.oracle.rules import (
    AttentionProblem,
    check_attention_inputs,
    compute_dtype,
    kv_cache_bytes,
    overflow_threshold,
    raise_score_overflow,
    sink_at,
    slope_at,
)

DIGITS = 50

__all__ = [
    "DIGITS",
    "OracleResult",
    "OracleParts",
    "attention",
    "attention_parts",
    "attention_scores",
    "attention_weights",
    "kv_cache_bytes",
    "to_float",
]


@dataclass(frozen=True)
class OracleResult:
    """``exact``: object array of 50-digit ``mpmath.mpf``; ``value``: float64, same shape."""

    exact: np.ndarray
    value: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.shape


_SMALLEST_NORMAL = 2.0**-1022


def to_float(x: mpmath.mpf) -> float:
    """The one conversion from 50 digits to binary64: round to nearest (ties to even), in
    one rounding. ``float(mpf)`` rounds to 53 bits first, which rounds a subnormal result
    twice (``2.5 * 2**-1074 (1 + 1e-30)`` came out ``2 * 2**-1074``, not ``3 * 2**-1074``);
    below the normal range the value is divided out exactly instead (CPython's int / int
    true division is correctly rounded)."""
    value = float(x)
    if abs(value) <= _SMALLEST_NORMAL:  # <=: 2**-1022 may be a double rounding from below
        if not x:
            return 0.0
        sign, man, exp, _ = x._mpf_
        man = int(man)  # a gmpy2 mpz divides into an mpfr, which has no subnormals
        if man.bit_length() + exp <= -1075:  # at most 2**-1075, half the smallest subnormal
            value = 0.0
        else:
            value = man / (1 << -exp) if exp < 0 else float(man << exp)
        return -value if sign else value
    return value


def _result(exact: np.ndarray, two_d: bool) -> OracleResult:
    if two_d:
        exact = exact[0, 0]
    value = (
        np.vectorize(to_float, otypes=[np.float64])(exact) if exact.size else exact.astype(float)
    )
    return OracleResult(exact=exact, value=value)


def _dyadic(x: float) -> tuple[int, int]:
    """``x == numerator / 2**shift`` exactly (binary floats are dyadic rationals)."""
    numerator, denominator = float(x).as_integer_ratio()
    return numerator, denominator.bit_length() - 1


class ExactVector(NamedTuple):
    """Finite numbers as integers over one power of two: ``x[d] == ints[d] / 2**shift``.

    ``span``: bits between the lowest set bits of the smallest and the largest non-zero entry;
    ``ints`` is None when the span exceeded the limit it was built with.
    """

    ints: list[int] | None
    shift: int
    span: int


def _exact_vector(xs, max_span: int | None = None) -> ExactVector:
    """Binary64 floats or finite ``mpf`` values as an :class:`ExactVector` (exact)."""
    parts = []
    for x in xs:
        if isinstance(x, mpmath.mpf):
            mantissa, exponent = x.man_exp  # x == mantissa * 2**exponent, mantissa odd or 0
            parts.append((int(mantissa), -int(exponent)))
        else:
            parts.append(_dyadic(x))
    shift = max(s for _, s in parts)
    shifts = [s for n, s in parts if n]
    span = max(shifts) - min(shifts) if shifts else 0
    if max_span is not None and span > max_span:
        return ExactVector(None, shift, span)
    return ExactVector([n << (shift - s) for n, s in parts], shift, span)


def _exact_dot_int(a: ExactVector, b: ExactVector) -> int:
    """``sum_d a[d] * b[d] * 2**(a.shift + b.shift)``: the dot product as an exact integer."""
    return sum(map(operator.mul, a.ints, b.ints))


def _scaled(integer: int, shift: int) -> mpmath.mpf:
    """``integer / 2**shift`` rounded once to the working precision."""
    return mpmath.ldexp(mpmath.mpf(integer), -shift)


def _exact_dot(a: ExactVector, b: ExactVector) -> mpmath.mpf:
    """``sum_d a[d] * b[d]`` computed exactly, then rounded once to the working precision."""
    return _scaled(_exact_dot_int(a, b), a.shift + b.shift)


def _weighted_sum(
    weights: list, weights_exact: ExactVector, values: list, values_exact: ExactVector
) -> mpmath.mpf:
    """``sum_j weights[j] * values[j]``: :func:`_exact_dot`, or ``mpmath.fdot`` (the same
    value) when the terms span more than twice the precision (fdot then drops the far smaller
    ones rather than summing integers of that many bits). ``weights_exact`` is built with
    ``max_span=2 * prec``."""
    if weights_exact.ints is not None and (
        weights_exact.span + values_exact.span <= 2 * mpmath.mp.prec
    ):
        return _exact_dot(weights_exact, values_exact)
    return mpmath.fdot(weights, values)


class Scores(NamedTuple):
    """The scores at 50 digits (``values``, ``-inf`` where hidden, ``(B, Hq, Tq, Tk)``) and
    what the softmax shifts exactly: each visible key's dot product ``q . k`` as an exact
    integer over ``2**dot_shift[b, h, i]`` (``dots``, object array, None where hidden), the
    scale (an ``mpf``), the float mask (``bias``, float64 or None), the ALiBi slopes
    (``alibi``, float64 ``(B or 1, Hq)`` or None), the first query's position and the cap
    (``softcap``, or None), the sink logits (``sinks``, float64 ``(Hq,)`` or None) and what
    the scale is (``scale_given``: the caller's float, or None for ``1/sqrt(head_dim)``),
    from which the sink's shift recomputes it at more digits."""

    values: np.ndarray
    dots: np.ndarray
    dot_shift: np.ndarray
    scale: mpmath.mpf
    bias: np.ndarray | None
    alibi: np.ndarray | None = None
    query_start: int = 0
    softcap: float | None = None
    sinks: np.ndarray | None = None
    scale_given: float | None = None
    head_dim: int = 1


def _slope(alibi: np.ndarray, b: int, h: int) -> mpmath.mpf:
    """The ALiBi slope of batch element ``b`` and query head ``h``, exact."""
    return mpmath.mpf(slope_at(alibi, b, h))


def _scores(problem: AttentionProblem) -> Scores:
    """Scaled, masked scores at 50 digits; hidden keys are ``-inf``. ``(B, Hq, Tq, Tk)``."""
    B, Hq, Tq, D = problem.query.shape
    Tk = problem.key.shape[2]
    limit = mpmath.mpf(overflow_threshold(compute_dtype(problem.dtype)))  # exact
    scale = 1 / mpmath.sqrt(D) if problem.scale is None else mpmath.mpf(problem.scale)
    query = [
        [[_exact_vector(row) for row in head] for head in batch] for batch in problem.query.tolist()
    ]
    key = [
        [[_exact_vector(row) for row in head] for head in batch] for batch in problem.key.tolist()
    ]
    scores = np.empty((B, Hq, Tq, Tk), dtype=object)
    dots = np.full((B, Hq, Tq, Tk), None, dtype=object)
    dot_shift = np.zeros((B, Hq, Tq), dtype=object)
    for b in range(B):
        for h in range(Hq):
            kv_head = h // problem.group
            for i in range(Tq):
                q = query[b][h][i]
                shift = max([q.shift + key[b][kv_head][j].shift for j in range(Tk)], default=0)
                dot_shift[b, h, i] = shift
                for j in range(Tk):
                    if not problem.visible[b, h, i, j]:
                        scores[b, h, i, j] = mpmath.mpf("-inf")
                        continue
                    k = key[b][kv_head][j]
                    total = _exact_dot_int(q, k)
                    dots[b, h, i, j] = total << (shift - q.shift - k.shift)
                    s = scale * _scaled(total, q.shift + k.shift)
                    if abs(s) >= limit:
                        raise_score_overflow(problem)
                    if problem.softcap is not None:  # c tanh(s / c), before the biases
                        cap = mpmath.mpf(problem.softcap)
                        s = cap * mpmath.tanh(s / cap)
                    if problem.bias is not None:
                        s = s + mpmath.mpf(float(problem.bias[b, h, i, j]))
                        if abs(s) >= limit:
                            raise_score_overflow(problem)
                    if problem.alibi is not None:  # -slope |p - j|: an exact product
                        distance = abs(problem.query_start + i - j)
                        s = s - _slope(problem.alibi, b, h) * distance
                        if abs(s) >= limit:
                            raise_score_overflow(problem)
                    scores[b, h, i, j] = s
    bias = None if problem.bias is None else problem.bias.astype(np.float64)
    return Scores(
        scores,
        dots,
        dot_shift,
        scale,
        bias,
        problem.alibi,
        problem.query_start,
        problem.softcap,
        problem.sinks,
        problem.scale,
        D,
    )


def _exact_difference(a: float, b: float) -> mpmath.mpf:
    """``a - b`` of two binary64 numbers, exact, then rounded once to the working precision
    (``mpf(a) - mpf(b)`` would round ``-1e308 + 1e-300`` before subtracting)."""
    (na, sa), (nb, sb) = _dyadic(a), _dyadic(b)
    shift = max(sa, sb)
    return _scaled((na << (shift - sa)) - (nb << (shift - sb)), shift)


def _cap_digits(softcap: float) -> int:
    """The digits at which the capped scores' ``tanh`` are taken for the softmax shift:
    ``DIGITS + 10`` plus the digits of ``c``. The shift ``c (tanh(s_j / c) - tanh(s_m / c))``
    then has an absolute error far below ``10**-DIGITS`` (each ``tanh``'s error is at most
    ``c`` times its relative one, and ``tanh' <= 1`` keeps the scores' own rounding below
    it), which is what the weights need, an absolute error of the shifted score being a
    relative one of ``exp``; ``tanh`` of any argument stays in ``[-1, 1]``, so huge scores or
    tiny caps overflow nothing."""
    return DIGITS + 10 + max(0, int(mpmath.ceil(mpmath.log10(softcap))))


def _capped_tanh(scores: Scores, dot: int, shift: int, digits: int) -> mpmath.mpf:
    """``tanh(s / c)`` of the scaled score whose exact dot product is ``dot / 2**shift``, at
    ``digits`` digits (:func:`_cap_digits`)."""
    with mpmath.workdps(digits):
        return mpmath.tanh(scores.scale * _scaled(dot, shift) / mpmath.mpf(scores.softcap))


def _sink_shift(scores: Scores, index: tuple[int, int, int], m: int) -> mpmath.mpf:
    """``sigma_h - s_m``: the sink logit of the row's head minus the row's largest score (key
    ``m``), at 50 digits, with an absolute error far below ``10**-DIGITS``: its terms (the
    sink, ``scale q.k_m`` or its cap, the mask entry and ALiBi's bias) are subtracted at
    ``DIGITS + 10`` digits plus the digits of the largest of them, the scale recomputed there
    (a 50-digit ``s_m`` of ``1e300`` would keep nothing below ``1e250``)."""
    b, h, i = index
    sink = mpmath.mpf(float(scores.sinks[h]))
    dot = _scaled(scores.dots[index + (m,)], scores.dot_shift[index])
    terms = [sink, scores.scale * dot]
    if scores.bias is not None:
        terms.append(mpmath.mpf(float(scores.bias[index + (m,)])))
    if scores.alibi is not None:
        terms.append(-_slope(scores.alibi, b, h) * abs(scores.query_start + i - m))
    size = max((mpmath.mag(t) for t in terms if t), default=0)
    with mpmath.workdps(DIGITS + 10 + max(0, int(size * 0.30103) + 1)):
        if scores.scale_given is None:
            scale = 1 / mpmath.sqrt(scores.head_dim)
        else:
            scale = mpmath.mpf(scores.scale_given)
        terms[1] = scale * dot
        if scores.softcap is not None:
            cap = mpmath.mpf(scores.softcap)
            terms[1] = cap * mpmath.tanh(terms[1] / cap)
        shift = terms[0] - mpmath.fsum(terms[1:])
    return +shift  # rounded to the working precision


def _weights(scores: Scores, lse: np.ndarray | None = None) -> np.ndarray:
    """Softmax over the last axis at 50 digits; a row with no visible key stays all zeros.
    ``lse``: an object array ``(B, Hq, Tq)`` to fill with each row's log-sum-exp of its
    visible scores, ``s_m + log sum_j exp(s_j - s_m)`` (the sink not counted; ``-inf`` for a
    row with no visible key), or None.

    With sinks (:mod:`oracle.rules.sinks`) the denominator also holds ``exp(sigma_h - s_m)``
    (:func:`_sink_shift`), which a sink of ``-inf`` makes 0; a row with no visible key and a
    finite sink is all zeros.

    Each exponent is ``x_j = scale (d_j - d_m) + (b_j - b_m)`` for the key ``m`` of the
    largest 50-digit score, with the dot products ``d`` and the mask ``b`` subtracted
    exactly before one rounding each: ``exp(s_j - s_m)`` from 50-digit scores would keep
    only the digits of ``s_j`` below ``|s_m|``'s 50th (a mask of ``-1e308`` on every key
    left nothing of the dot products: uniform weights)."""
    values = scores.values
    weights = np.empty(values.shape, dtype=object)
    digits = None if scores.softcap is None else _cap_digits(scores.softcap)
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
            slope, p = _slope(scores.alibi, b, h), scores.query_start + i
        if scores.softcap is not None:  # the row's largest key's tanh, once
            tanh_m = _capped_tanh(scores, dots[m], shift, digits)
        for j in visible:
            x = scores.scale * _scaled(dots[j] - dots[m], shift)
            if scores.softcap is not None and x:  # c (tanh(s_j/c) - tanh(s_m/c)); a tie is 0
                with mpmath.workdps(digits):
                    capped = mpmath.mpf(scores.softcap) * (
                        _capped_tanh(scores, dots[j], shift, digits) - tanh_m
                    )
                x = +capped  # rounded to the working precision
            if scores.bias is not None:
                x = x + _exact_difference(scores.bias[index + (j,)], scores.bias[index + (m,)])
            if scores.alibi is not None:  # -slope (|p - j| - |p - m|), exact
                x = x - slope * (abs(p - j) - abs(p - m))
            exps[j] = mpmath.exp(x)
        sink = sink_at(scores.sinks, index[1])
        total = mpmath.fsum(exps)
        if lse is not None:  # exps[m] == 1: total >= 1
            lse[index] = row[m] + mpmath.log(total)
        if sink != -np.inf:  # the sink's term joins the denominator only
            total += mpmath.exp(_sink_shift(scores, index, m))
        weights[index] = [e / total for e in exps]
    return weights


def _check(
    query,
    key,
    value,
    attn_mask,
    is_causal,
    query_start,
    scale,
    window,
    fully_masked_rows,
    needs_value=True,
    **packing,
) -> AttentionProblem:
    return check_attention_inputs(
        query,
        key,
        value,
        attn_mask=attn_mask,
        is_causal=is_causal,
        query_start=query_start,
        scale=scale,
        window=window,
        fully_masked_rows=fully_masked_rows,
        needs_value=needs_value,
        **packing,
    )


def attention_scores(
    query,
    key,
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
    sinks=None,
    fully_masked_rows="raise",
) -> OracleResult:
    """Scaled scores plus float mask at 50 digits, ``-inf`` where hidden.

    Shapes and rules as :func:`impl.attention_weights`: query ``(B, Hq, Tq, D)``, key
    ``(B, Hkv, Tk, D)`` (or 2-D) -> ``(B, Hq, Tq, Tk)``. ``fully_masked_rows`` is ``"raise"``
    (this project's rule) or ``"zeros"`` (PyTorch >= 2.5, FlashAttention). ``window``:
    ``(left, right)`` local attention (:func:`oracle.rules.check_window`), or None;
    ``segment_ids`` and ``chunk_size``: packed documents and chunks
    (:mod:`oracle.rules.packing`), or None; ``alibi_slopes``: ALiBi's bias, exactly
    (:mod:`oracle.rules.alibi`), or None; ``softcap``: ``c tanh(s / c)`` at 50 digits
    (:mod:`oracle.rules.softcap`), or None; ``sinks``: one logit per query head in the
    softmax's denominator (:mod:`oracle.rules.sinks`; scores do not show it), or None.

    Raises:
        oracle.rules.AttentionInputError, like the implementation.
    """
    problem = _check(
        query,
        key,
        None,
        attn_mask,
        is_causal,
        query_start,
        scale,
        window,
        fully_masked_rows,
        needs_value=False,
        segment_ids=segment_ids,
        chunk_size=chunk_size,
        alibi_slopes=alibi_slopes,
        softcap=softcap,
        sinks=sinks,
    )
    with mpmath.workdps(DIGITS):
        return _result(_scores(problem).values, problem.two_d)


def attention_weights(
    query,
    key,
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
    sinks=None,
    fully_masked_rows="raise",
) -> OracleResult:
    """Attention weights at 50 digits, ``(B, Hq, Tq, Tk)``; hidden keys are exactly 0.

    Under ``fully_masked_rows="zeros"``, or with a finite sink, a row with no visible key is
    all zeros; with sinks a row sums to ``sigmoid(lse - sigma_h)``.
    Source: Vaswani et al. 2017, eq. 1. Raises oracle.rules.AttentionInputError.
    """
    problem = _check(
        query,
        key,
        None,
        attn_mask,
        is_causal,
        query_start,
        scale,
        window,
        fully_masked_rows,
        needs_value=False,
        segment_ids=segment_ids,
        chunk_size=chunk_size,
        alibi_slopes=alibi_slopes,
        softcap=softcap,
        sinks=sinks,
    )
    with mpmath.workdps(DIGITS):
        return _result(_weights(_scores(problem)), problem.two_d)


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
    sinks=None,
    fully_masked_rows="raise",
) -> OracleResult:
    """Attention output at 50 digits, ``(B, Hq, Tq, Dv)`` (or ``(Tq, Dv)`` for 2-D inputs).

    ``output[b, h, i] = sum_j weights[b, h, i, j] * value[b, h // G, j]`` with G = Hq // Hkv.
    Under ``fully_masked_rows="zeros"``, or with a finite sink (:mod:`oracle.rules.sinks`), a
    row with no visible key gives a zero output row.
    Source: Vaswani et al. 2017, eq. 1; Ainslie et al. 2023 for the head grouping.
    Raises oracle.rules.AttentionInputError.
    """
    return attention_parts(
        query,
        key,
        value,
        attn_mask=attn_mask,
        is_causal=is_causal,
        query_start=query_start,
        scale=scale,
        window=window,
        segment_ids=segment_ids,
        chunk_size=chunk_size,
        alibi_slopes=alibi_slopes,
        softcap=softcap,
        sinks=sinks,
        fully_masked_rows=fully_masked_rows,
    ).output


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


def attention_parts(
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
    sinks=None,
    fully_masked_rows="raise",
) -> OracleParts:
    """Scores, weights, output and log-sum-exp of one attention call in one pass (see
    :func:`attention` and :class:`OracleParts`)."""
    problem = _check(
        query,
        key,
        value,
        attn_mask,
        is_causal,
        query_start,
        scale,
        window,
        fully_masked_rows,
        segment_ids=segment_ids,
        chunk_size=chunk_size,
        alibi_slopes=alibi_slopes,
        softcap=softcap,
        sinks=sinks,
    )
    B, Hq, Tq, _ = problem.query.shape
    Dv = problem.value.shape[3]
    with mpmath.workdps(DIGITS):
        # value columns: values[b][kv_head][c] is (value[b, kv_head, j, c])_j, as mpf and exact
        values = [
            [
                [
                    ([mpmath.mpf(x) for x in column], _exact_vector(column))
                    for column in np.transpose(head).tolist()
                ]
                for head in batch
            ]
            for batch in problem.value.tolist()
        ]
        scores = _scores(problem)
        lse = np.empty((B, Hq, Tq), dtype=object)
        weights = _weights(scores, lse)
        output = np.empty((B, Hq, Tq, Dv), dtype=object)
        for b in range(B):
            for h in range(Hq):
                kv_head = h // problem.group
                for i in range(Tq):
                    row = list(weights[b, h, i])
                    row_exact = _exact_vector(row, max_span=2 * mpmath.mp.prec)
                    for c in range(Dv):
                        # sum_j w_j * value[j, c]: exact products, exact sum, rounded once
                        output[b, h, i, c] = _weighted_sum(row, row_exact, *values[b][kv_head][c])
        return OracleParts(
            scores=_result(scores.values, problem.two_d),
            weights=_result(weights, problem.two_d),
            output=_result(output, problem.two_d),
            lse=_result(lse, problem.two_d),
        )
