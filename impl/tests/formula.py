"""The attention formula written out plainly, for the tests that hold impl's dense path to it
bitwise: the rulebook's dense visibility (:func:`oracle.rules.check_attention_inputs`), then
scaled scores plus float mask (and ALiBi's bias), ``-inf`` where hidden, the max-subtracted softmax over keys and
``weights @ value`` (Vaswani et al. 2017, eq. 1), every step in the compute dtype, query heads
grouped by a reshape. Not a subject of the suite: a test helper.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from attnprops.oracle.rules import alibi_bias
from attnprops.oracle.rules import check_attention_inputs
from attnprops.oracle.rules import compute_dtype
from attnprops.oracle.rules import raise_score_overflow


def _weights(problem, compute):
    B, Hq, Tq, D = problem.query.shape
    Hkv, Tk, G = problem.num_kv_heads, problem.key.shape[2], problem.group
    scale = 1.0 / np.sqrt(D) if problem.scale is None else problem.scale
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        query = problem.query.astype(compute, copy=False) * compute.type(scale)
        key_t = problem.key.astype(compute, copy=False)[:, :, None].swapaxes(-1, -2)
        scores = np.matmul(query.reshape(B, Hkv, G, Tq, D), key_t).reshape(B, Hq, Tq, Tk)
        if problem.softcap is not None:  # c tanh(s / c) before the biases
            if not np.isfinite(scores[problem.visible]).all():
                raise_score_overflow(problem)
            info = ml_dtypes.finfo(compute)
            if info.tiny <= problem.softcap <= info.max:
                cap = compute.type(problem.softcap)
                scores = np.tanh(scores / cap) * cap
            else:
                cap = problem.softcap
                scores = (cap * np.tanh(scores.astype(np.float64) / cap)).astype(compute)
        if problem.bias is not None:
            scores = scores + problem.bias.astype(compute, copy=False)
        if problem.alibi is not None:  # -slope |p - j| in the compute dtype
            everything = slice(0, Tq), slice(0, Tk)
            bias = alibi_bias(problem.alibi, problem.query_start, *everything)  # float64
            scores = scores + bias.astype(compute)
    if not np.isfinite(scores[problem.visible]).all():
        raise_score_overflow(problem)
    scores = np.where(problem.visible, scores, compute.type(-np.inf))
    with np.errstate(under="ignore"):
        exp = np.exp(scores - scores.max(axis=-1, keepdims=True))
        return exp / exp.sum(axis=-1, keepdims=True)


def attention_weights(query, key, **options):
    """``softmax(scale * q @ k^T + mask)`` ``(B, Hq, Tq, Tk)`` (or 2-D), the input dtype."""
    problem = check_attention_inputs(query, key, None, needs_value=False, **options)
    weights = _weights(problem, compute_dtype(problem.dtype)).astype(problem.dtype)
    return weights[0, 0] if problem.two_d else weights


def attention(query, key, value, **options):
    """``softmax(scale * q @ k^T + mask) @ v`` ``(B, Hq, Tq, Dv)`` (or 2-D), the input dtype."""
    problem = check_attention_inputs(query, key, value, **options)
    compute = compute_dtype(problem.dtype)
    B, Hq, Tq, _ = problem.query.shape
    Hkv, G, Dv = problem.num_kv_heads, problem.group, problem.value.shape[3]
    weights = _weights(problem, compute).reshape(B, Hkv, G, Tq, -1)
    value = problem.value.astype(compute, copy=False)[:, :, None]
    with np.errstate(over="ignore", invalid="ignore"):
        output = np.matmul(weights, value).reshape(B, Hq, Tq, Dv).astype(problem.dtype)
    return output[0, 0] if problem.two_d else output
