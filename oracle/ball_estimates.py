"""Float64 estimates that steer the ball-arithmetic reference (:mod:`oracle.ball`), never its
results: an upper bound on every score's magnitude (which rows the score-overflow rule must
decide exactly) and estimates of the scores (which visible key's score each row subtracts).
A wrong estimate could only cost time; a bound is a proven bound (Higham 2002, eq. 3.5)."""

from __future__ import annotations

import numpy as np

from attnprops.oracle.rules import AttentionProblem, alibi_bias

__all__ = ["alibi_scores", "score_bound", "score_estimates"]


def score_bound(problem: AttentionProblem) -> np.ndarray:
    """Float64 ``(B, Hq, Tq, Tk)`` upper bounds on ``|s_j|``: ``scale * sum_d |q_d| |k_jd| +
    |b_j|``, inflated by ``1 + 4 (D + 3) 2**-53`` for its own rounding (Higham 2002, eq. 3.5:
    at most ``gamma(D + 3)`` relative; inf on overflow)."""
    B, Hq, Tq, D = problem.query.shape
    scale = 1 / np.sqrt(D) if problem.scale is None else problem.scale
    key = np.abs(problem.key.astype(np.float64))  # (B, Hkv, Tk, D)
    query = np.abs(problem.query.astype(np.float64)).reshape(B, key.shape[1], problem.group, Tq, D)
    with np.errstate(over="ignore", invalid="ignore"):
        bound = np.matmul(query, key[:, :, None].swapaxes(-1, -2)).reshape(B, Hq, Tq, -1)
        bound = bound * (scale * (1 + 4 * (D + 3) * 2.0**-53))
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
    B, Hq, Tq, D = problem.query.shape
    Hkv = problem.key.shape[1]
    query = problem.query.astype(np.float64).reshape(B, Hkv, problem.group, Tq, D)
    key = problem.key.astype(np.float64)[:, :, None]
    scale = 1 / np.sqrt(D) if problem.scale is None else problem.scale
    with np.errstate(over="ignore", invalid="ignore"):
        s = np.matmul(query, key.swapaxes(-1, -2)).reshape(B, Hq, Tq, -1) * scale
        if problem.softcap is not None:
            s = problem.softcap * np.tanh(s / problem.softcap)
        if problem.bias is not None:
            s = s + np.where(np.isneginf(problem.bias), 0.0, problem.bias)
        if problem.alibi is not None:
            s = s + alibi_scores(problem)
    return np.where(problem.visible, np.nan_to_num(s, nan=0.0), -np.inf)
