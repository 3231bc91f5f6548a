"""Subject: the 50-digit oracle, each result correctly rounded to float64.

The most accurate float64 subject there can be: every property must pass against it, so a
failure here is a false alarm of the suite (a bound too tight, a property that is not a law)
rather than a bug of a subject. Run: ``attnprops check --impl properties.subjects.oracle_float64``
(slow: the oracle runs for the subject and for the expected values).

It follows the project's conventions exactly (it *is* the rulebook, :mod:`oracle.rules`):
invalid inputs raise :class:`oracle.rules.AttentionInputError`, a fully masked row raises.
Only float64 is declared: for float16/float32 inputs the oracle's float64 result is not in
the input dtype.
"""

from __future__ import annotations

import numpy as np

import oracle
from oracle import KVCache
from oracle.rules import kv_cache_bytes

__version__ = f"oracle ({oracle.DIGITS} digits)"

ATTNPROPS_CAPABILITIES = {"dtypes": ("float64",)}

__all__ = ["KVCache", "attention", "attention_weights", "cached_attention", "kv_cache_bytes"]


def attention(query, key, value, *, attn_mask=None, is_causal=False, query_start=None,
              scale=None) -> np.ndarray:
    """``oracle.attention(...).value``: the output ``(B, Hq, Tq, Dv)`` (or ``(Tq, Dv)``) at 50
    digits rounded once to float64. Arguments and rules as :func:`impl.attention`.

    Raises:
        oracle.rules.AttentionInputError for any broken rule (including a fully masked row).
    """
    return oracle.attention(query, key, value, attn_mask=attn_mask, is_causal=is_causal,
                            query_start=query_start, scale=scale).value


def attention_weights(query, key, *, attn_mask=None, is_causal=False, query_start=None,
                      scale=None) -> np.ndarray:
    """``oracle.attention_weights(...).value``: weights ``(B, Hq, Tq, Tk)`` rounded to float64.

    Raises:
        oracle.rules.AttentionInputError for any broken rule.
    """
    return oracle.attention_weights(query, key, attn_mask=attn_mask, is_causal=is_causal,
                                    query_start=query_start, scale=scale).value


def cached_attention(query, key, value, cache: KVCache, *, attn_mask=None,
                     scale=None) -> np.ndarray:
    """``oracle.cached_attention(...).value``: append to ``cache`` (an :class:`oracle.KVCache`),
    then causal attention at ``query_start`` = the previous length, ``(B, Hq, Tnew, Dv)``.

    Raises:
        oracle.rules.AttentionInputError; the append is then undone.
    """
    return oracle.cached_attention(query, key, value, cache, attn_mask=attn_mask,
                                   scale=scale).value
