"""Mutant: ALiBi's bias is added with the wrong sign, ``+slope * |p - j|``.

What is broken: the distance bias rewards far keys instead of penalising them. Calls without
``alibi_slopes``, and slopes of 0, are exactly impl's; every other row with two visible keys
at different distances is wrong.

Real-world mistake: an ALiBi ``score_mod`` returning ``score + slope * (q_idx - kv_idx)`` for
``score - slope * |q_idx - kv_idx|`` (attention-gym PR#86 fixed an inverted ALiBi sign).
"""

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _AlibiSignInverted(impl.Attention):
    def alibi_block(self, call, rows, keys, compute):
        bias = super().alibi_block(call, rows, keys, compute)
        return None if bias is None else -bias  # FAULT: +slope |p - j|


MUTANT = Mutant(
    name="alibi_sign_inverted",
    description="ALiBi adds +slope * |p - j| instead of -slope * |p - j|",
    models="an ALiBi score_mod with the sign of the distance term inverted (attention-gym PR#86)",
    killed_by=("test_alibi_output_matches_oracle", "test_alibi_equals_its_explicit_float_mask"),
    steps=_AlibiSignInverted,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
