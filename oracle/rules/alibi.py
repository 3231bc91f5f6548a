"""ALiBi, the bias by distance (Press, Smith & Lewis 2022, "Train Short, Test Long")
(:mod:`oracle.rules`).

``alibi_slopes``: one slope per query head, ``(Hq,)``, or per batch element and head,
``(B, Hq)``; finite float16, bfloat16, float32 or float64 (read exactly; a longdouble is refused, a
float64 could not hold it). The query at absolute position
``p = query_start + i`` adds ``-slope[b, h] * |p - j|`` to its scaled score for key ``j``,
with the float mask, before the softmax; exactly that value, not a rounding of it (the
oracle computes it exactly). ALiBi hides no key.

How the libraries write it: FlashAttention's ``alibi_slopes`` (``(nheads,)`` or
``(batch_size, nheads)``, float32) adds ``-alibi_slope * |i + seqlen_k - seqlen_q - j|``: the
same bias, bottom-right aligned. MPT's ``build_alibi_bias`` (non-causal) is
``-slope * |i - j|``, the same with ``query_start = 0``. Press et al.'s causal form
``-m (i - j)`` and BLOOM's ``slope * j`` (Hugging Face's ``build_alibi_tensor``) differ from
this one by a constant per query row, which the softmax removes, *only under causality*
(``j <= p``): without it they are different biases. PyTorch SDPA and JAX have no ALiBi
argument (an explicit float mask; FlexAttention: a ``score_mod``).
"""

from __future__ import annotations

import numpy as np

from attnprops.oracle.rules.arguments import check_head_floats
from attnprops.oracle.rules.errors import AlibiError

__all__ = ["alibi_bias", "check_alibi_slopes", "slope_at"]


def check_alibi_slopes(alibi_slopes, batch: int, num_heads: int) -> np.ndarray | None:
    """``None`` or a float16/bfloat16/32/64 array of shape ``(Hq,)`` or ``(B, Hq)`` with finite entries,
    returned as float64 ``(B or 1, Hq)`` (exact: every float16/bfloat16/32/64 is a float64).

    Raises:
        AlibiError naming ``alibi_slopes`` and the rule.
    """
    form = (
        f"alibi_slopes: must be None or a float array of shape (Hq,) = ({num_heads},) or "
        f"(B, Hq) = ({batch}, {num_heads}) with finite entries"
    )
    shapes = ((num_heads,), (batch, num_heads))
    slopes = check_head_floats(
        alibi_slopes, AlibiError, form, shapes, np.isfinite, "NaN or infinity"
    )
    return None if slopes is None else slopes.reshape(-1, num_heads)


def slope_at(slopes: np.ndarray, batch: int, head: int) -> float:
    """The slope of batch element ``batch`` and query head ``head`` in checked slopes
    ``(B or 1, Hq)`` (:func:`check_alibi_slopes`)."""
    return float(slopes[batch if len(slopes) > 1 else 0, head])


def alibi_bias(slopes, query_start: int, rows: slice, keys: slice, dtype=np.float64):
    """``-slope * |p - j|`` in ``dtype`` (the slope and the distance converted to it, the
    product rounded once; default float64): ``(B or 1, Hq, len(rows), len(keys))``; ``None``
    without slopes. An approximation for implementations and estimates; the oracle computes
    it exactly."""
    if slopes is None:
        return None
    dtype = np.dtype(dtype)
    p = query_start + np.arange(rows.start, rows.stop)
    distance = np.abs(p[:, None] - np.arange(keys.start, keys.stop)[None, :]).astype(dtype)
    return -slopes.astype(dtype)[:, :, None, None] * distance
