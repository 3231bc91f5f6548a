"""The quantized cache's rules at their edges (:mod:`oracle.rules.quantization`), for both
caches: scales that cannot be changed after the codes were made with them, scales of every
kind refused with a :class:`QuantizationError` naming the argument, and out-of-range messages
that neither warn nor round the ratio down to the limit."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnprops import impl
from attnprops import oracle
from attnprops.oracle.rules import QuantizationError
from attnprops.oracle.rules import calibrated_scale
from attnprops.oracle.rules import check_quantization_scale
from attnprops.oracle.rules import fp8_max

CACHES = [impl.QuantizedKVCache, oracle.QuantizedKVCache]
IDS = ["impl", "oracle"]


@pytest.mark.parametrize("cache_type", CACHES, ids=IDS)
def test_scales_cannot_be_made_writeable(cache_type):
    cache = cache_type(1, 2, 4, key_scale=[0.5, 2.0], value_scale=0.25)
    for scales, expected in ((cache.key_scale, [0.5, 2.0]), (cache.value_scale, [0.25, 0.25])):
        assert scales.dtype == np.float32 and scales.tolist() == expected
        with pytest.raises(ValueError):
            scales.flags.writeable = True
        with pytest.raises(ValueError):
            scales[0] = -1.0
        assert scales.tolist() == expected


@pytest.mark.parametrize("cache_type", CACHES, ids=IDS)
def test_read_back_keys_and_codes_are_read_only(cache_type):
    cache = cache_type(1, 1, 2, dtype=np.float32, key_scale=0.5)
    cache.append(np.ones((1, 1, 3, 2), np.float32), np.ones((1, 1, 3, 2), np.float32))
    for array in (cache.keys, cache.values, cache.key_codes, cache.value_codes):
        assert not array.flags.writeable
        with pytest.raises(ValueError):
            array[...] = 0
    np.testing.assert_array_equal(cache.keys, np.ones((1, 1, 3, 2), np.float32))


@pytest.mark.parametrize(
    "scale, says",
    [
        (10**400, "must be finite and > 0"),  # float() would raise OverflowError
        (-(10**400), "must be finite and > 0"),
        ([[1.0], [1.0, 2.0]], "not an array of real numbers"),  # ragged: NumPy's ValueError
        ([10**400], "is not a real number dtype"),  # object dtype
        ("0.5", "is not a real number dtype"),
        (True, "is not a real number"),
        (1e39, "must be finite and > 0"),  # infinite in float32
        (1e-46, "must be finite and > 0"),  # 0 in float32
    ],
    ids=["1e400-int", "-1e400-int", "ragged", "object", "str", "bool", "1e39", "1e-46"],
)
def test_every_kind_of_bad_scale_is_a_quantization_error_naming_it(scale, says):
    with pytest.raises(QuantizationError, match=f"^value_scale: .*{says}"):
        check_quantization_scale(scale, 1, "value_scale")


@pytest.mark.parametrize("cache_type", CACHES, ids=IDS)
def test_out_of_range_message_neither_warns_nor_rounds_to_the_limit(cache_type):
    tiny = np.float32(1e-44)  # a float32 subnormal scale: 1e300 / 1e-44 overflows float64
    cache = cache_type(1, 1, 1, dtype=np.float64, key_scale=tiny)
    big = np.full((1, 1, 1, 1), 1e300)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(QuantizationError, match=r"^key: .* reaches inf > 448"):
            cache.append(big, np.zeros((1, 1, 1, 1)))
    # just past 448 * s: the ratio is printed with the digits that tell it from 448
    cache = cache_type(1, 1, 1, dtype=np.float64, key_scale=1.0)
    just_past = np.full((1, 1, 1, 1), np.nextafter(448.0, np.inf))
    with pytest.raises(QuantizationError, match=r"reaches 448\.00000000000006 > 448,"):
        cache.append(just_past, np.zeros((1, 1, 1, 1)))
    assert len(cache) == 0


@pytest.mark.parametrize("cache_type", CACHES, ids=IDS)
def test_scales_survive_copies_and_cannot_be_set_again(cache_type):
    """A deep copy or a pickle of a cache keeps scales that cannot be made writeable, and
    setting a scale again is refused: the stored codes were made with it."""
    import copy
    import pickle

    cache = cache_type(1, 1, 2, dtype=np.float32, key_scale=0.5)
    cache.append(np.ones((1, 1, 1, 2), np.float32), np.ones((1, 1, 1, 2), np.float32))
    for other in (copy.deepcopy(cache), pickle.loads(pickle.dumps(cache))):
        with pytest.raises(ValueError):
            other.key_scale.flags.writeable = True
        np.testing.assert_array_equal(other.keys, cache.keys)
    with pytest.raises(AttributeError, match="key_scale is read-only"):
        cache.key_scale = np.array([-1.0], np.float32)
    assert cache.key_scale.tolist() == [0.5]


@pytest.mark.parametrize(
    "storage", ["(2,-1)f8", "float8_e4m3fn,float8_e4m3fn", np.timedelta64(1, "s")]
)
def test_storage_names_numpy_cannot_read_are_quantization_errors(storage):
    with pytest.raises(QuantizationError, match="^storage: "):
        impl.QuantizedKVCache(1, 1, 1, storage=storage)


def test_a_duration_is_no_scale():
    """``np.timedelta64`` is a NumPy integer subclass: a duration, not a number."""
    for scale in (np.timedelta64(2), np.timedelta64(2, "D")):
        with pytest.raises(QuantizationError, match="^key_scale: "):
            check_quantization_scale(scale, 1, "key_scale")


@given(
    amax=st.floats(2.0**-100, 2.0**100, width=32),
    storage=st.sampled_from(["float8_e4m3fn", "float8_e5m2"]),
)
def test_calibrated_scale_is_the_smallest_that_stores_amax(amax, storage):
    """``calibrated_scale(amax)`` stores ``amax`` itself (``amax <= fp8_max * s`` exactly,
    the cache accepts it) and the next float32 below does not: the smallest such scale.
    ``amax / fp8_max`` rounded to nearest is refused for about half of all ``amax``."""
    limit = fp8_max(storage)
    scale = calibrated_scale(amax, storage)
    assert scale.dtype == np.float32 and scale.shape == ()
    assert amax <= limit * float(scale)
    assert amax > limit * float(np.nextafter(scale, np.float32(0)))
    cache = impl.QuantizedKVCache(
        1, 1, 1, dtype=np.float32, storage=storage, key_scale=scale, value_scale=scale
    )
    x = np.full((1, 1, 1, 1), amax, np.float32)
    cache.append(x, x)
    assert len(cache) == 1 and abs(float(cache.key_codes[0, 0, 0, 0])) <= limit


def test_calibrated_scale_of_a_quotient_that_rounds_down():
    """The attack's case: ``0.3 / 448`` rounds down in float32 and is refused for 0.3;
    calibrated_scale raises it by one ulp. Per-head arrays keep their shape; zero, negative,
    non-finite and non-real ``amax`` are refused naming it."""
    amax = float(np.float32(0.3))
    assert amax > 448 * float(np.float32(amax / 448))  # the plain quotient: refused
    assert calibrated_scale(amax) == np.nextafter(np.float32(amax / 448), np.float32(1))
    assert calibrated_scale(np.array([amax, 1.0])).shape == (2,)
    bad_amaxes = (0.0, -1.0, np.inf, np.nan, "0.5", [1.0, 0.0], True, 2**1024, np.array([]))
    masked = np.ma.array([1.0, 2.0], mask=[0, 1])  # np.array would drop the mask
    for bad in (*bad_amaxes, np.ones((2, 2)), masked):
        with pytest.raises(QuantizationError, match=r"^amax: "):
            calibrated_scale(bad)
    with pytest.raises(QuantizationError, match=r"^key_scale: a masked array"):
        impl.QuantizedKVCache(1, 2, 4, key_scale=masked)


@pytest.mark.parametrize(
    "scale", ["bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2fnuz"]
)
def test_scales_in_ml_dtypes_are_read(scale):
    """Scales in ml_dtypes' bfloat16 and fp8 (dtype kind "V", no numbers.Real) are read like
    float16 ones: a scalar per tensor, an array per head."""
    dtype = np.dtype(getattr(ml_dtypes, scale))
    per_tensor = check_quantization_scale(np.array(0.5, dtype)[()], 2, "key_scale")
    per_head = check_quantization_scale(np.array([0.5, 0.25], dtype), 2, "key_scale")
    assert per_tensor.tolist() == [0.5, 0.5] and per_head.tolist() == [0.5, 0.25]
