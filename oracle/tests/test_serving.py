"""The oracle's serving caches (:mod:`oracle.serving`) against impl's: the same block tables,
lengths and live pages after the same adds, appends and frees; the same rolling-cache
contents; attention over a ragged or paged cache equal to attention over each sequence alone
at 50 digits."""

from __future__ import annotations

import numpy as np
import pytest

from attnprops import impl
from attnprops import oracle
from attnprops.oracle.rules import PagedCacheError


def _drive(module, rng_seed=0):
    rng = np.random.default_rng(rng_seed)
    cache = module.PagedKVCache(7, 3, 2, 2, 1)
    a, b = cache.add_sequence(), cache.add_sequence()
    steps = [([a], 4), ([a, b], 2), ([b], 3)]
    for seqs, n in steps:
        cache.append(
            seqs, rng.normal(size=(len(seqs), 2, n, 2)), rng.normal(size=(len(seqs), 2, n, 1))
        )
    cache.free(a)
    c = cache.add_sequence()
    cache.append([c, b], rng.normal(size=(2, 2, 2, 2)), rng.normal(size=(2, 2, 2, 1)))
    with pytest.raises(PagedCacheError, match="free a sequence first"):
        cache.append([c, b], np.ones((2, 2, 9, 2)), np.ones((2, 2, 9, 1)))
    return cache, [c, b]


def test_the_oracle_pool_allocates_as_impls():
    (mine, ids), (theirs, same) = _drive(oracle), _drive(impl)
    assert ids == same
    assert np.array_equal(mine.block_table(ids), theirs.block_table(ids))
    assert np.array_equal(mine.seqlens(ids), theirs.seqlens(ids))
    assert mine.free_pages == theirs.free_pages and mine.sequences == theirs.sequences
    table, lengths = mine.block_table(ids), mine.seqlens(ids)
    for row, n in zip(table, lengths):  # the slots in use; impl keeps old data past them
        for t in range(n):
            where = (row[t // 3], slice(None), t % 3)
            assert np.array_equal(mine.key_pages[where], theirs.key_pages[where])
            assert np.array_equal(mine.value_pages[where], theirs.value_pages[where])
    q = np.random.default_rng(1).normal(size=(2, 4, 2, 2))
    args = (mine.seqlens(ids),)
    got = oracle.attention_with_kvcache(
        q,
        mine.key_pages,
        mine.value_pages,
        *args,
        block_table=mine.block_table(ids),
        is_causal=True,
    )
    want = impl.attention_with_kvcache(
        q,
        theirs.key_pages,
        theirs.value_pages,
        *args,
        block_table=theirs.block_table(ids),
        is_causal=True,
    )
    np.testing.assert_allclose(want, got.value, rtol=0, atol=1e-14)


def test_attention_with_kvcache_is_each_sequence_alone():
    rng = np.random.default_rng(2)
    keys, values = rng.normal(size=(2, 1, 5, 3)), rng.normal(size=(2, 1, 5, 2))
    q = rng.normal(size=(2, 2, 2, 3))
    lengths = np.array([5, 2])
    slopes = np.array([[0.5, 0.25], [1.0, -0.5]])
    got = oracle.attention_with_kvcache(
        q, keys, values, lengths, is_causal=True, window=(1, 0), alibi_slopes=slopes
    )
    for b, n in enumerate(lengths):
        alone = oracle.attention(
            q[b : b + 1],
            keys[b : b + 1, :, :n],
            values[b : b + 1, :, :n],
            is_causal=True,
            window=(1, 0),
            alibi_slopes=slopes[b : b + 1],
        )
        assert (got.exact[b : b + 1] == alone.exact).all()


def test_the_oracle_rolling_cache_holds_what_impls_holds():
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(1, 2, 9, 2)) for _ in range(3))
    caches = [module.RollingKVCache(1, 2, 2, capacity=3) for module in (oracle, impl)]
    outs = [[], []]
    for start, n in ((0, 2), (2, 1), (3, 4), (7, 2)):
        rows = slice(start, start + n)
        for out, module, cache in zip(outs, (oracle, impl), caches):
            result = module.cached_attention(
                q[:, :, rows], k[:, :, rows], v[:, :, rows], cache, window=(2, 0)
            )
            out.append(getattr(result, "value", result))
    for mine, theirs in zip(*outs):
        np.testing.assert_allclose(theirs, mine, rtol=0, atol=1e-14)
    assert np.array_equal(caches[0].keys, caches[1].keys)
    assert caches[0].positions.tolist() == caches[1].positions.tolist() == [6, 7, 8]
    full = oracle.attention(q, k, v, is_causal=True, window=(2, 0)).value
    np.testing.assert_allclose(np.concatenate(outs[0], axis=2), full, rtol=0, atol=0)


def test_cached_attention_through_the_oracle_pool_is_impls_and_rolls_back():
    rng = np.random.default_rng(4)
    k, v = rng.normal(size=(2, 1, 3, 2)), rng.normal(size=(2, 1, 3, 1))
    q = rng.normal(size=(2, 2, 3, 2))
    caches = [module.PagedKVCache(4, 2, 1, 2, 1) for module in (oracle, impl)]
    outs = []
    for module, cache in zip((oracle, impl), caches):
        seqs = [cache.add_sequence(), cache.add_sequence()]
        out = module.cached_attention(q, k, v, cache, seqs=seqs, window=(1, 0))
        outs.append(getattr(out, "value", out))
        with pytest.raises(ValueError, match="scale"):
            module.cached_attention(
                q[:, :, :1], k[:, :, :1], v[:, :, :1], cache, seqs=seqs, scale=-1.0
            )
        assert cache.seqlens(seqs).tolist() == [3, 3] and cache.free_pages == 0
    np.testing.assert_allclose(outs[1], outs[0], rtol=0, atol=1e-15)
    assert np.array_equal(caches[0].block_table([0, 1]), caches[1].block_table([0, 1]))
