"""One query row of the ball-arithmetic reference (:mod:`oracle.ball`): its scores, the
rulebook's overflow rule on them, and its softmax, as balls (python-flint's ``arb``).

For the visible keys ``j`` of row ``i`` (query head ``h``, batch ``b``), with ``m`` a visible
key of largest estimated score::

    s_j = scale * dot_j  (-> c tanh(s_j / c))  (+ b_j)  (- slope |p - j|)
    x_j = s_j - s_m,  computed as scale * (dot_j - dot_m) + (b_j - b_m) - slope (|p - j| - |p - m|)
    w_j = exp(x_j) / (sum_k exp(x_k) (+ exp(sigma_h - s_m)))

``x_j`` is formed from the exact dot products' difference, so a key tied with ``m`` has
``x_j`` an exact 0 and ``exp(x_j)`` an exact 1 (capped: ``c tanh`` of equal arguments
subtracted, an exact 0 too), as in the 50-digit oracle (Vaswani et al. 2017, eq. 1; the
shift by the maximum: Blanchard, Higham & Higham 2021).
"""

from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

import numpy as np
from flint import arb
from flint import ctx

from attnprops.oracle.ball_rounding import Unresolved
from attnprops.oracle.ball_rounding import added_terms
from attnprops.oracle.ball_rounding import fraction
from attnprops.oracle.ball_rounding import rational_scale
from attnprops.oracle.ball_rounding import rational_score
from attnprops.oracle.rules import AttentionProblem
from attnprops.oracle.rules import raise_score_overflow
from attnprops.oracle.rules import sink_at
from attnprops.oracle.rules import slope_at

__all__ = ["ZERO", "Row", "softmax_row"]

ZERO = arb(0)


class Row(NamedTuple):
    """A row's balls over its visible keys ``visible`` (a list of key indices): ``scores``
    (``s_j``, None when not asked for), ``score_m`` (``s_m``, key ``m``'s), ``exps``
    (``exp(x_j)``, the sink's term last when the row has a sink), ``keys_total`` (``sum_j
    exp(x_j)`` over the keys alone) and ``weights`` (``w_j``)."""

    visible: list
    scores: list | None
    score_m: arb
    exps: list
    keys_total: arb
    weights: list
    m: int

    def tied(self) -> bool:
        """Every term of the softmax is exactly 1 (every score tied, a sink's too)."""
        return all(e.is_exact() and e == 1 for e in self.exps)


def softmax_row(
    problem: AttentionProblem,
    scale: arb,
    dots: list,
    where: tuple[int, int, int],
    m: int,
    *,
    limit: arb,
    check_overflow: bool,
    want_scores: bool,
    exp_precision: int,
) -> Row:
    """The balls of row ``where = (b, h, i)`` from its exact dot products ``dots`` (a list of
    ``arb`` indexed by key, exact wherever visible), subtracting key ``m``'s score; or, when
    the keys' terms certainly sum to more than their count (some score exceeds key ``m``'s:
    a float64 estimate that picked ``m`` overflowed or cancelled), the score of the key with
    the largest term (``Row.m``), so that what :mod:`oracle.ball_groups` and the ``lse``'s
    rounding compare with is the row's largest score.

    ``check_overflow``: apply the rulebook's score-overflow rule to every score after each
    step (``|s| >= limit``, the dtype's rounding-to-inf point: raise; a ball straddling it:
    :class:`Unresolved`, refine). ``want_scores``: return every ``s_j`` (else only ``s_m``
    is formed, unless a cap needs them all). ``exp_precision``: the bits the exponentials
    are taken at (as rigorous at any precision; their radii are what it sets).

    Raises:
        oracle.rules.ScoreOverflowError; Unresolved.
    """
    args = (problem, scale, dots, where)
    options = dict(
        limit=limit,
        check_overflow=check_overflow,
        want_scores=want_scores,
        exp_precision=exp_precision,
    )
    row, shifts = _row(*args, m, **options)
    if row.keys_total > len(row.visible):  # some x_j > 0: m is not the largest score
        best = max(range(len(shifts)), key=lambda t: shifts[t].mid())
        row, _ = _row(*args, row.visible[best], **options)
    return row


def _row(problem, scale, dots, where, m, *, limit, check_overflow, want_scores, exp_precision):
    """:func:`softmax_row` subtracting key ``m``'s score; also the shifts ``x_j``."""
    b, h, i = where
    visible = np.flatnonzero(problem.visible[b, h, i]).tolist()
    full = want_scores or check_overflow or problem.softcap is not None
    keys = visible if full else [m]  # the keys whose scores are formed
    at_m = keys.index(m)
    dot_m = dots[m]
    s = [scale * dots[j] for j in keys]
    stages = [s]  # the score after each step the rulebook checks for overflow
    x = [scale * (dots[j] - dot_m) for j in visible]
    if problem.softcap is not None:  # c tanh(s / c); a tie stays exactly 0 (keys == visible)
        cap = arb(problem.softcap)
        s = [cap * (s_j / cap).tanh() for s_j in s]
        s_m = s[at_m]
        x = [ZERO if t == 0 else s_j - s_m for t, s_j in zip(x, s)]
    if problem.bias is not None:
        row = problem.bias[b, h, i]
        b_m = arb(float(row[m]))
        added = [arb(t) for t in row[visible].tolist()]
        s = [t + b_j for t, b_j in zip(s, added if full else [b_m])]
        stages.append(s)
        x = [t + (b_j - b_m) for t, b_j in zip(x, added)]
    if problem.alibi is not None:  # -slope |p - j|, and its difference to m
        slope = arb(slope_at(problem.alibi, b, h))
        p = problem.query_start + i
        s = [t - slope * abs(p - j) for t, j in zip(s, keys)]
        stages.append(s)
        x = [t - slope * (abs(p - j) - abs(p - m)) for t, j in zip(x, visible)]
    if check_overflow:  # the rulebook's score-overflow rule, decided exactly
        for stage, scores in enumerate(stages):
            for j, score in zip(keys, scores):
                if score.abs_upper() >= limit:  # |s| >= the rounding-to-inf point
                    if score.abs_lower() >= limit:
                        raise_score_overflow(problem)
                    exact = _rational_score(problem, dots[j], where, j, stage)
                    if exact is None:  # irrational: a finer ball decides
                        raise Unresolved
                    if abs(exact) >= fraction(limit):
                        raise_score_overflow(problem)
    sink = sink_at(problem.sinks, h)
    with ctx.workprec(exp_precision):
        exps = [t.exp() for t in x]
        if sink != -np.inf:  # sigma_h - s_m: the sink's term, no value
            sink_exp = (arb(sink) - s[at_m]).exp()
    keys_total = sum(exps[1:], exps[0])
    total = keys_total if sink == -np.inf else keys_total + sink_exp
    weights = [e / total for e in exps]
    terms = exps if sink == -np.inf else exps + [sink_exp]
    row = Row(visible, s if want_scores else None, s[at_m], terms, keys_total, weights, m)
    return row, x


def _rational_score(problem, dot: arb, where, j: int, stage: int) -> Fraction | None:
    """Key ``j``'s exact score after the overflow rule's step ``stage`` (0: scaled, before
    any cap; then the float mask added, then ALiBi's ``-slope |p - j|``) when it is rational
    (:func:`~oracle.ball_rounding.rational_score`: ``1/3`` for D = 9 is a rational scale,
    though no ball of it is exact); None otherwise, or while the dot product's ball is not
    exact. A score exactly at the rounding-to-inf point needs it: its ball straddles the
    point at every precision."""
    if not dot.is_exact():
        return None
    b, h, i = where
    capped = problem.softcap is not None
    if stage == 0:  # before any cap
        added, capped = Fraction(0), False
    elif stage == 1 and problem.bias is not None and problem.alibi is not None:
        added = Fraction(float(problem.bias[b, h, i, j]))  # the mask alone, ALiBi next
    else:
        added = added_terms(problem, b, h, i, j)
    return rational_score(rational_scale(problem), fraction(dot), added, capped)
