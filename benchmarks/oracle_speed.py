"""Section 2: oracle throughput against a naive mpmath triple loop, on the same input.

Shape (B=1, H=1, T=64, D=64), float64 standard normal inputs, no mask, default scale. Work
counted in multiply-adds: ``T*T*D`` for the scores plus ``T*T*Dv`` for the weighted sum.

The naive loop is the same formula written with mpmath only, as one would first write it: every
input converted with ``mpmath.mpf`` where it is used, ``fsum`` of products over ``d`` for each
score (the triple loop i, j, d), ``exp``/``fsum``/division for the softmax and ``fdot`` for the
weighted sum, all at 50 digits. Its rounding points are the oracle's (exact products, one
rounding per dot product), so the two must agree on every 50-digit value: the benchmark
compares the ``mpf`` values exactly and reports how many differ.
"""

from __future__ import annotations

import time

import mpmath
import numpy as np

from attnprops.benchmarks._harness import Row
from attnprops.benchmarks._harness import best_of

T, D = 64, 64


def naive_attention(query: list, key: list, value: list):
    """Scores, weights and output of one head at 50 digits, by plain mpmath loops.

    ``query`` (Tq, D), ``key`` (Tk, D), ``value`` (Tk, Dv) as nested lists of floats.
    """
    Tq, Tk, Dh, Dv = len(query), len(key), len(query[0]), len(value[0])
    with mpmath.workdps(50):
        scale = 1 / mpmath.sqrt(Dh)
        scores, weights, output = [], [], []
        for i in range(Tq):
            row = []
            for j in range(Tk):
                dot = mpmath.fsum(
                    mpmath.mpf(query[i][d]) * mpmath.mpf(key[j][d]) for d in range(Dh)
                )
                row.append(scale * dot)
            top = max(row)
            exps = [mpmath.exp(s - top) for s in row]
            total = mpmath.fsum(exps)
            w = [e / total for e in exps]
            out = [
                mpmath.fdot((w[j], mpmath.mpf(value[j][c])) for j in range(Tk)) for c in range(Dv)
            ]
            scores.append(row)
            weights.append(w)
            output.append(out)
    return scores, weights, output


def _count_differences(exact: np.ndarray, naive: list) -> tuple[int, int, float]:
    """(values compared, values that differ, max relative difference) at 50 digits."""
    flat_exact = list(exact.ravel())
    flat_naive = [x for row in naive for x in row]
    differ, worst = 0, mpmath.mpf(0)
    with mpmath.workdps(60):
        for a, b in zip(flat_exact, flat_naive):
            if a != b:
                differ += 1
                scale = max(abs(a), abs(b))
                worst = max(worst, abs(a - b) / scale if scale else mpmath.mpf(0))
    return len(flat_exact), differ, float(worst)


def run(args) -> tuple[list[Row], dict]:
    from attnprops import oracle

    rng = np.random.default_rng(2024)
    q = rng.standard_normal((1, 1, T, D))
    k = rng.standard_normal((1, 1, T, D))
    v = rng.standard_normal((1, 1, T, D))
    macs = T * T * D + T * T * D  # scores + weighted sum

    timing = best_of(lambda: oracle.attention_parts(q, k, v), repeat=3, warmup=0, budget_s=10)
    parts = oracle.attention_parts(q, k, v)
    started = time.perf_counter()
    naive = naive_attention(q[0, 0].tolist(), k[0, 0].tolist(), v[0, 0].tolist())
    naive_s = time.perf_counter() - started

    compared = differ = 0
    worst = 0.0
    for exact, loops in zip((parts.scores.exact, parts.weights.exact, parts.output.exact), naive):
        n, d, w = _count_differences(exact, loops)
        compared, differ, worst = compared + n, differ + d, max(worst, w)
    oracle_s = timing["min"]
    speedup = naive_s / oracle_s
    details = {
        "shape": [1, 1, T, T, D],
        "multiply_adds": macs,
        "oracle_seconds": timing,
        "naive_seconds": naive_s,
        "values_compared": compared,
        "values_differing": differ,
        "max_relative_difference": worst,
    }
    rows = [
        Row(
            "2",
            "oracle throughput, (B,H,T,D)=(1,1,64,64)",
            macs / oracle_s,
            "MAC/s",
            anchor="naive mpmath triple loop",
            anchor_value=macs / naive_s,
            ratio=speedup,
            ratio_of="speed-up",
            target=">= 5x the naive loop",
            met=speedup >= 5,
            details=details,
        ),
        Row(
            "2",
            "oracle == naive loop at 50 digits (mpf values compared exactly)",
            compared - differ,
            f"of {compared} equal",
            anchor="scores, weights and outputs",
            target="identical",
            met=differ == 0,
            note="" if differ == 0 else f"max rel diff {worst:.2g}",
        ),
    ]
    return rows, details
