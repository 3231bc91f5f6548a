"""Float64 estimates that steer the ball-arithmetic reference (:mod:`oracle.ball`), never its
results: an upper bound on every score's magnitude (which rows the score-overflow rule must
decide exactly) and estimates of the scores (which visible key's score each row subtracts).
A wrong estimate could only cost time; a bound is a proven bound (Higham 2002, eq. 3.5)."""

from __future__ import annotations

import numpy as np

from attnprops.oracle.rules import AttentionProblem
from attnprops.oracle.rules import alibi_bias

__all__ = ["alibi_scores", "score_bound", "score_estimates"]


def _scale(problem: AttentionProblem) -> float:
    """The scale in float64: the call's, or ``1/sqrt(D)``."""
    return 1 / np.sqrt(problem.query.shape[3]) if problem.scale is None else problem.scale


def _dot_products(problem: AttentionProblem, of=None) -> np.ndarray:
    """Float64 ``(B, Hq, Tq, Tk)``: ``sum_d of(q_d) of(k_jd)`` (``of`` None: the entries
    themselves), query head ``h`` against K/V head ``h // group`` (K not repeated)."""
    query, key = (x.astype(np.float64) for x in (problem.query, problem.key))
    if of is not None:
        query, key = of(query), of(key)
    B, Hq, Tq, D = query.shape
    stacked = query.reshape(B, key.shape[1], problem.group * Tq, D)  # a group's rows stacked
    return np.matmul(stacked, key.swapaxes(-1, -2)).reshape(B, Hq, Tq, -1)


def score_bound(problem: AttentionProblem) -> np.ndarray:
    """Float64 ``(B, Hq, Tq, Tk)`` upper bounds on ``|s_j|``: ``scale * sum_d |q_d| |k_jd| +
    |b_j|``, inflated by ``1 + 4 (D + 3) 2**-53`` for its own rounding (Higham 2002, eq. 3.5:
    at most ``gamma(D + 3)`` relative; inf on overflow)."""
    D = problem.query.shape[3]
    with np.errstate(over="ignore", invalid="ignore"):
        bound = _dot_products(problem, np.abs) * (_scale(problem) * (1 + 4 * (D + 3) * 2.0**-53))
        if problem.bias is not None:
            bound = bound + np.where(np.isneginf(problem.bias), 0.0, np.abs(problem.bias))
        if problem.alibi is not None:  # |slope| |p - j|, rounded up by one ulp
            bound = bound + np.abs(alibi_scores(problem)) * (1 + 2.0**-52)
    return bound


def alibi_scores(problem: AttentionProblem) -> np.ndarray:
    """ALiBi's ``-slope |p - j|`` in float64, ``(B or 1, Hq, Tq, Tk)``."""
    Tq, Tk = problem.query.shape[2], problem.key.shape[2]
    return alibi_bias(problem.alibi, problem.query_start, slice(0, Tq), slice(0, Tk))


def score_estimates(problem: AttentionProblem) -> np.ndarray:
    """Float64 ``(B, Hq, Tq, Tk)`` estimates of the scores, ``-inf`` where hidden: only used
    to pick which visible key's score is subtracted (any choice gives the exact softmax; the
    largest keeps the exponentials at most about 1)."""
    with np.errstate(over="ignore", invalid="ignore"):
        s = _dot_products(problem) * _scale(problem)
        if problem.softcap is not None:
            s = problem.softcap * np.tanh(s / problem.softcap)
        if problem.bias is not None:
            s = s + np.where(np.isneginf(problem.bias), 0.0, problem.bias)
        if problem.alibi is not None:
            s = s + alibi_scores(problem)
    return np.where(problem.visible, np.nan_to_num(s, nan=0.0), -np.inf)
