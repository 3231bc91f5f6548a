"""attnprops' oracle: attention at 50 significant digits, and the rulebook all subjects share.

``oracle.reference`` holds the loops (the specification; its exact arithmetic on binary floats
in ``oracle.exact``, its exact scores in ``oracle.exact_scores``), ``oracle.cache`` the KV caches over
them (plain and fp8), ``oracle.serving`` the ragged, paged and rolling caches; ``oracle.rules`` the input rules and errors; ``oracle.ball`` the same formula in ball
arithmetic for kernel-sized calls (imported on demand: ``from oracle import ball``). The package depends on NumPy and mpmath, and
``oracle.ball`` on python-flint, so it can be copied into another test tree on its own.
"""

from attnprops.oracle.cache import KVCache
from attnprops.oracle.cache import QuantizedKVCache
from attnprops.oracle.cache import cached_attention
from attnprops.oracle.exact import DIGITS
from attnprops.oracle.exact import to_float
from attnprops.oracle.reference import OracleParts
from attnprops.oracle.reference import OracleResult
from attnprops.oracle.reference import attention
from attnprops.oracle.reference import attention_parts
from attnprops.oracle.reference import attention_scores
from attnprops.oracle.reference import attention_weights
from attnprops.oracle.reference import kv_cache_bytes
from attnprops.oracle.rules import AttentionInputError
from attnprops.oracle.serving import PagedKVCache
from attnprops.oracle.serving import RollingKVCache
from attnprops.oracle.serving import attention_with_kvcache

__all__ = [
    "DIGITS",
    "AttentionInputError",
    "KVCache",
    "OracleParts",
    "OracleResult",
    "PagedKVCache",
    "QuantizedKVCache",
    "RollingKVCache",
    "attention",
    "attention_parts",
    "attention_scores",
    "attention_weights",
    "attention_with_kvcache",
    "cached_attention",
    "kv_cache_bytes",
    "to_float",
]
