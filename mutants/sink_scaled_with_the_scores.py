"""Mutant: the sink logit is multiplied by the scale, as if it were a dot product.

What is broken: the dense path joins the sink to the unscaled scores and scales them
together, so the softmax sees ``scale * sigma_h`` instead of ``sigma_h``. Right for a sink of
0 or ``-inf`` and for ``scale = 1``; the blocked path, and every call without ``sinks``, are
impl's.

Real-world mistake: a sink column concatenated to ``q @ k^T`` before the multiplication by
``1/sqrt(D)`` (gpt-oss's reference joins it to the already scaled, masked scores).
"""

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _SinkScaled(impl.Attention):
    def softmax_with_sinks(self, scores, call, compute):
        scaled = call.sinks * self.scale(call)  # FAULT: the sink is no dot product
        return super().softmax_with_sinks(scores, call._replace(sinks=scaled), compute)


MUTANT = Mutant(
    name="sink_scaled_with_the_scores",
    description="the dense path multiplies the sink logit by the scale, like a dot product",
    models="a sink column concatenated to q @ k^T before the scaling",
    killed_by=("test_output_with_sinks_matches_oracle",),
    steps=_SinkScaled,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
