"""impl's serving caches as objects: the paged pool's bookkeeping (ids, pages, frees, atomic
appends, read-only views), the rolling cache's ring and its window rule, and the errors of
``attention_with_kvcache``. Their values against the oracle are the properties of
``properties/test_paged_cache.py``, ``test_ragged_cache.py`` and ``test_rolling_cache.py``."""

from __future__ import annotations

import numpy as np
import pytest

from attnprops import impl
from attnprops import oracle
from attnprops.oracle.rules import AttentionInputError
from attnprops.oracle.rules import BlockTableError
from attnprops.oracle.rules import CacheSeqlensError
from attnprops.oracle.rules import NonFiniteInputError
from attnprops.oracle.rules import PagedCacheError
from attnprops.oracle.rules import WindowError
from attnprops.oracle.rules import paged_kv_cache_bytes


def _kv(rng, b, n, heads=1, d=2):
    return rng.normal(size=(b, heads, n, d)), rng.normal(size=(b, heads, n, d))


def test_pages_are_taken_in_order_given_back_on_free_and_reused_first():
    rng = np.random.default_rng(0)
    cache = impl.PagedKVCache(4, 2, 1, 2)
    a, b = cache.add_sequence(), cache.add_sequence()
    assert (a, b) == (0, 1) and cache.free_pages == 4
    assert cache.append([a], *_kv(rng, 1, 3)).tolist() == [0]
    assert cache.append([b], *_kv(rng, 1, 1)).tolist() == [0]
    assert cache.block_table([a, b]).tolist() == [[0, 1], [2, -1]]
    assert cache.seqlens([a, b]).tolist() == [3, 1] and cache.free_pages == 1
    cache.free(a)
    assert cache.sequences == (1,) and cache.free_pages == 3
    c = cache.add_sequence()
    assert c == 0  # the smallest free id
    cache.append([c], *_kv(rng, 1, 1))
    assert cache.block_table([c]).tolist() == [[0]]  # the freed pages come back first


def test_a_full_pool_refuses_the_append_and_changes_nothing():
    rng = np.random.default_rng(1)
    cache = impl.PagedKVCache(2, 2, 1, 2)
    a, b = cache.add_sequence(), cache.add_sequence()
    cache.append([a, b], *_kv(rng, 2, 2))
    before = (np.array(cache.key_pages), cache.block_table([a, b]), cache.seqlens([a, b]))
    with pytest.raises(PagedCacheError, match="needs 2 new pages.*0 free of 2"):
        cache.append([a, b], *_kv(rng, 2, 1))
    assert np.array_equal(cache.key_pages, before[0])
    assert np.array_equal(cache.block_table([a, b]), before[1])
    assert np.array_equal(cache.seqlens([a, b]), before[2])


@pytest.mark.parametrize("seqs", [[5], [0, 0], [], [True]])
def test_unknown_or_repeated_sequence_ids_are_refused(seqs):
    cache = impl.PagedKVCache(2, 2, 1, 2)
    cache.add_sequence()
    with pytest.raises(PagedCacheError, match="seqs"):
        cache.append(
            seqs, np.ones((max(len(seqs), 1), 1, 1, 2)), np.ones((max(len(seqs), 1), 1, 1, 2))
        )


def test_pool_views_are_read_only_and_appends_copy():
    cache = impl.PagedKVCache(1, 2, 1, 2)
    seq = cache.add_sequence()
    key = np.ones((1, 1, 1, 2))
    cache.append([seq], key, key)
    key[...] = 5
    assert cache.key_pages[0, 0, 0].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError):
        cache.key_pages[0, 0, 0] = 2.0


def test_paged_cache_holds_the_allocated_bytes_of_its_sequences():
    rng = np.random.default_rng(2)
    cache = impl.PagedKVCache(8, 3, 2, 4, dtype=np.float32)
    seqs = [cache.add_sequence() for _ in range(3)]
    for seq, n in zip(seqs, (5, 1, 6)):
        key, value = _kv(rng, 1, n, heads=2, d=4)
        cache.append([seq], key.astype(np.float32), value.astype(np.float32))
    sizes = paged_kv_cache_bytes(
        num_layers=1, seqlens=[5, 1, 6], page_size=3, num_kv_heads=2, head_dim=4, dtype="float32"
    )
    owned = 8 - cache.free_pages
    page_bytes = (cache.key_pages.nbytes + cache.value_pages.nbytes) // 8
    assert sizes.allocated_total == owned * page_bytes == (2 + 1 + 2) * page_bytes
    assert sizes.used == tuple(n * 2 * 2 * 4 * 4 for n in (5, 1, 6))


def test_rolling_cache_keeps_the_last_capacity_positions_in_order():
    cache = impl.RollingKVCache(1, 1, 1, capacity=3)
    for t in range(7):
        x = np.full((1, 1, 1, 1), float(t))
        assert cache.append(x, x) == t
    assert len(cache) == 7 and cache.positions.tolist() == [4, 5, 6]
    assert cache.keys[0, 0, :, 0].tolist() == [4.0, 5.0, 6.0]
    many = np.arange(5.0).reshape(1, 1, 5, 1) + 10
    cache.append(many, many)  # more new positions than slots: the last 3 stay
    assert cache.positions.tolist() == [9, 10, 11]
    assert cache.values[0, 0, :, 0].tolist() == [12.0, 13.0, 14.0]


@pytest.mark.parametrize("window", [None, (4, 0), (None, 0), (-1, 0)])
def test_rolling_cache_refuses_windows_it_cannot_serve(window):
    cache = impl.RollingKVCache(1, 1, 2, capacity=3)
    x = np.ones((1, 1, 1, 2))
    with pytest.raises(WindowError, match="window"):
        impl.cached_attention(x, x, x, cache, window=window)
    assert len(cache) == 0


def test_rolling_decode_matches_the_oracle_after_wrapping():
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(1, 2, 11, 3)) for _ in range(3))
    cache = impl.RollingKVCache(1, 2, 3, capacity=4)
    out = np.concatenate(
        [
            impl.cached_attention(
                q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1], cache, window=(3, 0)
            )
            for t in range(11)
        ],
        axis=2,
    )
    want = oracle.attention(q, k, v, is_causal=True, window=(3, 0)).value
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-14)


@pytest.mark.parametrize(
    "change, error, message",
    [
        ({"cache_seqlens": np.array([3, 9])}, BlockTableError, "sequence 1 has 9 positions"),
        ({"cache_seqlens": np.array([3, -1])}, CacheSeqlensError, r"cache_seqlens\[1\] = -1"),
        ({"cache_seqlens": np.array([0, 2])}, CacheSeqlensError, r"must be >= 1"),
        ({"cache_seqlens": np.array([2.0, 2.0])}, CacheSeqlensError, "integer"),
        ({"block_table": np.array([[0, 7], [1, 2]])}, BlockTableError, r"block_table\[0, 1\] = 7"),
        ({"block_table": np.array([[0], [1]])}, BlockTableError, "need 2 pages"),
        (
            {"block_table": np.array([[0, 1], [-1, 2]])},
            BlockTableError,
            r"block_table\[1, 0\] = -1",
        ),
    ],
)
def test_attention_with_kvcache_names_the_broken_argument(change, error, message):
    rng = np.random.default_rng(4)
    pool_k, pool_v = rng.normal(size=(3, 1, 2, 2)), rng.normal(size=(3, 1, 2, 2))
    args = dict(cache_seqlens=np.array([3, 4]), block_table=np.array([[0, 1], [2, 1]]))
    args.update(change)
    q = rng.normal(size=(2, 1, 1, 2))
    with pytest.raises(error, match=message):
        impl.attention_with_kvcache(q, pool_k, pool_v, **args)
    assert issubclass(error, AttentionInputError)


def test_paged_and_contiguous_storage_give_the_same_rows_bitwise():
    rng = np.random.default_rng(5)
    keys, values = rng.normal(size=(2, 1, 6, 2)), rng.normal(size=(2, 1, 6, 3))
    q = rng.normal(size=(2, 2, 2, 2))
    lengths = np.array([5, 3])
    pool_k, pool_v = np.zeros((6, 1, 2, 2)), np.zeros((6, 1, 2, 3))
    table = np.array([[4, 0, 2], [5, 1, -1]])
    for b in range(2):
        for t in range(lengths[b]):
            pool_k[table[b, t // 2], :, t % 2] = keys[b, :, t]
            pool_v[table[b, t // 2], :, t % 2] = values[b, :, t]
    contiguous = impl.attention_with_kvcache(q, keys, values, lengths, is_causal=True)
    paged = impl.attention_with_kvcache(
        q, pool_k, pool_v, lengths, block_table=table, is_causal=True
    )
    assert np.array_equal(contiguous, paged)


def test_kv_cache_bytes_rounds_pages_and_caps_rolling_caches():
    sizes = dict(num_layers=2, batch=3, num_kv_heads=2, head_dim=4, dtype="bfloat16")
    per_position = 2 * 2 * 3 * 2 * 4 * 2
    assert impl.kv_cache_bytes(**sizes, tokens=10) == 10 * per_position
    assert impl.kv_cache_bytes(**sizes, tokens=10, page_size=4) == 12 * per_position
    assert impl.kv_cache_bytes(**sizes, tokens=10, page_size=1) == 10 * per_position
    assert impl.kv_cache_bytes(**sizes, tokens=10, rolling_capacity=6) == 6 * per_position
    assert impl.kv_cache_bytes(**sizes, tokens=3, rolling_capacity=6) == 3 * per_position
    assert (
        impl.kv_cache_bytes(**sizes, tokens=10, rolling_capacity=6, page_size=4) == 8 * per_position
    )
    with pytest.raises(AttentionInputError, match="page_size"):
        impl.kv_cache_bytes(**sizes, tokens=10, page_size=0)
    with pytest.raises(AttentionInputError, match="seqlens"):
        paged_kv_cache_bytes(
            num_layers=1, seqlens=[3, -1], page_size=2, num_kv_heads=1, head_dim=1, dtype="float16"
        )


def test_cached_attention_through_a_paged_cache_appends_then_attends():
    rng = np.random.default_rng(6)
    cache = impl.PagedKVCache(5, 2, 1, 2)
    a, b = cache.add_sequence(), cache.add_sequence()
    k, v = _kv(rng, 2, 3)
    q = rng.normal(size=(2, 2, 3, 2))
    out = impl.cached_attention(q, k, v, cache, seqs=[a, b], window=(1, 0))
    want = impl.attention(q, k, v, is_causal=True, window=(1, 0))
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-15)
    assert cache.seqlens([a, b]).tolist() == [3, 3]


def test_a_failed_paged_cached_attention_rolls_the_append_back():
    rng = np.random.default_rng(7)
    cache = impl.PagedKVCache(4, 2, 1, 2)
    seq = cache.add_sequence()
    cache.append([seq], *_kv(rng, 1, 3))
    before = (np.array(cache.key_pages), np.array(cache.value_pages), cache.block_table([seq]))
    k, v = _kv(rng, 1, 2)
    with pytest.raises(WindowError):
        impl.cached_attention(np.ones((1, 1, 2, 2)), k, v, cache, seqs=[seq], window=(-1, 0))
    assert cache.seqlens([seq]).tolist() == [3] and cache.free_pages == 2
    assert np.array_equal(cache.key_pages, before[0])
    assert np.array_equal(cache.value_pages, before[1])
    assert np.array_equal(cache.block_table([seq]), before[2])


@pytest.mark.parametrize(
    "kwargs, message",
    [({}, "needs seqs"), ({"seqs": [0], "attn_mask": np.ones((1, 1, 1, 1), bool)}, "attn_mask")],
)
def test_paged_cached_attention_names_what_is_missing(kwargs, message):
    cache = impl.PagedKVCache(2, 2, 1, 2)
    cache.add_sequence()
    x = np.ones((1, 1, 1, 2))
    with pytest.raises(AttentionInputError, match=message):
        impl.cached_attention(x, x, x, cache, **kwargs)
    assert cache.seqlens([0]).tolist() == [0]


def test_seqs_with_a_contiguous_cache_are_refused():
    x = np.ones((1, 1, 1, 2))
    with pytest.raises(PagedCacheError, match="seqs"):
        impl.cached_attention(x, x, x, impl.KVCache(1, 1, 2), seqs=[0])


def test_storage_past_the_lengths_may_hold_anything_but_what_is_read_must_be_finite():
    keys = np.ones((2, 1, 4, 2))
    keys[0, :, 3] = np.nan  # past sequence 0's 3 positions: never read
    q = np.ones((2, 1, 1, 2))
    out = impl.attention_with_kvcache(q, keys, keys, np.array([3, 2]))
    assert np.isfinite(out).all()
    with pytest.raises(NonFiniteInputError, match="key_cache: sequence 0 reads NaN"):
        impl.attention_with_kvcache(q, keys, keys, np.array([4, 2]))


@pytest.mark.parametrize("seqs", [0.0, np.array(0), {0}, {0: 1}])
def test_seqs_must_be_an_id_or_an_ordered_collection(seqs):
    cache = impl.PagedKVCache(2, 2, 1, 2)
    cache.add_sequence()
    with pytest.raises(PagedCacheError, match="seqs"):
        cache.seqlens(seqs)


def test_free_takes_one_id_and_huge_unsigned_lengths_are_named():
    cache = impl.PagedKVCache(2, 2, 1, 2)
    seq = cache.add_sequence()
    with pytest.raises(PagedCacheError, match="free takes one"):
        cache.free([seq])
    x = np.ones((1, 1, 2, 1))
    with pytest.raises(CacheSeqlensError, match="18446744073709551615, past int64"):
        impl.attention_with_kvcache(x, x, x, np.array([2**64 - 1], np.uint64))


def test_paged_bytes_read_a_generator_once():
    sizes = dict(page_size=4, num_layers=2, num_kv_heads=2, head_dim=4, dtype="float16")
    with pytest.raises(AttentionInputError, match="seqlens"):
        paged_kv_cache_bytes(seqlens=(n for n in [-5]), **sizes)
    assert paged_kv_cache_bytes(seqlens=(n for n in [5]), **sizes).allocated == (512,)
