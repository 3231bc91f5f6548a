"""The oracle enforces every rule of oracle/rules/ with the prescribed error class."""

from __future__ import annotations

import numpy as np
import pytest

from attnprops import impl
from attnprops import oracle
from attnprops.oracle.rules import AttentionInputError
from attnprops.oracle.rules import DtypeError
from attnprops.oracle.rules import FullyMaskedRowError
from attnprops.oracle.rules import NonFiniteInputError
from attnprops.oracle.rules import ScaleError
from attnprops.oracle.rules import ShapeError
from attnprops.oracle.violations import EXAMPLE_IDS
from attnprops.oracle.violations import example


@pytest.mark.parametrize("example_id", EXAMPLE_IDS)
def test_oracle_rejects_with_exact_class_and_keeps_inputs(example_id):
    """Each rule violation of the registry (oracle/violations.py) raises its exact rulebook
    class naming the argument; inputs untouched (oracle.rules)."""
    fixed = example(example_id)
    before = {k: a.copy() for k, a in fixed.call.arrays().items()}
    with pytest.raises(fixed.error) as info:
        fixed.call.run(oracle)
    assert type(info.value) is fixed.error
    assert isinstance(info.value, AttentionInputError)
    assert isinstance(info.value, ValueError)
    assert fixed.argument in str(info.value)
    for name, array in fixed.call.arrays().items():
        assert np.array_equal(array, before[name], equal_nan=True), name


def test_oracle_scores_apply_the_same_rules():
    """oracle.attention_scores validates like attention (query_start and scale) (oracle.rules)."""
    q = np.ones((1, 4))
    k = np.ones((3, 4))
    with pytest.raises(oracle.AttentionInputError, match="query_start"):
        oracle.attention_scores(q, k, query_start=3)
    with pytest.raises(oracle.AttentionInputError, match="scale"):
        oracle.attention_scores(q, k, scale=0)


def test_oracle_fully_masked_rows_convention_is_validated():
    """fully_masked_rows must be "raise" or "zeros" (oracle.rules FULLY_MASKED_ROW_CONVENTIONS)."""
    q = np.ones((2, 2))
    with pytest.raises(AttentionInputError, match="fully_masked_rows"):
        oracle.attention(q, q, q, fully_masked_rows="nan")


def _cache_and_state():
    cache = oracle.KVCache(1, 2, 4, 3)
    rng = np.random.default_rng(3)
    cache.append(rng.standard_normal((1, 2, 2, 4)), rng.standard_normal((1, 2, 2, 3)))
    return cache, (cache.keys.copy(), cache.values.copy(), len(cache))


def _assert_state(cache, state):
    keys, values, length = state
    assert len(cache) == length
    assert np.array_equal(cache.keys, keys)
    assert np.array_equal(cache.values, values)


OK_K = np.zeros((1, 2, 1, 4))
OK_V = np.zeros((1, 2, 1, 3))
BAD_APPENDS = [
    ("key-3d", ShapeError, "key", OK_K[0], OK_V),
    ("key-batch", ShapeError, "key", np.zeros((2, 2, 1, 4)), np.zeros((2, 2, 1, 3))),
    ("key-heads", ShapeError, "key", np.zeros((1, 1, 1, 4)), OK_V),
    ("key-head-dim", ShapeError, "key", np.zeros((1, 2, 1, 5)), OK_V),
    ("value-dim", ShapeError, "value", OK_K, np.zeros((1, 2, 1, 4))),
    ("length-mismatch", ShapeError, "value", OK_K, np.zeros((1, 2, 2, 3))),
    ("zero-size", ShapeError, "key", np.zeros((1, 2, 0, 4)), np.zeros((1, 2, 0, 3))),
    ("key-dtype", DtypeError, "key", OK_K.astype(np.float32), OK_V),
    ("value-int", DtypeError, "value", OK_K, OK_V.astype(np.int64)),
    ("key-nan", NonFiniteInputError, "key", np.full((1, 2, 1, 4), np.nan), OK_V),
    ("value-inf", NonFiniteInputError, "value", OK_K, np.full((1, 2, 1, 3), np.inf)),
]


@pytest.mark.parametrize("name,exc,arg,key,value", BAD_APPENDS, ids=[b[0] for b in BAD_APPENDS])
def test_oracle_cache_append_rejects_and_is_atomic(name, exc, arg, key, value):
    """A bad append raises its rulebook class and leaves the oracle cache unchanged (rules.check_cache_append)."""
    cache, state = _cache_and_state()
    with pytest.raises(exc) as info:
        cache.append(key, value)
    assert type(info.value) is exc and arg in str(info.value)
    _assert_state(cache, state)


BAD_CACHED_CALLS = [
    ("mask-shape", ShapeError, "attn_mask", dict(attn_mask=np.ones((1, 4, 1, 2), bool))),
    ("mask-int", DtypeError, "attn_mask", dict(attn_mask=np.ones((1, 4, 1, 3), np.int64))),
    (
        "mask-fully-masked",
        FullyMaskedRowError,
        "attn_mask",
        dict(attn_mask=np.zeros((1, 4, 1, 3), bool)),
    ),
    ("query-head-dim", ShapeError, "key", dict(query=np.zeros((1, 4, 1, 5)))),
    ("query-nan", NonFiniteInputError, "query", dict(query=np.full((1, 4, 1, 4), np.nan))),
    ("query-dtype", DtypeError, "query", dict(query=np.zeros((1, 4, 1, 4), np.float32))),
    ("query-3-heads", ShapeError, "num_kv_heads", dict(query=np.zeros((1, 3, 1, 4)))),
    ("query-positions", ShapeError, "query", dict(query=np.zeros((1, 4, 2, 4)))),
    ("query-3d", ShapeError, "query", dict(query=np.zeros((4, 1, 4)))),
    ("scale", ScaleError, "scale", dict(scale=-1.0)),
]


@pytest.mark.parametrize(
    "name,exc,arg,override", BAD_CACHED_CALLS, ids=[b[0] for b in BAD_CACHED_CALLS]
)
def test_oracle_cached_attention_rolls_back(name, exc, arg, override):
    """A failing cached_attention (bad mask/query/scale) raises and undoes its append (oracle/cache.py)."""
    cache, state = _cache_and_state()
    kwargs = dict(override)
    query = kwargs.pop("query", np.zeros((1, 4, 1, 4)))
    with pytest.raises(exc) as info:
        oracle.cached_attention(query, OK_K, OK_V, cache, **kwargs)
    assert type(info.value) is exc and arg in str(info.value)
    _assert_state(cache, state)
    # the cache still works after the failure
    out = oracle.cached_attention(np.zeros((1, 4, 1, 4)), OK_K, OK_V, cache).value
    assert out.shape == (1, 4, 1, 3) and len(cache) == state[2] + 1


@pytest.mark.parametrize("dtype", ["(2,-1)f8", "float32,float32", np.timedelta64(1, "s")])
def test_cache_dtypes_numpy_cannot_read_are_dtype_errors(dtype):
    """A dtype string NumPy refuses with a ValueError (not only a TypeError) is a DtypeError
    naming ``dtype``, for both caches and for ``kv_cache_bytes``."""
    for make in (
        lambda: oracle.KVCache(1, 1, 1, dtype=dtype),
        lambda: impl.KVCache(1, 1, 1, dtype=dtype),
        lambda: impl.kv_cache_bytes(
            num_layers=1, batch=1, tokens=1, num_kv_heads=1, head_dim=1, dtype=dtype
        ),
    ):
        with pytest.raises(DtypeError, match="^dtype: "):
            make()


@pytest.mark.parametrize("cls", ["KVCache", "QuantizedKVCache"])
def test_cache_capacity_is_checked_as_impl_checks_it(cls):
    """The oracle's caches take impl's ``capacity`` (a list has no slots: unused) and refuse
    the same values with the same error naming it, so code written for one runs on both."""
    for module in (oracle, impl):
        cache = getattr(module, cls)(1, 1, 2, capacity=3)
        four = np.ones((1, 1, 4, 2))  # one position past the three slots asked for
        assert len(cache) == 0 and cache.append(four, four) == 0
        assert len(cache) == 4 and np.array_equal(cache.keys, four)
        for bad in (0, -1, 2.5, True):
            with pytest.raises(AttentionInputError, match="^capacity") as info:
                getattr(module, cls)(1, 1, 2, capacity=bad)
            assert isinstance(info.value, ValueError)


def test_a_scale_that_is_an_array_is_named_as_one():
    """A 0-d array is no real number (PyTorch's SDPA takes a float too): the message names
    its type and the way out, not only "not a real number"."""
    q = np.ones((2, 4))
    with pytest.raises(ScaleError, match=r"scale: array\(0.5\) \(a numpy.ndarray\) .*float\(\)"):
        oracle.attention(q, q, q, scale=np.array(0.5))
