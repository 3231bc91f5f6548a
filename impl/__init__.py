"""attnprops' vectorized NumPy attention: the default subject of the property suite.

Public API (shape legend: B batch, Hq/Hkv query/key-value heads, Tq/Tk positions, D/Dv head
dims)::

    attention(query, key, value, *, attn_mask=None, is_causal=False, query_start=None, scale=None)
    attention_weights(query, key, *, attn_mask=None, is_causal=False, query_start=None, scale=None)
    KVCache(batch, num_kv_heads, head_dim, value_dim=None, *, dtype=numpy.float64)
    cached_attention(query, key, value, cache, *, attn_mask=None, scale=None)
    kv_cache_bytes(*, num_layers, batch, tokens, num_kv_heads, head_dim, dtype)
    AttentionInputError  (a ValueError; subclasses in oracle.rules)

The rules these functions enforce are written once, in :mod:`oracle.rules`.
"""

from oracle.rules import AttentionInputError

from .attention import attention, attention_weights
from .kv_cache import KVCache, cached_attention, kv_cache_bytes

__version__ = "0.1.0"

__all__ = [
    "AttentionInputError",
    "KVCache",
    "attention",
    "attention_weights",
    "cached_attention",
    "kv_cache_bytes",
]
