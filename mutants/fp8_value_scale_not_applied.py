"""Mutant: attention over a quantized cache reads the value codes without their scale.

What is broken: :class:`impl.QuantizedKVCache` is right (its ``values`` are ``c * s``), but
``cached_attention`` attends over the dequantized keys and the raw value codes: the output is
off by the factor ``1 / s`` (a calibrated ``s = amax / 448`` makes it hundreds of times too
large). With ``value_scale = 1.0`` (vLLM's default) it is right.

Real-world mistake: a kernel that folds the scales into the computation (FlashInfer,
FlashAttention 3: ``k_scale`` into the softmax scale, ``v_scale`` into the output) and forgets
the second multiplication; the keys' scale alone shows in the scores, the values' only in the
output's size.
"""

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _Steps(impl.Attention):
    def cached_kv(self, cache):
        keys, values = super().cached_kv(cache)
        if isinstance(cache, impl.QuantizedKVCache):
            values = cache.value_codes.astype(cache.dtype)  # FAULT: v_scale never applied
        return keys, values


MUTANT = Mutant(
    name="fp8_value_scale_not_applied",
    description="cached attention over an fp8 cache reads the value codes without their scale",
    models="v_scale folded into the output and never multiplied (FlashInfer-style kernels)",
    killed_by=("test_quantized_cache_attention_equals_attention_over_the_dequantized_kv",),
    steps=_Steps,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
