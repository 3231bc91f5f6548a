"""impl.KVCache / cached_attention / kv_cache_bytes (and the oracle's cache for the shared rules)."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose
from numpy.testing import assert_array_equal

from attnprops import impl
from attnprops import oracle
from attnprops.oracle.rules import AttentionInputError
from attnprops.oracle.rules import DtypeError
from attnprops.oracle.rules import FullyMaskedRowError
from attnprops.oracle.rules import NonFiniteInputError
from attnprops.oracle.rules import ScaleError
from attnprops.oracle.rules import ShapeError
from attnprops.oracle.violations import BY_RULE
from attnprops.oracle.violations import CACHE_APPEND_RULES
from attnprops.oracle.violations import Call
from attnprops.oracle.violations import Pick

MODULES = {"impl": impl, "oracle": oracle}
B, HQ, HKV, D, DV = 1, 4, 2, 4, 3


def _block(t, seed, b=B, h=HKV, d=D, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal((b, h, t, d)).astype(dtype)


def _filled(module, capacity=None):
    kwargs = {} if capacity is None else {"capacity": capacity}
    cache = module.KVCache(B, HKV, D, DV, **kwargs)
    cache.append(_block(2, 1), _block(2, 2, d=DV))
    return cache, (cache.keys.copy(), cache.values.copy(), len(cache))


def _assert_state(cache, state):
    keys, values, length = state
    assert len(cache) == length
    assert cache.keys.shape[2] == length and cache.values.shape[2] == length
    assert_array_equal(cache.keys, keys)
    assert_array_equal(cache.values, values)


def test_append_returns_previous_length_and_grows():
    """append returns the length before the append (the new block's query_start) (kv_cache.KVCache.append)."""
    cache = impl.KVCache(B, HKV, D, DV)
    assert len(cache) == 0 and cache.keys.shape == (B, HKV, 0, D)
    assert cache.values.shape == (B, HKV, 0, DV)
    assert cache.append(_block(3, 1), _block(3, 2, d=DV)) == 0
    assert cache.append(_block(1, 3), _block(1, 4, d=DV)) == 3
    assert cache.append(_block(2, 5), _block(2, 6, d=DV)) == 4
    assert len(cache) == 6
    assert_array_equal(cache.keys, np.concatenate([_block(3, 1), _block(1, 3), _block(2, 5)], 2))
    assert_array_equal(
        cache.values,
        np.concatenate([_block(3, 2, d=DV), _block(1, 4, d=DV), _block(2, 6, d=DV)], 2),
    )
    assert cache.batch == B and cache.num_kv_heads == HKV
    assert cache.head_dim == D and cache.value_dim == DV and cache.dtype == np.float64


def test_value_dim_defaults_to_head_dim():
    """value_dim=None means Dv = head_dim (kv_cache.KVCache)."""
    cache = impl.KVCache(2, 1, 5)
    assert cache.value_dim == 5 and cache.values.shape == (2, 1, 0, 5)


def test_append_stores_copies():
    """Mutating the caller's arrays after append leaves the cache unchanged (kv_cache.KVCache.append)."""
    cache = impl.KVCache(B, HKV, D, DV, capacity=1)
    key, value = _block(3, 1), _block(3, 2, d=DV)
    cache.append(key, value)
    key[...] = 99.0
    value[...] = -99.0
    assert_array_equal(cache.keys, _block(3, 1))
    assert_array_equal(cache.values, _block(3, 2, d=DV))
    assert not np.shares_memory(cache.keys, key)


def test_keys_values_are_read_only_views():
    """keys/values are read-only views (no copy) of the first len positions (kv_cache.KVCache.keys)."""
    cache = impl.KVCache(B, HKV, D, DV)
    cache.append(_block(2, 1), _block(2, 2, d=DV))
    keys, values = cache.keys, cache.values
    assert not keys.flags.writeable and not values.flags.writeable
    with pytest.raises(ValueError):
        keys[0, 0, 0, 0] = 1.0
    with pytest.raises(ValueError):
        values[...] = 0.0
    assert np.shares_memory(cache.keys, cache.keys)  # both views of the same storage
    assert_array_equal(cache.keys, _block(2, 1))


@pytest.mark.parametrize("initial", [1, 3, 16])
def test_capacity_doubles(initial):
    """Appending 1 token 100 times: capacity is initial * 2**k >= len, O(log n) reallocations (kv_cache docstring, CLRS ch. 17)."""
    cache = impl.KVCache(1, 1, 2, capacity=initial)
    assert cache.capacity == initial
    capacities = []
    for t in range(100):
        cache.append(np.full((1, 1, 1, 2), float(t)), np.full((1, 1, 1, 2), -float(t)))
        capacities.append(cache.capacity)
        assert cache.capacity >= len(cache) == t + 1
    for c in capacities:
        ratio = c // initial
        assert c % initial == 0 and ratio & (ratio - 1) == 0  # initial times a power of two
    distinct = sorted(set(capacities))
    expected = [initial * 2**i for i in range(len(distinct))]
    assert distinct == expected
    assert capacities[-1] < 2 * max(100, initial)  # at most double what is needed
    assert len(distinct) - 1 <= int(np.ceil(np.log2(100))) + 1  # reallocations O(log n)
    assert_array_equal(cache.keys[0, 0, :, 0], np.arange(100.0))
    assert_array_equal(cache.values[0, 0, :, 1], -np.arange(100.0))


def test_big_append_grows_to_fit():
    """An append larger than double the capacity grows straight to the needed size (kv_cache.KVCache.append)."""
    cache = impl.KVCache(1, 1, 2, capacity=2)
    cache.append(np.ones((1, 1, 9, 2)), np.ones((1, 1, 9, 2)))
    assert len(cache) == 9 and cache.capacity >= 9


def test_gqa_cache_holds_kv_heads():
    """A GQA cache stores Hkv heads, not Hq; cached output equals full GQA attention (seed 003 MHA/MQA/GQA)."""
    rng = np.random.default_rng(9)
    q = rng.standard_normal((2, 6, 5, 4))
    k = rng.standard_normal((2, 2, 5, 4))
    v = rng.standard_normal((2, 2, 5, 3))
    cache = impl.KVCache(2, 2, 4, 3)
    out = np.concatenate(
        [
            impl.cached_attention(q[:, :, i : i + 1], k[:, :, i : i + 1], v[:, :, i : i + 1], cache)
            for i in range(5)
        ],
        2,
    )
    assert cache.keys.shape == (2, 2, 5, 4) and cache.values.shape == (2, 2, 5, 3)
    assert out.shape == (2, 6, 5, 3)
    assert_allclose(out, impl.attention(q, k, v, is_causal=True), rtol=1e-12, atol=1e-15)
    # MQA: one K/V head
    mqa = impl.KVCache(2, 1, 4, 3)
    impl.cached_attention(q, k[:, :1], v[:, :1], mqa)
    assert mqa.keys.shape == (2, 1, 5, 4)


def test_cached_attention_with_mask():
    """cached_attention's attn_mask broadcasts to (B, Hq, Tnew, T_total) and is AND-ed with causality (kv_cache.cached_attention)."""
    rng = np.random.default_rng(2)
    q = rng.standard_normal((1, 2, 4, 3))
    k = rng.standard_normal((1, 2, 4, 3))
    v = rng.standard_normal((1, 2, 4, 3))
    pad = np.array([True, False, True, True])  # key 1 is padding
    cache = impl.KVCache(1, 2, 3)
    impl.cached_attention(q[:, :, :1], k[:, :, :1], v[:, :, :1], cache)
    step = impl.cached_attention(
        q[:, :, 1:], k[:, :, 1:], v[:, :, 1:], cache, attn_mask=pad[None, None, None, :]
    )
    full = impl.attention(q, k, v, is_causal=True, attn_mask=pad)
    assert_allclose(step, full[:, :, 1:], rtol=1e-12, atol=1e-15)


def test_kv_cache_bytes_seed000():
    """32 layers, batch 1, 10,000 tokens, 32 KV heads, head_dim 128, fp16 = 5,242,880,000 bytes (seed 000 §6)."""
    n = impl.kv_cache_bytes(
        num_layers=32, batch=1, tokens=10_000, num_kv_heads=32, head_dim=128, dtype=np.float16
    )
    assert n == 5_242_880_000 and isinstance(n, int)
    # GQA with 8 KV heads is a quarter of that (seed 003: Hkv/Hq)
    assert (
        impl.kv_cache_bytes(
            num_layers=32, batch=1, tokens=10_000, num_kv_heads=8, head_dim=128, dtype="float16"
        )
        == 5_242_880_000 // 4
    )
    assert (
        impl.kv_cache_bytes(
            num_layers=1, batch=1, tokens=1, num_kv_heads=1, head_dim=1, dtype=np.float64
        )
        == 16
    )


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("batch,heads,tokens,dim", [(2, 3, 5, 4), (1, 2, 17, 8)])
def test_kv_cache_bytes_matches_real_cache(dtype, batch, heads, tokens, dim):
    """A real KVCache's keys.nbytes + values.nbytes equals kv_cache_bytes(num_layers=1, ...) (seed 000 §6: 480-byte check)."""
    cache = impl.KVCache(batch, heads, dim, dtype=dtype)
    for t in range(tokens):
        cache.append(np.ones((batch, heads, 1, dim), dtype), np.ones((batch, heads, 1, dim), dtype))
    assert len(cache) == tokens
    expected = impl.kv_cache_bytes(
        num_layers=1, batch=batch, tokens=tokens, num_kv_heads=heads, head_dim=dim, dtype=dtype
    )
    assert cache.keys.nbytes + cache.values.nbytes == expected
    if (batch, heads, tokens, dim, dtype) == (2, 3, 5, 4, np.float16):
        assert expected == 480  # the seed's small real fp16 pair


@pytest.mark.parametrize("field", ["num_layers", "batch", "tokens", "num_kv_heads", "head_dim"])
@pytest.mark.parametrize("bad", [0, -3, True, False, 1.5, None])
def test_kv_cache_bytes_rejects_bad_sizes(field, bad):
    """kv_cache_bytes sizes must be ints >= 1, not bool -> ShapeError naming the size (rules.check_positive_int)."""
    sizes = dict(num_layers=2, batch=1, tokens=10, num_kv_heads=2, head_dim=8)
    sizes[field] = bad
    with pytest.raises(ShapeError, match=field):
        impl.kv_cache_bytes(dtype=np.float16, **sizes)


@pytest.mark.parametrize("dtype", ["int32", "float12", np.int64, np.complex128, object, "bool"])
def test_kv_cache_bytes_rejects_unknown_dtype(dtype):
    """kv_cache_bytes rejects non-KV-cache dtypes with DtypeError naming dtype (rules.kv_cache_bytes)."""
    with pytest.raises(DtypeError, match="dtype"):
        impl.kv_cache_bytes(
            num_layers=1, batch=1, tokens=1, num_kv_heads=1, head_dim=1, dtype=dtype
        )


@pytest.mark.parametrize("module_name", sorted(MODULES))
@pytest.mark.parametrize(
    "args,kwargs,exc",
    [
        ((0, 1, 4), {}, ShapeError),
        ((1, -1, 4), {}, ShapeError),
        ((1, 1, True), {}, ShapeError),
        ((1, 1, 4, 0), {}, ShapeError),
        ((1, 1, 4), {"dtype": np.int32}, DtypeError),
        ((1, 1, 4), {"dtype": "not-a-dtype"}, DtypeError),
    ],
    ids=["batch0", "heads-neg", "dim-bool", "value-dim0", "int-dtype", "bad-name"],
)
def test_cache_constructor_rejects(module_name, args, kwargs, exc):
    """KVCache sizes must be ints >= 1 and dtype float16/32/64 (rules.check_cache_config)."""
    with pytest.raises(exc):
        MODULES[module_name].KVCache(*args, **kwargs)


OK_K = np.zeros((B, HKV, 1, D))
OK_V = np.zeros((B, HKV, 1, DV))


@pytest.mark.parametrize("rule", CACHE_APPEND_RULES)
@pytest.mark.parametrize("module_name", sorted(MODULES))
def test_bad_append_raises_and_leaves_cache_unchanged(module_name, rule):
    """Each append rule of the registry (oracle/violations.py), broken on a filled cache,
    raises its rulebook class naming the argument; keys, values and len unchanged, and the
    caller's arrays too (rules.check_cache_append)."""
    cache, state = _filled(MODULES[module_name])
    violation = BY_RULE[rule]
    bad = violation.breaks(Call(None, OK_K.copy(), OK_V.copy(), {}, "append"), Pick())
    key_before, value_before = bad.key.copy(), bad.value.copy()
    with pytest.raises(violation.error) as info:
        cache.append(bad.key, bad.value)
    assert type(info.value) is violation.error and isinstance(info.value, AttentionInputError)
    assert violation.argument in str(info.value)
    _assert_state(cache, state)
    assert np.array_equal(bad.key, key_before, equal_nan=True)
    assert np.array_equal(bad.value, value_before, equal_nan=True)


BAD_CACHED_CALLS = [
    ("mask-shape", ShapeError, "attn_mask", dict(attn_mask=np.ones((1, HQ, 1, 2), bool))),
    ("mask-int", DtypeError, "attn_mask", dict(attn_mask=np.ones((1, HQ, 1, 3), np.int64))),
    ("mask-nan", NonFiniteInputError, "attn_mask", dict(attn_mask=np.full((1, HQ, 1, 3), np.nan))),
    (
        "mask-fully-masked",
        FullyMaskedRowError,
        "attn_mask",
        dict(attn_mask=np.zeros((1, HQ, 1, 3), bool)),
    ),
    ("query-head-dim", ShapeError, "key", dict(query=np.zeros((B, HQ, 1, D + 1)))),
    ("query-nan", NonFiniteInputError, "query", dict(query=np.full((B, HQ, 1, D), np.nan))),
    ("query-dtype", DtypeError, "query", dict(query=np.zeros((B, HQ, 1, D), np.float32))),
    ("query-3-heads", ShapeError, "num_kv_heads", dict(query=np.zeros((B, 3, 1, D)))),
    ("query-batch", ShapeError, "key", dict(query=np.zeros((2, HQ, 1, D)))),
    ("query-positions", ShapeError, "query", dict(query=np.zeros((B, HQ, 2, D)))),
    ("query-3d", ShapeError, "query", dict(query=np.zeros((HQ, 1, D)))),
    ("scale", ScaleError, "scale", dict(scale=-1.0)),
    ("bad-key", NonFiniteInputError, "key", dict(key=np.full((B, HKV, 1, D), np.inf))),
]


# impl with capacity 2 (full after the first two tokens): the failed append reallocated
CACHE_KINDS = [("impl", None), ("impl", 2), ("oracle", None)]


@pytest.mark.parametrize(
    "name,exc,arg,override", BAD_CACHED_CALLS, ids=[b[0] for b in BAD_CACHED_CALLS]
)
@pytest.mark.parametrize(
    "module_name,capacity", CACHE_KINDS, ids=["impl", "impl-realloc", "oracle"]
)
def test_failed_cached_attention_rolls_back(module_name, capacity, name, exc, arg, override):
    """cached_attention with a bad mask/query/scale raises and undoes its append: len and contents as before (kv_cache.cached_attention)."""
    module = MODULES[module_name]
    cache, state = _filled(module, capacity)
    capacity_before = getattr(cache, "capacity", None)
    kwargs = dict(override)
    query = kwargs.pop("query", np.zeros((B, HQ, 1, D)))
    key = kwargs.pop("key", OK_K)
    with pytest.raises(exc) as info:
        module.cached_attention(query, key, OK_V, cache, **kwargs)
    assert type(info.value) is exc and arg in str(info.value)
    _assert_state(cache, state)
    assert getattr(cache, "capacity", None) == capacity_before
    # the cache still works and the next append lands at the old length
    out = module.cached_attention(
        np.zeros((B, HQ, 1, D)), np.ones((B, HKV, 1, D)), np.ones((B, HKV, 1, DV)), cache
    )
    assert len(cache) == state[2] + 1
    assert_array_equal(cache.keys[:, :, -1], 1.0)
    value = getattr(out, "value", out)
    assert value.shape == (B, HQ, 1, DV)


def test_cached_attention_refuses_a_foreign_cache():
    """A cache that is not the module's own KVCache is refused with an error naming `cache`
    (it used to fail with AttributeError on a private method); the real cache is untouched."""
    from attnprops.oracle.rules import AttentionInputError

    q = k = v = np.zeros((1, 1, 1, 2))
    for module, foreign in (
        (impl, "x"),
        (impl, oracle.KVCache(1, 1, 2)),
        (oracle, impl.KVCache(1, 1, 2)),
        (oracle, None),
    ):
        with pytest.raises(
            AttentionInputError,
            match="^cache: .* is not .*KVCache or a subclass; create one with KVCache",
        ):
            module.cached_attention(q, k, v, foreign)
        if hasattr(foreign, "keys"):
            assert len(foreign) == 0


def test_cached_query_of_another_dtype_than_the_cache_is_blamed_on_the_query():
    """A float32 query on a float64 cache: the error names `query` (it used to name `key`,
    the cached keys the caller passed correctly); impl and oracle agree, the cache is kept."""
    from attnprops.oracle.rules import DtypeError

    for module in (impl, oracle):
        cache = module.KVCache(1, 1, 2)
        with pytest.raises(DtypeError, match="^query: dtype float32 differs from the cache's"):
            module.cached_attention(
                np.zeros((1, 1, 1, 2), np.float32),
                np.zeros((1, 1, 1, 2)),
                np.zeros((1, 1, 1, 2)),
                cache,
            )
        assert len(cache) == 0


def test_attention_steps_take_a_kv_cache_subclass_only():
    """impl.Attention(cache_type=C): C must subclass impl.KVCache; its cached_attention then
    refuses any other cache and names C as the class to create."""

    class MyCache(impl.KVCache):
        pass

    for bad in ("x", int, impl.KVCache(1, 1, 2)):
        with pytest.raises(AttentionInputError, match="^cache_type: .* is not a subclass"):
            impl.Attention(cache_type=bad)
    steps = impl.Attention(cache_type=MyCache)
    q = k = v = np.ones((1, 1, 1, 2))
    with pytest.raises(
        AttentionInputError, match="is not .*MyCache or a subclass; create one with MyCache"
    ):
        steps.cached_attention(q, k, v, impl.KVCache(1, 1, 2))
    assert steps.cached_attention(q, k, v, MyCache(1, 1, 2)).shape == (1, 1, 1, 2)
