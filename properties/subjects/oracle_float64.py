"""Subject: the exact result, each element correctly rounded to float64.

The most accurate float64 subject there can be: every property must pass against it, so a
failure here is a false alarm of the suite (a bound too tight, a property that is not a law)
rather than a bug of a subject. Run: ``attnprops check --impl attnprops.properties.subjects.oracle_float64``
(slow: exact arithmetic runs for the subject and for the expected values).

Every call runs the ball-arithmetic reference (:mod:`oracle.ball`, every row), which returns
the float64s of the 50-digit oracle (``oracle/tests/test_ball.py``: bit for bit, but where
the oracle's 50 digits do not decide the rounding) and is faster at every size: measured, a
decode of 8 keys (D=4) 0.4 ms vs 1.3 ms, of 1024 keys (D=64) 17 ms (7 ms with K/V kept from
an earlier call) vs 221 ms; seconds, not hours, at kernel sizes. So the suite's small-case
properties, which take their expected values from the 50-digit oracle, compare two exact
references when run against this subject.

It follows the project's conventions exactly (it *is* the rulebook, :mod:`oracle.rules`):
invalid inputs raise :class:`oracle.rules.AttentionInputError`, a fully masked row raises.
Only float64 is declared: for float16/float32 inputs the oracle's float64 result is not in
the input dtype.
"""

from __future__ import annotations

import numpy as np

from attnprops import oracle
from attnprops.oracle import KVCache as KVCache  # the subject's cache
from attnprops.oracle import PagedKVCache as PagedKVCache  # the subject's cache
from attnprops.oracle import RollingKVCache as RollingKVCache  # the subject's cache
from attnprops.oracle import ball
from attnprops.oracle.rules import CACHED_OPTIONS
from attnprops.oracle.rules import SERVING_OPTIONS
from attnprops.oracle.rules import check_flag
from attnprops.oracle.rules import kv_cache_bytes as kv_cache_bytes  # the subject's
from attnprops.oracle.rules import takes_options

__version__ = "exact (oracle.ball), rounded once"

ATTNPROPS_CAPABILITIES = {
    "dtypes": ("float64",),
    "window": "offsets",
    "segment_ids": True,
    "chunk_size": True,
    "alibi": True,
    "softcap": True,
    "sinks": True,
    "lse": True,
}


def attention(query, key, value, *, return_lse=False, **options):
    """The output ``(B, Hq, Tq, Dv)`` (or ``(Tq, Dv)``), exact and rounded once to float64
    (:func:`oracle.ball.attention`, equal to ``oracle.attention(...).value``). Keyword
    arguments and rules as :func:`impl.attention` (without ``block_size``): ``attn_mask``,
    ``is_causal``, ``query_start``, ``scale``, ``window``, ``segment_ids``, ``chunk_size``,
    ``alibi_slopes``, ``softcap``, ``sinks``; with ``return_lse=True`` the pair ``(output,
    lse)``, the rows' log-sum-exp also exact and rounded once.

    Raises:
        oracle.rules.AttentionInputError for any broken rule (including a fully masked row);
        TypeError for an unknown keyword.
    """
    if check_flag(return_lse, "return_lse"):
        parts = _parts(query, key, value, lse=True, **options)
        return parts.output.value, parts.lse.value
    return _parts(query, key, value, **options).output.value


def attention_weights(query, key, **options) -> np.ndarray:
    """Weights ``(B, Hq, Tq, Tk)`` rounded to float64 (:func:`oracle.ball.attention_weights`,
    equal to ``oracle.attention_weights(...).value``); keyword arguments as :func:`attention`.

    Raises:
        oracle.rules.AttentionInputError for any broken rule.
    """
    return ball.attention_weights(query, key, **options)


def _parts(query, key, value, lse: bool = False, **kwargs):
    """The parts (``.output``, and ``.lse`` when ``lse``, each with ``.value``) from the ball
    reference, its scores and weights not rounded."""
    return ball.attention_parts(query, key, value, lse=lse, scores_and_weights=False, **kwargs)


def _exact_output(query, key, value, **kwargs):
    """The output as an object with ``.value``, from the ball reference."""
    return _parts(query, key, value, **kwargs).output


@takes_options(only=CACHED_OPTIONS)
def cached_attention(query, key, value, cache: KVCache, *, seqs=None, **options) -> np.ndarray:
    """``oracle.cached_attention(...).value``: append to ``cache`` (an :class:`oracle.KVCache`,
    :class:`oracle.RollingKVCache`, or :class:`oracle.PagedKVCache` with ``seqs``), then causal
    attention at ``query_start`` = the previous length, ``(B, Hq, Tnew, Dv)``, exact and rounded
    once to float64 (the ball reference).

    Raises:
        oracle.rules.AttentionInputError; the append is then undone.
    """
    return oracle.cached_attention(
        query,
        key,
        value,
        cache,
        attend=_exact_output,
        **options,
        **({} if seqs is None else {"seqs": seqs}),
    ).value


@takes_options(only=SERVING_OPTIONS)
def attention_with_kvcache(
    query, key_cache, value_cache, cache_seqlens, *, block_table=None, **options
) -> np.ndarray:
    """``oracle.attention_with_kvcache(...).value``: each sequence over its own cached
    positions, exact and rounded once to float64; keyword arguments and rules as
    :func:`impl.attention_with_kvcache`.

    Raises:
        oracle.rules.AttentionInputError for any broken rule.
    """
    return oracle.attention_with_kvcache(
        query,
        key_cache,
        value_cache,
        cache_seqlens,
        block_table=block_table,
        attend=_exact_output,
        **options,
    ).value
