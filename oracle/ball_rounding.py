"""Rounding the ball reference's values (:mod:`oracle.ball`) to float64, correctly.

A ball (python-flint's ``arb``: a midpoint and a radius that provably enclose the exact
value) is rounded to the float64 both of its ends round to. When they differ, the ball
straddles a rounding boundary (a midpoint of two float64s), and what is known exactly
decides: a rational value (a score under a rational scale, the mean of a row whose scores
all tie) is rounded from its :class:`fractions.Fraction`; a transcendental value that lies
closer to a rational limit than any precision resolves, on a known side of it
(:class:`OneSided`: a saturated softcap ``c tanh(t)``, a row tied but for saturated caps, a
row beside the mean of its tied groups (:mod:`oracle.ball_groups`), the ``lse`` of a dominant
score), is rounded from that side; anything else raises
:class:`Unresolved`, and :func:`oracle.ball.attention_parts` refines the precision (never a
guess).
"""

from __future__ import annotations

import math
from fractions import Fraction
from math import isqrt
from typing import NamedTuple

import numpy as np
from flint import arb
from flint import fmpq

from attnprops.oracle.rules import AttentionProblem
from attnprops.oracle.rules import slope_at

__all__ = [
    "CappedRow",
    "OneSided",
    "Unresolved",
    "beside_mean",
    "capped_lse_parts",
    "exact_ball",
    "exact_mean",
    "added_terms",
    "exact_score",
    "first_known",
    "fraction",
    "just_above",
    "rational_scale",
    "rational_score",
    "to_float",
]


class Unresolved(Exception):
    """Internal: refine the precision and recompute."""


class OneSided(NamedTuple):
    """What is known of a value that is no rational: it lies strictly on side ``side`` (+1
    above, -1 below) of the rational ``limit`` (a :class:`fractions.Fraction`), and in its
    ball."""

    limit: Fraction
    side: int


def _nearest(value: Fraction) -> float:
    """``value`` rounded to nearest float64, ties to even (int / int true division is
    correctly rounded in CPython)."""
    return value.numerator / value.denominator + 0.0


def _just_beside(limit: Fraction, side: int) -> float:
    """The float64 that every value just beside ``limit`` on ``side`` rounds to: ``limit``
    rounded to nearest, except at a midpoint of two float64s, where it is the neighbour on
    ``side`` (the tie is not reached)."""
    nearest = _nearest(limit)
    if Fraction(nearest) == limit:
        return nearest
    other = math.nextafter(nearest, math.inf if Fraction(nearest) < limit else -math.inf)
    if Fraction(nearest) + Fraction(other) == 2 * limit:  # a midpoint
        return max(nearest, other) if side > 0 else min(nearest, other)
    return nearest


def to_float(x: arb, exact=None) -> float:
    """Ball ``x`` correctly rounded to float64. When the two ends of the ball round to
    different float64s, ``exact()`` decides: a :class:`fractions.Fraction` (the exact value of
    a value that is rational, :func:`rational_scale`) is rounded to nearest, ties to even; a
    :class:`OneSided` value is the float64 its ball's part on that side of the limit rounds
    to, when all of that part rounds to one float64. Otherwise (or without ``exact``, or for
    a ball that is not finite) raises :class:`Unresolved` (the caller refines). A ball that
    rounds to zero gives ``+0.0`` (as the 50-digit oracle's exact zeros; a zero's sign is
    unknowable when the ball contains 0)."""
    if x.is_exact():  # radius 0 (most scores): the midpoint rounded to nearest, ties to even
        return float(x) + 0.0
    if not x.is_finite():  # an exponential past the working precision's exponent range
        raise Unresolved
    low = float(x.lower())
    if low != float(x.upper()):
        value = None if exact is None else exact()
        if isinstance(value, Fraction):
            return _nearest(value)
        if isinstance(value, OneSided):  # the part of the ball on that side of the limit
            far = float(x.upper()) if value.side > 0 else low
            if fraction(x.lower()) <= value.limit <= fraction(x.upper()):
                beside = _just_beside(value.limit, value.side)
                if beside == far:
                    return beside + 0.0
        raise Unresolved
    return low + 0.0  # -0.0 + 0.0 == +0.0


def fraction(x: arb) -> Fraction:
    """An exact ball (radius 0, a dyadic rational) as a Fraction."""
    q = x.fmpq()
    return Fraction(int(q.p), int(q.q))


def exact_ball(x: Fraction) -> arb:
    """A ball that contains the Fraction ``x`` at the working precision (radius 0 when ``x``
    is dyadic and fits it); the inverse of :func:`fraction`."""
    return arb(fmpq(x.numerator, x.denominator))


def rational_scale(problem: AttentionProblem) -> Fraction | None:
    """The scale as a Fraction when it is rational: an explicit scale (a float, exactly),
    or the default ``1/sqrt(D)`` for a square ``D``; None when irrational.

    Why: a rational exact result can be the midpoint of two float64s, and a ball around a
    midpoint straddles it at every precision. Scores with a rational scale are rational.
    An output ``sum_g e^{a_g} S_g / sum_g e^{a_g} N_g`` (``g`` the groups of tied scores
    ``a_g``, ``S_g`` their values' sum, ``N_g`` their count; algebraic scores) is rational
    only when every group has the same mean ``S_g / N_g`` (Lindemann-Weierstrass: the
    ``e^{a_g}`` of distinct algebraic ``a_g`` are linearly independent over the algebraic
    numbers), and is then that mean (:func:`exact_mean`,
    :func:`~oracle.ball_groups.grouped_limit`, which finds the groups of exactly equal
    scores). Every other value is transcendental, so it is no midpoint and
    its ball resolves, but for the saturated ones of :class:`OneSided`.
    """
    if problem.scale is not None:
        return Fraction(float(problem.scale))
    D = problem.query.shape[3]
    root = isqrt(D)
    return Fraction(1, root) if root * root == D else None


def added_terms(problem: AttentionProblem, b: int, h: int, i: int, j: int) -> Fraction:
    """What is added to the (capped) scaled score of query row ``i``, key ``j`` (batch ``b``,
    head ``h``), exactly: the float mask's entry minus ALiBi's ``slope |p - j|``."""
    added = Fraction(0) if problem.bias is None else Fraction(float(problem.bias[b, h, i, j]))
    if problem.alibi is not None:
        added -= Fraction(slope_at(problem.alibi, b, h)) * abs(problem.query_start + i - j)
    return added


def rational_score(
    rational: Fraction | None, dot: Fraction, added: Fraction, capped: bool
) -> Fraction | None:
    """A score ``f(dot) + added`` exactly when it is rational (``f``: the scaled dot product,
    ``c tanh(scale dot / c)`` when ``capped``; ``rational``: :func:`rational_scale`):
    ``added`` for ``dot == 0`` whatever the scale, ``rational * dot + added`` uncapped under a
    rational scale; None otherwise (then irrational: ``e^x`` and ``tanh x`` are transcendental
    for algebraic ``x != 0``)."""
    if dot == 0:
        return added
    if capped or rational is None:
        return None
    return rational * dot + added


def exact_score(rational: Fraction | None, dot: arb, index, problem):
    """``exact`` for :func:`to_float` of a score ``scale * dot + b - slope |p - j|``: a
    Fraction, or None when the scale is irrational and ``dot != 0`` (the score is then no
    midpoint; ``dot == 0`` leaves ``b - slope |p - j|``, whatever the scale). Capped,
    ``c tanh(scale * dot / c) + b - slope |p - j|`` (any scale): for ``dot != 0``,
    :class:`OneSided` at ``c sign(dot) + b - slope |p - j|`` on the side ``-sign(dot)``
    (``|tanh t| < 1``; ``c > 0`` and ``scale > 0``, the rulebook's); ``dot == 0`` is exactly
    ``b - slope |p - j|``; None while ``dot``'s ball is not exact."""

    def bias_terms() -> Fraction:
        return added_terms(problem, *index)

    if problem.softcap is None:

        def plain():
            if not dot.is_exact():  # terms thousands of bits apart: not exact until refined
                return None
            return rational_score(rational, fraction(dot), bias_terms(), capped=False)

        return plain

    def capped():
        if not dot.is_exact():
            return None
        sign = (dot > 0) - (dot < 0)
        if sign == 0:
            return bias_terms()
        return OneSided(Fraction(float(problem.softcap)) * sign + bias_terms(), -sign)

    return capped


def exact_mean(value: np.ndarray, tied: tuple | None, c: int):
    """``exact`` for :func:`to_float` of output component ``c`` of a row whose visible
    scores all tie (``tied``: the visible keys and the number of terms of the softmax, one
    more with a sink tied with them; None: not such a row): ``sum value[visible, c] /
    terms``."""
    if tied is None:
        return None
    visible, terms = tied
    return lambda: sum(Fraction(float(value[j, c])) for j in visible) / terms


def first_known(*exacts):
    """One ``exact`` for :func:`to_float` from several (None entries skipped): the first
    answer that is not None."""
    exacts = [e for e in exacts if e is not None]
    if not exacts:
        return None

    def exact():
        for e in exacts:
            answer = e()
            if answer is not None:
                return answer
        return None

    return exact


def just_above(exact_m, others=None, cap_gap=None):
    """``exact`` for :func:`to_float` of a row's ``lse = s_m + log(sum_j exp(x_j))`` with more
    than one visible key: the sum exceeds its term ``exp(0) = 1`` for key ``m``, so ``lse``
    lies strictly above ``s_m`` (within ``exp(-gap)`` of it when ``m`` dominates, closer than
    any precision resolves for a gap of thousands): :class:`OneSided` above ``s_m`` when that
    score is a known rational (``exact_m()`` a Fraction). A capped ``s_m`` beside its limit
    ``L = c sign(d_m) + b_m`` (``exact_m()`` a :class:`OneSided`): above ``L`` when ``s_m`` is;
    below it by ``cap_gap() = c (1 - tanh a_m) = 2 c / (e^{2 a_m} + 1)``, ``lse - L =
    log1p(others()) - cap_gap()`` (``others()``: the other keys' terms, summed; both to
    relative accuracy), on the side of its sign. Else None."""
    if exact_m is None:
        return None

    def exact():
        s_m = exact_m()
        if isinstance(s_m, Fraction):
            return OneSided(s_m, 1)
        if not isinstance(s_m, OneSided) or others is None:
            return None
        if s_m.side > 0:
            return OneSided(s_m.limit, 1)
        lean = others().log1p() - cap_gap()
        if lean > 0 or lean < 0:
            return OneSided(s_m.limit, 1 if lean > 0 else -1)
        return None

    return exact


def capped_lse_parts(problem: AttentionProblem, scale: arb, dot_m: arb, row) -> tuple:
    """``(others, cap_gap)`` for :func:`just_above` of a capped row (an
    :class:`oracle.ball_row.Row` subtracting key ``row.m``, exact dot product ``dot_m``):
    the other keys' terms, summed, and ``c (1 - tanh a_m)`` as ``2 c / (e^{2 a_m} + 1)``,
    both to relative accuracy; ``(None, None)`` without a cap."""
    if problem.softcap is None:
        return None, None
    cap = arb(problem.softcap)

    def others() -> arb:  # only when the lse's ball straddles a boundary
        at_m = row.visible.index(row.m)
        terms = [e for t, e in enumerate(row.exps[: len(row.visible)]) if t != at_m]
        return sum(terms[1:], terms[0])

    return others, lambda: 2 * cap / ((2 * scale * dot_m / cap).exp() + 1)


class CappedRow(NamedTuple):
    """A row whose capped visible scores all tie but for differences below the working
    precision (``c tanh(t)`` saturated: ``tanh(1000) = 1 - 2e^{-2000}``): what
    :func:`beside_mean` needs to compute those differences to relative accuracy."""

    problem: AttentionProblem
    scale: arb
    dots: list
    visible: list
    m: int
    b: int
    h: int
    i: int

    def expm1s(self) -> list:
        """``e^{x_j} - 1`` for the visible keys, to relative accuracy: ``x_j = c (tanh a_j -
        tanh a_m) + (b_j - b_m) - slope (|p - j| - |p - m|)`` with ``tanh a - tanh a' =
        sinh(a - a') / (cosh a cosh a')`` (no cancellation), ``a_j = scale dot_j / c``."""
        problem, d, m = self.problem, self.dots, self.m
        cap = arb(problem.softcap)
        a_m = self.scale * d[m] / cap
        added_m = added_terms(problem, self.b, self.h, self.i, m)
        ys = []
        for j in self.visible:
            a_j = self.scale * d[j] / cap
            x = cap * (self.scale * (d[j] - d[m]) / cap).sinh() / (a_j.cosh() * a_m.cosh())
            # the bias and ALiBi difference first, exactly: 0 for keys that share them, so a
            # tiny x is not lost in the rounding of x + b_j (then - b_m)
            delta = added_terms(problem, self.b, self.h, self.i, j) - added_m
            ys.append((x + exact_ball(delta)).expm1())
        return ys


def beside_mean(value: np.ndarray, row: CappedRow | None, c: int):
    """``exact`` for :func:`to_float` of output component ``c`` of a :class:`CappedRow`
    (None: not such a row). With ``y_j = e^{x_j} - 1`` and ``n`` visible keys the output is
    ``mean + sum_j y_j (v_jc - mean) / (n + sum_j y_j)`` (``mean`` the values' mean, a
    rational): :class:`OneSided` at ``mean`` on the side of the sign of ``sum_j y_j (n v_jc -
    sum_k v_kc)``, or None while that sum's ball contains 0."""
    if row is None:
        return None

    def exact():
        values = [float(value[j, c]) for j in row.visible]
        n = len(values)
        total = sum((arb(v) for v in values), arb(0))
        lean = sum((y * (n * arb(v) - total) for y, v in zip(row.expm1s(), values)), arb(0))
        if not (lean > 0 or lean < 0):
            return None
        mean = sum(Fraction(v) for v in values) / n
        return OneSided(mean, 1 if lean > 0 else -1)

    return exact
