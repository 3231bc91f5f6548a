"""Mutant: ``kv_cache_bytes`` forgets the factor 2 (counts K or V, not both).

What is broken: the byte count is ``layers * batch * tokens * kv_heads * head_dim * itemsize``,
half the real K/V payload. Validation of the arguments is impl's (it calls impl's function and
halves the result); attention and the cache are impl's, so ``cache.keys.nbytes +
cache.values.nbytes`` no longer matches ``kv_cache_bytes``.

Real-world mistake: KV-cache memory estimates that forget that both K and V are cached (the
source lab's formula, 000 section 6: "bytes = 2 * layers * batch * tokens * kv_heads *
head_dim * bytes_per_element"; 003: "Ncache = 2 × B × Hkv × T × D").
"""

from attnprops import impl
from attnprops.mutants import Mutant


def _kv_cache_bytes(*, num_layers, batch, tokens, num_kv_heads, head_dim, dtype) -> int:
    both = impl.kv_cache_bytes(
        num_layers=num_layers,
        batch=batch,
        tokens=tokens,
        num_kv_heads=num_kv_heads,
        head_dim=head_dim,
        dtype=dtype,
    )
    return both // 2  # FAULT: K only (or V only)


MUTANT = Mutant(
    name="kv_cache_bytes_missing_factor_2",
    description="kv_cache_bytes omits the factor 2 (K and V): half the real payload",
    models="KV-cache memory estimates counting only K (or only V)",
    killed_by=("test_kv_cache_bytes_formula", "test_cache_holds_kv_heads"),
    kv_cache_bytes=_kv_cache_bytes,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
