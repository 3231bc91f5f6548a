"""attnprops' vectorized NumPy attention: the default subject of the property suite.

Public API (shape legend: B batch, Hq/Hkv query/key-value heads, Tq/Tk positions, D/Dv head
dims)::

    attention(query, key, value, *, <options>, block_size=None, return_lse=False)
    attention_weights(query, key, *, <options>)
    KVCache(batch, num_kv_heads, head_dim, value_dim=None, *, dtype=numpy.float64)
    cached_attention(query, key, value, cache, *, attn_mask=None, scale=None, window=None,
                     sinks=None)
    RollingKVCache(batch, num_kv_heads, head_dim, value_dim=None, *, capacity, dtype=numpy.float64)
    QuantizedKVCache(batch, num_kv_heads, head_dim, value_dim=None, *, dtype=numpy.float64,
                     storage="float8_e4m3fn", key_scale=1.0, value_scale=1.0)
    PagedKVCache(num_pages, page_size, num_kv_heads, head_dim, value_dim=None, *, dtype=numpy.float64)
    attention_with_kvcache(query, key_cache, value_cache, cache_seqlens, *, block_table=None,
                           is_causal=False, scale=None, window=None, chunk_size=None,
                           alibi_slopes=None, softcap=None, sinks=None)
    kv_cache_bytes(*, num_layers, batch, tokens, num_kv_heads, head_dim, dtype, page_size=None,
                   rolling_capacity=None, value_dim=None)
    AttentionInputError  (a ValueError; subclasses in oracle.rules)

The rules these functions enforce are written once, in :mod:`oracle.rules`; ``<options>`` are
the ten keyword options of every attention call (``attn_mask``, ``is_causal``, ``query_start``,
``scale``, ``window``, ``segment_ids``, ``chunk_size``, ``alibi_slopes``, ``softcap``,
``sinks``), with their defaults and meanings in :mod:`oracle.rules.options`.
``cached_attention`` over a ``RollingKVCache`` keeps the last ``capacity`` positions (a
sliding window's cache); ``attention_with_kvcache`` attends each sequence over its own
``cache_seqlens[b]`` cached positions, contiguous or in the pages of a ``PagedKVCache``
named by a ``block_table`` (:mod:`oracle.rules.serving`). A ``QuantizedKVCache`` stores fp8
codes with per-tensor or per-head scales and ``cached_attention`` reads it dequantized
(:mod:`oracle.rules.quantization`).
``block_size=n`` processes ``n`` queries by ``n`` keys at a time with an online softmax (peak
extra memory O(B Hq n (n + Dv)) instead of O(B Hq Tq Tk)); ``ATTNPROPS_CAPABILITIES`` declares
it so the property suite draws block sizes too. ``block_size="dense"`` is the dense path (one
``(B, Hq, Tq, Tk)`` score array); the default ``block_size=None`` picks one of the two by size
(dense for small calls, blocked with ``n = 128`` for large causal calls, decode with many
heads and huge score arrays; see :mod:`impl.default_path`). ``Attention`` is the computation
as overridable steps (:mod:`impl.attention`), the class every mutant subclasses;
``ATTENTION`` is the instance whose bound methods the functions above are.
"""

from attnprops.impl.attention import ATTENTION
from attnprops.impl.attention import Attention
from attnprops.impl.attention import attention
from attnprops.impl.attention import attention_weights
from attnprops.impl.attention import attention_with_kvcache
from attnprops.impl.attention import cached_attention
from attnprops.impl.kv_cache import KVCache
from attnprops.impl.kv_cache import kv_cache_bytes
from attnprops.impl.paged_cache import PagedKVCache
from attnprops.impl.quantized_cache import QuantizedKVCache
from attnprops.impl.rolling_cache import RollingKVCache
from attnprops.oracle.rules import AttentionInputError

__version__ = "0.1.0"

# What the property suite may exercise beyond the defaults (properties/subject.py).
ATTNPROPS_CAPABILITIES = {
    "block_size": True,
    "dtypes": ("bfloat16", "float16", "float32", "float64"),
    # the 16-bit dtypes are computed in float32 (oracle.rules.compute_dtype)
    "compute_dtypes": {"float16": "float32", "bfloat16": "float32"},
    "window": "offsets",  # window=(left, right), as FlashAttention's window_size
    "segment_ids": True,  # packed documents
    "chunk_size": True,  # chunked attention (Llama 4)
    "alibi": True,  # alibi_slopes
    "softcap": True,  # softcap: c * tanh(s / c)
    "sinks": True,  # sinks: one logit per query head in the softmax denominator
    "lse": True,  # attention(..., return_lse=True) returns (output, lse)
}

__all__ = [
    "ATTENTION",
    "Attention",
    "AttentionInputError",
    "KVCache",
    "PagedKVCache",
    "QuantizedKVCache",
    "RollingKVCache",
    "attention",
    "attention_weights",
    "attention_with_kvcache",
    "cached_attention",
    "kv_cache_bytes",
]
