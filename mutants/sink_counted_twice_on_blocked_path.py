"""Mutant: the blocked path counts each head's sink twice in its denominators.

What is broken: each query tile folds the sink into its running state twice, as a split-KV
merge of two partial results that both carry the sink does: the denominator holds
``2 exp(sigma_h - m)`` instead of one. Right where the sink is ``-inf`` or far below the
scores; the dense path, and every call without ``sinks``, are impl's.

Real-world mistake: a sink counted twice in a split-KV merge (rocm-libraries#12227): each
split adds the sink to its partial sum, and the combine step adds the partial sums.
"""

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _SinkTwiceBlocked(impl.Attention):
    def fold_sinks(self, m, l, acc, call):
        super().fold_sinks(m, l, acc, call)
        super().fold_sinks(m, l, acc, call)  # FAULT: the second split's copy of the sink


MUTANT = Mutant(
    name="sink_counted_twice_on_blocked_path",
    description="the blocked path folds each head's sink into its denominators twice",
    models="a sink counted twice in a split-KV merge (rocm-libraries#12227)",
    killed_by=("test_output_with_sinks_matches_oracle",),
    steps=_SinkTwiceBlocked,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
