"""Mutant: contiguous ragged attention clamps each sequence's length to 2048.

What is broken: ``attention_with_kvcache`` without a block table reads sequence ``b``'s
first ``min(L_b, 2048)`` positions (the queries the last ``Tq`` of those). Caches of up to
2048 positions are exact.

Real-world mistake: a static cache / kernel compiled with ``max_seqlen_k = 2048`` that clamps
``cache_seqlens`` to it instead of refusing or dispatching to a longer build.
"""

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES

LIMIT = 2048


class _Steps(impl.Attention):
    def sequence_kv(self, call, b):
        if call.block_table is None and int(call.lengths[b]) > LIMIT:
            lengths = call.lengths.copy()
            lengths[b] = LIMIT  # FAULT: clamped to the compiled maximum
            call = call._replace(lengths=lengths)
        return super().sequence_kv(call, b)


MUTANT = Mutant(
    name="ragged_contiguous_length_clamped_at_2048",
    description="contiguous attention_with_kvcache reads at most 2048 positions per sequence",
    models="cache_seqlens clamped to a kernel's compiled max_seqlen_k",
    killed_by=("test_kernel_sized_ragged_batch_equals_each_sequence_alone",),
    steps=_Steps,
)
__all__ = MUTANT.export(globals())
