"""The oracle's scores at 50 digits (:mod:`oracle.reference`): each visible key's scaled dot
product ``scale * q . k`` (its dot product kept as an exact integer, :mod:`oracle.exact`), the
soft cap ``c tanh(s / c)``, the float mask and ALiBi's ``-slope |p - j|``, with the rulebook's
score-overflow rule decided on the exact values (:class:`oracle.rules.ScoreOverflowError`),
and what the softmax's shift and the sinks need at more digits (Vaswani et al. 2017, eq. 1;
the cap as Gemma 2's).
"""

from __future__ import annotations

from typing import NamedTuple

import mpmath
import numpy as np

from attnprops.oracle.exact import DIGITS
from attnprops.oracle.exact import dyadic
from attnprops.oracle.exact import exact_dot_int
from attnprops.oracle.exact import exact_vector
from attnprops.oracle.exact import scaled
from attnprops.oracle.rules import AttentionProblem
from attnprops.oracle.rules import compute_dtype
from attnprops.oracle.rules import overflow_threshold
from attnprops.oracle.rules import raise_score_overflow
from attnprops.oracle.rules import slope_at

__all__ = [
    "Scores",
    "cap_digits",
    "capped_tanh",
    "exact_difference",
    "exact_scores",
    "exact_slope",
    "sink_shift",
]


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


def exact_slope(alibi: np.ndarray, b: int, h: int) -> mpmath.mpf:
    """The ALiBi slope of batch element ``b`` and query head ``h``, exact."""
    return mpmath.mpf(slope_at(alibi, b, h))


def exact_scores(problem: AttentionProblem) -> Scores:
    """Scaled, masked scores at 50 digits; hidden keys are ``-inf``. ``(B, Hq, Tq, Tk)``."""
    B, Hq, Tq, D = problem.query.shape
    Tk = problem.key.shape[2]
    limit = mpmath.mpf(overflow_threshold(compute_dtype(problem.dtype)))  # exact
    scale = 1 / mpmath.sqrt(D) if problem.scale is None else mpmath.mpf(problem.scale)
    query = [
        [[exact_vector(row) for row in head] for head in batch] for batch in problem.query.tolist()
    ]
    key = [
        [[exact_vector(row) for row in head] for head in batch] for batch in problem.key.tolist()
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
                    total = exact_dot_int(q, k)
                    dots[b, h, i, j] = total << (shift - q.shift - k.shift)
                    s = scale * scaled(total, q.shift + k.shift)
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
                        s = s - exact_slope(problem.alibi, b, h) * distance
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


def exact_difference(a: float, b: float) -> mpmath.mpf:
    """``a - b`` of two binary64 numbers, exact, then rounded once to the working precision
    (``mpf(a) - mpf(b)`` would round ``-1e308 + 1e-300`` before subtracting)."""
    (na, sa), (nb, sb) = dyadic(a), dyadic(b)
    shift = max(sa, sb)
    return scaled((na << (shift - sa)) - (nb << (shift - sb)), shift)


def cap_digits(softcap: float) -> int:
    """The digits at which the capped scores' ``tanh`` are taken for the softmax shift:
    ``DIGITS + 10`` plus the digits of ``c``. The shift ``c (tanh(s_j / c) - tanh(s_m / c))``
    then has an absolute error far below ``10**-DIGITS`` (each ``tanh``'s error is at most
    ``c`` times its relative one, and ``tanh' <= 1`` keeps the scores' own rounding below
    it), which is what the weights need, an absolute error of the shifted score being a
    relative one of ``exp``; ``tanh`` of any argument stays in ``[-1, 1]``, so huge scores or
    tiny caps overflow nothing."""
    return DIGITS + 10 + max(0, int(mpmath.ceil(mpmath.log10(softcap))))


def capped_tanh(scores: Scores, dot: int, shift: int, digits: int) -> mpmath.mpf:
    """``tanh(s / c)`` of the scaled score whose exact dot product is ``dot / 2**shift``, at
    ``digits`` digits (:func:`cap_digits`)."""
    with mpmath.workdps(digits):
        return mpmath.tanh(scores.scale * scaled(dot, shift) / mpmath.mpf(scores.softcap))


def sink_shift(scores: Scores, index: tuple[int, int, int], m: int) -> mpmath.mpf:
    """``sigma_h - s_m``: the sink logit of the row's head minus the row's largest score (key
    ``m``), at 50 digits, with an absolute error far below ``10**-DIGITS``: its terms (the
    sink, ``scale q.k_m`` or its cap, the mask entry and ALiBi's bias) are subtracted at
    ``DIGITS + 10`` digits plus the digits of the largest of them, the scale recomputed there
    (a 50-digit ``s_m`` of ``1e300`` would keep nothing below ``1e250``)."""
    b, h, i = index
    sink = mpmath.mpf(float(scores.sinks[h]))
    dot = scaled(scores.dots[index + (m,)], scores.dot_shift[index])
    terms = [sink, scores.scale * dot]
    if scores.bias is not None:
        terms.append(mpmath.mpf(float(scores.bias[index + (m,)])))
    if scores.alibi is not None:
        terms.append(-exact_slope(scores.alibi, b, h) * abs(scores.query_start + i - m))
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
