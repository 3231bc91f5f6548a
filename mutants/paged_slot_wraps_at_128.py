"""Mutant: pages of more than 128 positions are read with the slot index taken modulo 128.

What is broken: ``attention_with_kvcache`` gathers position ``t`` of a sequence from slot
``(t % S) % 128`` of its page instead of ``t % S``. With pages of up to 128 positions (every
small case, and most kernels' defaults) nothing changes; with pages of 129-256 positions the
second part of every page reads the first part again.

Real-world mistake: an in-page offset computed in a tile of 128 positions (a shared-memory
buffer, a 7-bit lane index) in a kernel first written for pages of at most 128; flashinfer#4347
reports wrong results for page sizes above 128.
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant
from attnprops.oracle.rules import pages_needed


class _SlotWraps(impl.Attention):
    def sequence_kv(self, call, b):
        if call.block_table is None or call.page_size <= 128:
            return super().sequence_kv(call, b)
        length = int(call.lengths[b])
        positions = np.arange(length)
        pages = call.block_table[b, : pages_needed(length, call.page_size)][
            positions // call.page_size
        ]
        slots = (positions % call.page_size) % 128  # FAULT: the in-page offset wraps at 128
        return tuple(
            pool[pages, :, slots].transpose(1, 0, 2)[None]
            for pool in (call.key_cache, call.value_cache)
        )


MUTANT = Mutant(
    name="paged_slot_wraps_at_128",
    description="attention_with_kvcache reads slot (t % S) % 128 of a page: pages above 128 "
    "positions repeat their first 128",
    models="an in-page offset computed in a 128-position tile, in a kernel written for pages "
    "of at most 128 (flashinfer#4347)",
    killed_by=("test_kernel_sized_paged_attention_equals_contiguous",),
    steps=_SlotWraps,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
