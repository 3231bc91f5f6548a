"""Mutant: a ragged batch reads every sequence with the first sequence's length.

What is broken: ``attention_with_kvcache`` gathers sequence ``b``'s keys with
``cache_seqlens[0]`` instead of ``cache_seqlens[b]``: a longer sequence loses its last
positions (and its queries move), a shorter one reads storage past its length. Batches whose
lengths are all equal are exact.

Real-world mistake: a length broadcast from a scalar (``seqlen = cache_seqlens[0]`` or
``cache_seqlens.max()``) in a kernel written for one sequence and later batched; Hugging Face's
left-padding tests exist because equal-length batches hide it.
"""

from attnprops import impl
from attnprops.mutants import Mutant


class _FirstLength(impl.Attention):
    def sequence_kv(self, call, b):
        lengths = call.lengths.copy()
        lengths[:] = lengths[0]  # FAULT: every sequence gets sequence 0's length
        return super().sequence_kv(call._replace(lengths=lengths), b)


MUTANT = Mutant(
    name="ragged_batch_uses_the_first_length",
    description="attention_with_kvcache gathers every sequence with cache_seqlens[0]",
    models="a per-sequence length taken from the first batch element (a scalar seqlen in a "
    "batched kernel); equal-length batches hide it",
    killed_by=(
        "test_ragged_batch_equals_each_sequence_alone",
        "test_paged_attention_equals_the_gathered_sequences",
    ),
    steps=_FirstLength,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
