"""Mutant: the blocked path reads the sinks laid out ``(G, Hkv)`` instead of ``(Hkv, G)``.

What is broken: with grouped-query attention the tiled path folds into query head ``h =
kv * G + g`` the sink of head ``g * Hkv + kv``, another head's whenever ``Hkv > 1`` and
``G > 1``. The dense path, MHA, MQA and calls without ``sinks`` are impl's.

Real-world mistake: a per-head parameter indexed with the other head layout of GQA (query
heads grouped as ``(Hkv, G)`` by the kernel, the parameter stored ``(G, Hkv)``), the kind
of mapping that ``gqa_large_group_head_interleaved`` shows for the K/V heads. Found by a
newcomer's attack on the sinks, which the value properties missed in the ``ci`` profile.
"""

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _SinksByGroup(impl.Attention):
    def fold_sinks(self, m, l, acc, call):
        _, Hkv, G, _, _ = m.shape
        swapped = call.sinks.reshape(G, Hkv).T.reshape(-1)  # FAULT: (G, Hkv) read as (Hkv, G)
        super().fold_sinks(m, l, acc, call._replace(sinks=swapped))


MUTANT = Mutant(
    name="sinks_read_by_group_on_blocked_path",
    description="the blocked path reads the sinks laid out (G, Hkv) instead of (Hkv, G): "
    "a GQA head gets another head's sink",
    models="a per-head parameter indexed with GQA's other head layout",
    killed_by=("test_each_query_head_takes_its_own_sink",),
    steps=_SinksByGroup,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
