"""Mutant: the default scale is ``1/sqrt(Hq * D)`` (model width) instead of ``1/sqrt(D)``.

What is broken: with ``scale=None`` the scores are divided by the square root of the total
query width ``num_heads * head_dim`` instead of the per-head dimension. With one head (2-D
inputs, ``Hq == 1``) it is exact, so single-head examples pass; with ``Hq > 1`` the softmax is
too flat. An explicit ``scale`` is honored. Everything else is impl's.

Real-world mistake: ``scores / math.sqrt(d_model)`` (or ``embed_dim``) in a multi-head module
where ``d_k = d_model / h`` is meant. The source lab (000, section 1) says it in so many words:
"dk 是每个头的维度，不能直接当成模型总宽度".
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant


class _ModelWidthScale(impl.Attention):
    def default_scale(self, call):
        # FAULT: sqrt of the model width Hq * D, not of the head dim D.
        return 1.0 / np.sqrt(call.query.shape[1] * call.query.shape[3])


MUTANT = Mutant(
    name="scale_by_model_width",
    description="default scale 1/sqrt(Hq * D) (model width) instead of 1/sqrt(D) (head dim)",
    models="`scores / sqrt(d_model)` in a multi-head module (source lab section 1: d_k is the "
    "per-head dimension, not the model width)",
    killed_by=(
        "test_default_scale_is_inverse_sqrt_head_dim",
        "test_output_matches_oracle",
        "test_weights_match_oracle",
    ),
    steps=_ModelWidthScale,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
