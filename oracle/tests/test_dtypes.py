"""The rulebook's dtypes (:mod:`oracle.rules.dtypes`): bfloat16 accepted and read exactly by
both references, fp8 refused with a message that says it is a storage dtype."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from attnprops import impl
from attnprops import oracle
from attnprops.oracle import ball
from attnprops.oracle.rules import BFLOAT16
from attnprops.oracle.rules import FLOAT_DTYPES
from attnprops.oracle.rules import DtypeError
from attnprops.oracle.rules import ShapeError
from attnprops.oracle.rules import compute_dtype
from attnprops.oracle.rules import kv_cache_bytes
from attnprops.oracle.rules import paged_kv_cache_bytes

BF16 = BFLOAT16


def _every_finite_bfloat16() -> np.ndarray:
    bits = np.arange(2**16, dtype=np.uint16).view(BF16)
    return bits[np.isfinite(bits.astype(np.float32))]


def test_every_finite_bfloat16_value_enters_the_oracle_exactly():
    """One visible key has weight 1, so the output is its value row: every one of the
    65,280 finite bfloat16 values comes out as itself (subnormals, -0 and 3.39e38 included),
    from the 50-digit reference and from the ball reference."""
    values = _every_finite_bfloat16()
    q = np.ones((1, 1, 1, 1), BF16)
    k = np.ones((1, 1, 1, 1), BF16)
    v = values.reshape(1, 1, 1, -1)
    out = oracle.attention(q, k, v).value
    assert (out.reshape(-1) == values.astype(np.float64)).all()
    assert (np.asarray(ball.attention(q, k, v)).reshape(-1) == values.astype(np.float64)).all()


def test_bfloat16_is_computed_in_float32_and_fp8_is_storage_only():
    assert BF16 in FLOAT_DTYPES and compute_dtype(BF16) == np.float32
    assert compute_dtype(np.float16) == np.float32 and compute_dtype(np.float64) == np.float64
    for fp8 in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2):
        q = np.ones((1, 1, 2, 4), fp8)
        with pytest.raises(DtypeError, match=r"query: dtype float8_e.* storage dtype"):
            oracle.attention(q, q, q)
        with pytest.raises(DtypeError, match=r"query: dtype float8_e.* storage dtype"):
            impl.attention(q, q, q)
        with pytest.raises(DtypeError, match=r"dtype: dtype float8_e.*storage dtype"):
            impl.KVCache(1, 1, 4, dtype=fp8)
        mask = np.zeros((2, 2), fp8)  # a float8 mask: the same hint, not "ambiguous"
        with pytest.raises(DtypeError, match=r"^attn_mask: dtype float8_e.*storage dtype"):
            impl.attention(*(np.ones((1, 1, 2, 4), np.float32),) * 3, attn_mask=mask)
        sizes = dict(num_layers=2, batch=1, tokens=3, num_kv_heads=2, head_dim=8)
        assert kv_cache_bytes(**sizes, dtype=fp8) == 2 * 2 * 3 * 2 * 8
        assert kv_cache_bytes(**sizes, dtype=np.dtype(fp8).name) == 2 * 2 * 3 * 2 * 8
    assert (
        kv_cache_bytes(num_layers=1, batch=1, tokens=1, num_kv_heads=1, head_dim=1, dtype=BF16) == 4
    )


def test_a_bfloat16_kv_cache_holds_bfloat16():
    cache = impl.KVCache(1, 2, 4, dtype="bfloat16")
    rng = np.random.default_rng(0)
    k = rng.standard_normal((1, 2, 3, 4)).astype(BF16)
    q = rng.standard_normal((1, 4, 3, 4)).astype(BF16)
    out = impl.cached_attention(q, k, k, cache)
    assert out.dtype == BF16 and cache.dtype == BF16
    assert (cache.keys == k).all()
    with pytest.raises(DtypeError, match="query: dtype float16 differs from the cache's bfloat16"):
        impl.cached_attention(q.astype(np.float16), k, k, cache)


@pytest.mark.parametrize("name", ["float8_e4m3", "float8_e4m3fnuz", "float8_e5m2fnuz"])
def test_every_float8_variant_gets_the_storage_hint(name):
    """ml_dtypes' other 8-bit floats are refused like e4m3fn and e5m2, with the same hint."""
    q = np.ones((1, 1, 2, 4), getattr(ml_dtypes, name))
    with pytest.raises(DtypeError, match=r"^query: dtype float8_.*storage dtype"):
        impl.attention(q, q, q)


def test_kv_cache_bytes_counts_the_value_dim_and_matches_a_quantized_cache():
    """With ``Dv != D`` the values count ``Dv`` per position: the bytes of a bfloat16
    quantized cache's codes (fp8, 1 byte) and of a plain bfloat16 cache's payload."""
    cache = impl.QuantizedKVCache(1, 2, 64, 16, dtype="bfloat16")
    zeros = np.zeros((1, 2, 10, 64), BF16), np.zeros((1, 2, 10, 16), BF16)
    cache.append(*zeros)
    sizes = dict(num_layers=1, batch=1, tokens=10, num_kv_heads=2, head_dim=64, value_dim=16)
    assert kv_cache_bytes(**sizes, dtype=cache.storage) == 1600
    assert cache.key_codes.nbytes + cache.value_codes.nbytes == 1600
    assert kv_cache_bytes(**sizes, dtype=BF16) == 3200
    assert kv_cache_bytes(**{**sizes, "value_dim": None}, dtype=BF16) == 2 * 10 * 2 * 64 * 2
    with pytest.raises(ShapeError, match=r"^value_dim"):
        kv_cache_bytes(**{**sizes, "value_dim": 0}, dtype=BF16)
    paged = dict(num_layers=1, seqlens=[5], page_size=4, num_kv_heads=2, head_dim=4)
    bytes_ = paged_kv_cache_bytes(**paged, dtype="float32", value_dim=6)
    assert bytes_.used == (5 * 2 * (4 + 6) * 4,) and bytes_.allocated == (8 * 2 * (4 + 6) * 4,)
