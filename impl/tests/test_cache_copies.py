"""Every cache of ``impl`` and the oracle is its own after ``copy.copy`` (as after
``copy.deepcopy``): an append to the copy or the original leaves the other as it was. A
quantized cache's storage dtype and scales, which its codes were made with, cannot be set
again."""

from __future__ import annotations

import copy

import ml_dtypes
import numpy as np
import pytest

from attnprops import impl
from attnprops import oracle

ROWS = np.arange(1.0, 5.0).reshape(1, 1, 2, 2)  # two positions, (B, Hkv, T, D)


def _plain(module):
    return module.KVCache(1, 1, 2)


def _rolling(module):
    return module.RollingKVCache(1, 1, 2, capacity=3)


def _quantized(module):
    return module.QuantizedKVCache(1, 1, 2, key_scale=0.5)


CACHES = [
    pytest.param(module, make, id=f"{module.__name__.split('.')[-1]}-{make.__name__[1:]}")
    for module in (impl, oracle)
    for make in (_plain, _rolling, _quantized)
]


@pytest.mark.parametrize("module, make", CACHES)
def test_a_shallow_copy_of_a_cache_is_a_cache_of_its_own(module, make):
    cache = make(module)
    cache.append(ROWS[:, :, :1], ROWS[:, :, :1])
    copied = copy.copy(cache)
    copied.append(ROWS[:, :, 1:], 2 * ROWS[:, :, 1:])
    cache.append(3 * ROWS[:, :, 1:], ROWS[:, :, 1:])
    assert len(cache) == len(copied) == 2
    np.testing.assert_array_equal(copied.keys, ROWS)
    np.testing.assert_array_equal(cache.keys[:, :, 1:], 3 * ROWS[:, :, 1:])


@pytest.mark.parametrize("module", [impl, oracle], ids=["impl", "oracle"])
def test_a_shallow_copy_of_a_paged_cache_is_a_pool_of_its_own(module):
    pool = module.PagedKVCache(4, 2, 1, 2)
    pool.append([pool.add_sequence()], ROWS[:, :, :1], ROWS[:, :, :1])
    copied = copy.copy(pool)
    copied.append([0], ROWS[:, :, 1:], ROWS[:, :, 1:])
    pool.append([pool.add_sequence()], 2 * ROWS[:, :, :1], ROWS[:, :, :1])
    assert pool.sequences == (0, 1) and copied.sequences == (0,)
    np.testing.assert_array_equal(pool.seqlens([0, 1]), [1, 1])
    np.testing.assert_array_equal(copied.seqlens([0]), [2])


@pytest.mark.parametrize("module", [impl, oracle], ids=["impl", "oracle"])
def test_a_quantized_caches_storage_and_scales_are_set_once(module):
    cache = module.QuantizedKVCache(1, 1, 2, key_scale=0.5)
    with pytest.raises(AttributeError):
        cache.storage = np.dtype(ml_dtypes.float8_e5m2)
    with pytest.raises(AttributeError, match="key_scale is read-only"):
        cache.key_scale = 2.0
    assert cache.storage == np.dtype(ml_dtypes.float8_e4m3fn)
    assert cache.key_scale.tolist() == [0.5]
    unset = module.QuantizedKVCache.__new__(module.QuantizedKVCache)
    assert not hasattr(unset, "key_scale")  # AttributeError, as any attribute not yet set
