"""Logit soft-capping, ``softcap=c`` (Gemma 2) (:mod:`oracle.rules`).

The scaled score ``s = scale * (q . k)`` becomes ``c * tanh(s / c)`` *before* the float mask,
ALiBi and the hidden keys are applied: a hidden key stays hidden (weight exactly 0), a float
mask entry is added to the capped score. ``c`` is a finite float > 0; ``None``: no cap. The
score-overflow rule applies to ``s`` before the cap (the subject must compute it) and to the
capped score plus the biases.

How the libraries write it: FlashAttention's ``softcap`` (``> 0`` activates it) caps
``softmax_scale * (q . k)``, before the mask, the same rule; Gemma 2 in Hugging Face
(``attn_logit_softcapping``) divides the scaled scores by the cap, takes ``tanh``, multiplies
back, then adds the causal mask: the same; FlexAttention writes it as a ``score_mod``
(``softcap * tanh(score / softcap)``), applied to the scaled score before ``mask_mod``'s
hiding. Capping *after* the mask turns a hidden key's ``-inf`` into ``-c``, a finite score:
the hidden key then gets weight (the ONNX reference's ``softcap``, onnx#7865).
"""

from __future__ import annotations

import numpy as np

from attnprops.oracle.rules.arguments import as_real
from attnprops.oracle.rules.errors import SoftcapError

__all__ = ["check_softcap"]


def check_softcap(softcap) -> float | None:
    """``None`` (no cap) or a finite real number > 0 (not bool), returned as a float.

    Raises:
        SoftcapError naming ``softcap`` and the rule.
    """
    if softcap is None:
        return None
    value = as_real(softcap)
    if value is None:
        raise SoftcapError(f"softcap: {softcap!r} is not a real number; pass None or a float > 0")
    if not np.isfinite(value) or value <= 0:
        raise SoftcapError(
            f"softcap: {softcap!r} must be finite and > 0 (scores become softcap * tanh(s / "
            "softcap))"
        )
    return value
