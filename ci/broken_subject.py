"""A deliberately wrong subject for the mutation runner's harness check.

It ignores the scores and averages the values with uniform weights over *all* keys; the
property suite must report it as failing, or the harness cannot see failures at all. It is not
a mutant (no plausible mistake), so it lives here and not in :mod:`mutants`.
"""

import numpy as np

ATTNPROPS_CAPABILITIES = {"weights": False, "kv_cache": False, "kv_cache_bytes": False}


def attention(query, key, value, *, attn_mask=None, is_causal=False, query_start=None, scale=None):
    """Mean of the values over keys, repeated for every query: ``(B, Hq, Tq, Dv)``."""
    query, value = np.asarray(query), np.asarray(value)
    mean = value.mean(axis=-2, keepdims=True)  # (B, Hkv, 1, Dv) or (1, Dv)
    if query.ndim == 4:
        mean = np.repeat(mean, query.shape[1] // value.shape[1], axis=1)
    return np.broadcast_to(mean, query.shape[:-1] + value.shape[-1:]).astype(query.dtype)
