"""Mutant: a quantized cache given one scale per K/V head dequantizes every head with the
first head's.

What is broken: :class:`impl.QuantizedKVCache` stores the codes with each head's own scale
(``fp8(x / s_h)``) but reads every head back as ``c * s_0``. With a per-tensor scale (every
head the same) nothing changes; with per-head scales that differ, every head past the first
reads back values off by ``s_0 / s_h``, and attention over them follows.

Real-world mistake: a kernel written for vLLM's per-tensor ``k_scale`` (one float) handed the
per-head scales a newer checkpoint carries, indexing ``k_scale[0]`` (or broadcasting a
``(Hkv,)`` tensor wrongly), a bug only a model with unequal head ranges shows.
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _Cache(impl.QuantizedKVCache):
    def _dequantized(self, codes, scales):
        first = np.full_like(scales, scales[0])  # FAULT: head 0's scale for every head
        return super()._dequantized(codes, first)


MUTANT = Mutant(
    name="fp8_per_head_scale_read_as_head_0",
    description="per-head fp8 scales read back as head 0's scale for every K/V head",
    models="a per-tensor k_scale kernel given per-head scales (k_scale[0] for every head)",
    killed_by=("test_quantized_cache_round_trip_within_the_fp8_rounding",),
    quantized_cache=_Cache,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
