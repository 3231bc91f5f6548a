"""Attention sinks, ``sinks`` (gpt-oss; Xiao et al. 2024, "Efficient Streaming Language Models
with Attention Sinks", in its learned-logit form) (:mod:`oracle.rules`).

One extra logit ``sigma_h`` per query head joins every row's softmax denominator and carries no
value::

    w_j = exp(s_j) / (exp(sigma_h) + sum_k exp(s_k))      o = sum_j w_j v_j

``s_j`` is the final score (scaled, capped, plus the float mask and ALiBi); the sink is compared
with it as it is: not scaled, not capped, not biased, seen by every query whatever hides the
keys. Equivalently: attention with one more key, of score ``sigma_h`` and value 0, that no rule
hides. So the weights of a row sum to ``1 / (1 + exp(sigma_h - lse))`` (``lse = log sum_k
exp(s_k)`` over the visible keys), the output is plain attention times ``sigmoid(lse -
sigma_h)``, and a sink of ``-inf`` is no sink.

Fully masked rows: a row with no visible key but a finite sink is allowed; its weights and its
output are 0 (everything goes to the sink). With a sink of ``-inf`` the fully-masked-row rule
applies as without sinks.

``sinks``: ``None`` or a float16/bfloat16/32/64 array of shape ``(Hq,)`` whose entries are finite or
``-inf`` (read exactly; NaN and ``+inf`` are refused: ``+inf`` would take all the weight from
every key).

How the libraries write it: gpt-oss in Hugging Face (``sinks``, ``(num_attention_heads,)``,
``eager_attention_forward``) concatenates the sink to the masked, scaled scores, takes the
softmax and drops its column: the same rule; vLLM's and FlashInfer's sink kernels take one
logit per head for the same purpose (their kernels are not run here). FlashAttention 2, PyTorch SDPA and JAX have no sink argument
(an adapter appends a zero key with the sink as its float-mask entry). StreamingLLM's original
sinks are the first ``k`` real tokens kept in the cache, not a logit: that is a cache policy,
not this rule.
"""

from __future__ import annotations

import numpy as np

from attnprops.oracle.rules.arguments import check_head_floats
from attnprops.oracle.rules.errors import SinksError

__all__ = ["check_sinks", "sink_at", "sinks_within"]


def check_sinks(sinks, num_heads: int) -> np.ndarray | None:
    """``None`` or a float16/bfloat16/32/64 array ``(Hq,)`` with entries finite or ``-inf``, returned as
    float64 ``(Hq,)`` (exact).

    Raises:
        SinksError naming ``sinks`` and the rule.
    """
    form = (
        f"sinks: must be None or a float array of shape (Hq,) = ({num_heads},) with entries "
        "finite or -inf (one logit per query head)"
    )
    return check_head_floats(
        sinks, SinksError, form, ((num_heads,),), _finite_or_minus_inf, "NaN or +inf"
    )


def _finite_or_minus_inf(x: np.ndarray) -> np.ndarray:
    return ~(np.isnan(x) | np.isposinf(x))


def sink_at(sinks: np.ndarray | None, head: int) -> float:
    """The sink logit of query head ``head`` in checked sinks (:func:`check_sinks`); ``-inf``
    (no sink) without sinks."""
    return -np.inf if sinks is None else float(sinks[head])


def sinks_within(sinks, top: float) -> np.ndarray:
    """Sink logits (float64, any shape) clipped to ``[-top, top]``, ``-inf`` kept: what an
    implementation computing in a dtype whose largest finite value is ``top`` uses. A sink
    above every finite score weighs each key ``exp(s - sigma) = 0`` either way, and one
    below ``-top`` still catches a row without keys (``exp(0) = 1`` there, 0 beside any
    key), where the cast's ``inf``/``-inf`` would give NaN."""
    sinks = np.asarray(sinks, dtype=np.float64)
    return np.where(np.isneginf(sinks), -np.inf, np.clip(sinks, -top, top))
