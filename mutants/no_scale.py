"""Mutant: the scores are not scaled (default scale 1 instead of ``1/sqrt(D)``).

What is broken: with ``scale=None`` the raw dot products go into the softmax; an explicit
``scale`` is still honored. With ``D == 1`` it is exact. Everything else is impl's.

Real-world mistake: forgetting the ``/ sqrt(d_k)`` of scaled dot-product attention (Vaswani et
al. 2017, eq. 1), e.g. when porting to a kernel whose ``scale`` argument defaults to 1, or when
the scaling was supposed to be folded into the query projection but was not.
"""

from attnprops import impl
from attnprops.mutants import Mutant


class _NoScale(impl.Attention):
    def default_scale(self, call):
        # FAULT: no 1/sqrt(D).
        return 1.0


MUTANT = Mutant(
    name="no_scale",
    description="scale=None means 1 instead of 1/sqrt(D): unscaled scores",
    models="forgotten 1/sqrt(d_k) (kernel scale defaulting to 1, or scaling meant to be folded "
    "into the query projection)",
    killed_by=(
        "test_default_scale_is_inverse_sqrt_head_dim",
        "test_output_matches_oracle",
        "test_seed_examples",
    ),
    steps=_NoScale,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
