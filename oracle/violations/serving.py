"""The rules of the serving caches (:mod:`oracle.rules.serving`), each with its break function.

Two valid calls are broken here. ``func="attention_with_kvcache"``: ``query (B, Hq, Tq, D)``,
``key``/``value`` the cache's storage (contiguous ``(B, Hkv, T, D)``, or a page pool ``(P,
Hkv, S, D)`` when ``kwargs`` has a ``block_table``), ``kwargs["cache_seqlens"]`` and
``is_causal``. ``func="paged_append"``: ``key``/``value`` ``(B, Hkv, Tnew, D)`` appended to
``B`` new sequences of an empty ``PagedKVCache(**kwargs["cache"])``; and the rolling cache's
window, ``func="rolling_attention"``.
"""

from __future__ import annotations

import numpy as np

from attnprops.oracle import lab
from attnprops.oracle.rules import BlockTableError
from attnprops.oracle.rules import CacheSeqlensError
from attnprops.oracle.rules import NonFiniteInputError
from attnprops.oracle.rules import PagedCacheError
from attnprops.oracle.rules import WindowError
from attnprops.oracle.rules import pages_needed
from attnprops.oracle.violations.calls import Call
from attnprops.oracle.violations.calls import Example
from attnprops.oracle.violations.calls import Violation

PAGE_SIZE = 2  # the base paged call's pages: the lab's 3 positions in pages 2 and 0 of 3


def ragged_base(paged: bool) -> Call:
    """The lab's 3-token sequence as one cached sequence (``cache_seqlens=[3]``), its last
    position the query, causal; ``paged``: its positions in pages ``[2, 0]`` of a pool of 3
    pages of 2 (page 1 holds other values, never read)."""
    q, k, v = lab.QUERY[None, None, 2:], lab.KEY[None, None], lab.VALUE[None, None]
    kwargs = {"cache_seqlens": np.array([3]), "is_causal": True}
    if not paged:
        return Call(q.copy(), k.copy(), v.copy(), kwargs, "attention_with_kvcache")
    table = np.array([[2, 0]])
    pools = [np.full((3, 1, PAGE_SIZE, x.shape[-1]), 7.0) for x in (k, v)]
    for t in range(3):
        for pool, x in zip(pools, (k, v)):
            pool[table[0, t // PAGE_SIZE], :, t % PAGE_SIZE] = x[0, :, t]
    return Call(q.copy(), *pools, {**kwargs, "block_table": table}, "attention_with_kvcache")


def _lengths(call: Call) -> np.ndarray:
    return np.asarray(call.kwargs["cache_seqlens"]).copy()


def _with(call: Call, **kwargs) -> Call:
    return call._replace(kwargs={**call.kwargs, **kwargs})


def _sequence(call: Call, pick) -> int:
    return pick.integer(0, len(call.kwargs["cache_seqlens"]) - 1)


def _past_the_storage(call, pick):
    lengths = _lengths(call)
    b = _sequence(call, pick)
    if "block_table" in call.kwargs:
        capacity = np.shape(call.kwargs["block_table"])[1] * call.key.shape[2]
    else:
        capacity = call.key.shape[2]
    lengths[b] = capacity + pick.integer(1, 3)
    return _with(call, cache_seqlens=lengths)


def _negative(call, pick):
    lengths = _lengths(call)
    lengths[_sequence(call, pick)] = -pick.integer(1, 3)
    return _with(call, cache_seqlens=lengths)


def _below_query_len(call, pick):
    lengths = _lengths(call)
    lengths[_sequence(call, pick)] = pick.integer(0, call.query.shape[2] - 1)
    return _with(call, cache_seqlens=lengths)


def _not_integers(call, pick):
    kind = pick.choice(["float", "bool"])
    lengths = _lengths(call)
    return _with(call, cache_seqlens=lengths.astype(np.float64 if kind == "float" else bool))


def _other_batch(call, pick):
    lengths = _lengths(call)
    return _with(call, cache_seqlens=np.concatenate([lengths, lengths[:1]]))


def _nonfinite_within_length(call, pick):
    """NaN, inf or -inf in ``key_cache`` at a position one sequence reads (below its length;
    in a page pool, where its block table puts that position)."""
    b = _sequence(call, pick)
    t = pick.integer(0, int(call.kwargs["cache_seqlens"][b]) - 1)
    bad = pick.choice([np.nan, np.inf, -np.inf])
    key = np.array(call.key, copy=True)
    h, d = pick.integer(0, key.shape[1] - 1), pick.integer(0, key.shape[3] - 1)
    if "block_table" in call.kwargs:
        page_size = key.shape[2]
        page = int(np.asarray(call.kwargs["block_table"])[b, t // page_size])
        key[page, h, t % page_size, d] = bad
    else:
        key[b, h, t, d] = bad
    return call._replace(key=key)


def _page_outside(call, pick):
    table = np.asarray(call.kwargs["block_table"]).copy()
    b = _sequence(call, pick)
    used = max(1, pages_needed(int(call.kwargs["cache_seqlens"][b]), call.key.shape[2]))
    page = pick.choice(["past the pool", "negative"])
    table[b, pick.integer(0, used - 1)] = call.key.shape[0] if page == "past the pool" else -1
    return _with(call, block_table=table)


def _table_not_integers(call, pick):
    return _with(call, block_table=np.asarray(call.kwargs["block_table"]).astype(np.float64))


def paged_append_base() -> Call:
    """One new sequence of an empty ``PagedKVCache(3, 2, 1, 4, 2)`` given the lab's 3 tokens."""
    cache = dict(num_pages=3, page_size=PAGE_SIZE, num_kv_heads=1, head_dim=4, value_dim=2)
    k, v = lab.KEY[None, None].copy(), lab.VALUE[None, None].copy()
    return Call(None, k, v, {"cache": cache}, "paged_append")


def _pool_too_small(call, pick):
    cache = call.kwargs["cache"]
    needed = pages_needed(call.key.shape[2], cache["page_size"]) * call.key.shape[0]
    return _with(call, cache={**cache, "num_pages": pick.integer(1, needed - 1)})


def _not_live(call, pick):
    return _with(call, seqs=[pick.choice([5, -1, True])])


def _rolling_window(call, pick):
    capacity = pick.integer(1, 2)
    left = pick.choice([capacity + 1, None])
    return call._replace(
        func="rolling_attention",
        query=call.key[:, :, :1].copy(),
        key=call.key[:, :, :1].copy(),
        value=call.value[:, :, :1].copy(),
        kwargs={
            "cache": dict(batch=1, num_kv_heads=1, head_dim=4, value_dim=2, capacity=capacity),
            "window": (left, 0),
        },
    )


E = Example
PAGED = (("paged_cache", True),)
SERVING: tuple[Violation, ...] = (
    Violation(
        "cache_seqlens past the contiguous storage",
        CacheSeqlensError,
        "cache_seqlens",
        _past_the_storage,
        (E("seqlens-past-storage", "ragged"),),
    ),
    Violation(
        "cache_seqlens longer than the block table's row",
        BlockTableError,
        "block_table",
        _past_the_storage,
        (E("seqlens-past-pages", "paged"),),
        needs=PAGED,
    ),
    Violation(
        "cache_seqlens negative",
        CacheSeqlensError,
        "cache_seqlens",
        _negative,
        (E("seqlens-negative", "ragged"),),
    ),
    Violation(
        "cache_seqlens below the query length",
        CacheSeqlensError,
        "cache_seqlens",
        _below_query_len,
        (E("seqlens-below-queries", "ragged"),),
    ),
    Violation(
        "cache_seqlens not integers",
        CacheSeqlensError,
        "cache_seqlens",
        _not_integers,
        (E("seqlens-float", "ragged"), E("seqlens-bool", "paged", ("bool",))),
    ),
    Violation(
        "cache_seqlens of another batch",
        CacheSeqlensError,
        "cache_seqlens",
        _other_batch,
        (E("seqlens-other-batch", "ragged"),),
    ),
    Violation(
        "non-finite value at a position a sequence reads",
        NonFiniteInputError,
        "key_cache",
        _nonfinite_within_length,
        (
            E("key-cache-nan-within-length", "ragged", (0, 1)),
            E("key-cache-inf-within-length-paged", "paged", (0, 2, np.inf)),
        ),
    ),
    Violation(
        "block_table names a page outside the pool",
        BlockTableError,
        "block_table",
        _page_outside,
        (
            E("block-table-page-past-pool", "paged"),
            E("block-table-page-negative", "paged", (0, "negative")),
        ),
        needs=PAGED,
    ),
    Violation(
        "block_table not integers",
        BlockTableError,
        "block_table",
        _table_not_integers,
        (E("block-table-float", "paged"),),
        needs=PAGED,
    ),
    Violation(
        "paged append beyond the pool",
        PagedCacheError,
        "key",
        _pool_too_small,
        (E("paged-append-pool-full", "paged-append"),),
        needs=PAGED,
    ),
    Violation(
        "paged append to a sequence not live",
        PagedCacheError,
        "seqs",
        _not_live,
        (E("paged-append-unknown-sequence", "paged-append"),),
        needs=PAGED,
    ),
    Violation(
        "rolling window wider than the capacity",
        WindowError,
        "window",
        _rolling_window,
        (E("rolling-window-too-wide", "paged-append"),),
        needs=(("rolling_cache", True),),
    ),
)
del E
# The rules a drawn attention_with_kvcache call is broken with (the rejection property of
# properties/test_ragged_cache.py), by the storage's layout.
_CALL_RULES = [v for v in SERVING if v.breaks not in (_pool_too_small, _not_live, _rolling_window)]
KVCACHE_RULES = {
    "contiguous": tuple(v.rule for v in _CALL_RULES if not v.needs),
    "paged": tuple(v.rule for v in _CALL_RULES if v.needs or v.breaks is not _past_the_storage),
}
