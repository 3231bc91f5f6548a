"""Mutant: the blocked path drops the sinks; its denominators lack ``exp(sigma_h - m)``.

What is broken: the tiled (``block_size=n``) path never folds the heads' sinks into its
running state, so its rows sum to 1 as without sinks (and a row that sees no key but has a
finite sink divides 0 by 0). The dense path, and every call without ``sinks``, are impl's.

Real-world mistake: a sink argument honoured by one kernel path and dropped by another
("sinks dropped on one path", the variants issue's list), so results change with the
sequence length or the backend a dispatcher picks.
"""

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _SinksDroppedBlocked(impl.Attention):
    def fold_sinks(self, m, l, acc, call):
        pass  # FAULT: the blocked path never counts the sink


MUTANT = Mutant(
    name="sinks_dropped_on_blocked_path",
    description="the blocked path drops the sinks: its rows sum to 1, rows left to the sink "
    "divide 0 by 0",
    models="a sink argument that one kernel path silently drops",
    killed_by=("test_output_with_sinks_matches_oracle",),
    steps=_SinksDroppedBlocked,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
