"""Mutant: a quantized cache dequantizes by dividing by the scale it quantized with.

What is broken: :class:`impl.QuantizedKVCache` stores ``c = fp8(x / s)`` and reads it back
as ``c / s`` instead of ``c * s``: every key and value is off by ``s**2`` (a calibrated scale
``amax / 448`` is far from 1), so the round trip and attention over the cache are wrong
whenever ``s != 1``, and right with vLLM's default scale of 1.0.

Real-world mistake: the two meanings of "scale" in fp8 code, the quantizing multiplier
(Transformer Engine's ``scale``, ``fp8_max / amax``) and the dequantizing one (its
``scale_inv``, vLLM's ``k_scale``, ``torch._scaled_mm``'s ``scale_a``), swapped at one end.
"""

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _Cache(impl.QuantizedKVCache):
    def _dequantized(self, codes, scales):
        return super()._dequantized(codes, 1 / scales)  # FAULT: c / s, not c * s


MUTANT = Mutant(
    name="fp8_dequantized_with_the_inverted_scale",
    description="fp8 codes dequantized as code / scale instead of code * scale",
    models="the quantizing scale (fp8_max / amax) and the dequantizing one (amax / fp8_max) "
    "swapped at one end",
    killed_by=("test_quantized_cache_round_trip_within_the_fp8_rounding",),
    quantized_cache=_Cache,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
