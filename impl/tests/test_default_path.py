"""The default ``block_size=None`` of impl.attention: the faster path for the call's size.

The rule (:func:`impl.default_path.default_block_size`, reasons and measurements in
its module docstring): dense when ``Tk <= 128`` or ``B * Hq * Tq * Tk < 2**15``; else
blocked with ``n = 128`` for causal calls whose query tiles see at most 3/4 of the keys, for
``B * Hq * 128 * (D + Dv) >= 2**19`` and for ``B * Hq * Tq * Tk >= 2**24``; else dense. The
default is *bitwise* the path it picks (so small calls, every one the value properties draw,
are bitwise the dense formula of ``impl/tests/formula.py``), and the name ``"dense"``
keeps the dense path reachable at every size. Speed is measured by ``python -m attnprops.benchmarks``
(section 3) and ``python -m attnprops.benchmarks.default_path``, never asserted here.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from attnprops import impl
from attnprops import oracle
from attnprops.impl.default_path import default_block_size
from attnprops.impl.tests import formula
from attnprops.oracle.rules import FullyMaskedRowError
from attnprops.oracle.rules import NonFiniteInputError
from attnprops.oracle.rules import ScoreOverflowError


def _pick(B, Hq, Hkv, Tq, Tk, D, Dv, is_causal=False, query_start=None):
    return default_block_size(
        (B, Hq, Tq, D), (B, Hkv, Tk, D), (B, Hkv, Tk, Dv), is_causal, query_start
    )


@pytest.mark.parametrize(
    ("dims", "causal", "start", "want"),
    [
        ((1, 1, 1, 6, 6, 4, 4), True, None, None),  # the value properties' sizes
        ((2, 4, 2, 6, 6, 8, 8), False, None, None),
        ((1, 64, 64, 128, 128, 128, 128), True, None, None),  # one key block, however large
        ((1, 1, 1, 4096, 128, 64, 64), True, None, None),
        ((1, 32, 32, 1, 256, 128, 128), False, None, None),  # 8192 scores
        ((1, 8, 8, 2, 2047, 1024, 1024), False, None, None),  # 32,752 scores, just below 2**15
        ((1, 8, 8, 2, 2048, 1024, 1024), False, None, 128),  # 2**15 scores, K/V 2**21 per block
        # causal: the query tiles see at most 3/4 of the keys
        ((1, 8, 8, 1024, 1024, 64, 64), True, None, 128),  # the causal benchmark shape
        ((1, 1, 1, 256, 256, 64, 64), True, None, 128),  # tiles see 128 + 256 of 2 * 256 keys
        ((1, 1, 1, 255, 255, 64, 64), True, None, None),  # 382 of 510: more than 3/4
        ((1, 1, 1, 300, 300, 64, 64), True, None, None),  # 684 of 900
        ((1, 1, 1, 1024, 1024, 64, 64), False, None, None),  # the same without causality
        ((1, 8, 8, 256, 4096, 64, 64), True, None, None),  # a chunk at the end: 98% seen
        ((1, 8, 8, 256, 4096, 64, 64), True, 0, 128),  # the same chunk at the start
        # K/V elements the products read per key block: B * Hq * 128 * (D + Dv)
        ((1, 32, 32, 1, 8192, 128, 128), False, None, 128),  # the decode benchmark shape: 2**20
        ((1, 32, 8, 1, 8192, 128, 128), False, None, 128),  # GQA: each query head reads its block
        ((1, 32, 32, 1, 1024, 64, 64), False, None, 128),  # 2**19
        ((1, 16, 16, 1, 4096, 64, 64), False, None, None),  # 2**18
        ((1, 1, 1, 1, 65536, 128, 128), False, None, None),  # one head
        ((1, 1, 1, 128, 2048, 64, 64), False, None, None),  # few rows per tile
        # the score array: 2**24 elements
        ((1, 8, 8, 2048, 1024, 64, 64), False, None, 128),
        ((1, 8, 8, 2047, 1024, 64, 64), False, None, None),
    ],
)
def test_default_rule(dims, causal, start, want):
    """Dense for one key block or few scores; blocked with n = 128 for causal skipping,
    many K/V elements per block, or a huge score array; dense otherwise."""
    assert _pick(*dims, is_causal=causal, query_start=start) == want


def _inputs(rng, B, Hq, Hkv, Tq, Tk, D, Dv, dtype):
    return (
        rng.standard_normal((B, Hq, Tq, D)).astype(dtype),
        rng.standard_normal((B, Hkv, Tk, D)).astype(dtype),
        rng.standard_normal((B, Hkv, Tk, Dv)).astype(dtype),
    )


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_small_calls_are_bitwise_the_dense_path(dtype):
    """T <= 6 (what the property suite draws), masks, causality, 2-D: the default result is
    bitwise block_size="dense" and the formula (impl/tests/formula.py)."""
    rng = np.random.default_rng(31)
    for n in range(60):
        B, Hkv, G, Tq, D, Dv = (int(x) for x in rng.integers(1, 4, size=6))
        Tk = Tq + int(rng.integers(0, 4))
        q, k, v = _inputs(rng, B, Hkv * G, Hkv, Tq, Tk, D, Dv, dtype)
        kw = dict(is_causal=bool(n % 2))
        if n % 3 == 1:
            kw["attn_mask"] = rng.standard_normal((Tq, Tk))
        if n % 5 == 0:
            q, k, v = q[0, 0], k[0, 0], v[0, 0]
        default = impl.attention(q, k, v, **kw)
        np.testing.assert_array_equal(default, impl.attention(q, k, v, block_size="dense", **kw))
        np.testing.assert_array_equal(default, formula.attention(q, k, v, **kw))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    ("dims", "causal"),
    [
        ((1, 4, 2, 384, 384, 8, 5), True),  # causal from query_start=0: tiles see 2/3 of the keys
        ((1, 32, 8, 2, 1024, 64, 64), False),  # GQA decode-like: 2**19 K/V elements per block
    ],
)
def test_large_calls_are_bitwise_the_blocked_path(dtype, dims, causal):
    """Past the thresholds the default result is bitwise block_size=128, and within rounding
    of the dense path (GQA, causality with a start, a padding mask, a float bias)."""
    B, Hq, Hkv, Tq, Tk, D, Dv = dims
    rng = np.random.default_rng(37)
    q, k, v = _inputs(rng, B, Hq, Hkv, Tq, Tk, D, Dv, dtype)
    padding = rng.random((1, 1, 1, Tk)) < 0.8
    padding[..., :3] = True
    bias = rng.standard_normal((Tq, Tk)).astype(dtype)
    start = 0 if causal else None
    assert _pick(*dims, causal, start) == 128
    for extra in ({}, {"attn_mask": padding}, {"attn_mask": bias}):
        kw = dict(is_causal=causal, query_start=start, **extra)
        default = impl.attention(q, k, v, **kw)
        np.testing.assert_array_equal(default, impl.attention(q, k, v, block_size=128, **kw))
        dense = impl.attention(q, k, v, block_size="dense", **kw)
        eps = ml_dtypes.finfo(dtype).eps
        assert np.all(np.abs(default - dense) <= 64 * eps * np.abs(v).max()), extra


def test_large_calls_raise_the_rulebook_errors():
    """A call the default sends to the blocked path raises what the rulebook raises: NaN in
    a late key, a fully masked row, a visible score that overflows."""
    rng = np.random.default_rng(41)
    q, k, v = _inputs(rng, 1, 2, 1, 512, 512, 4, 3, np.float64)
    assert _pick(1, 2, 1, 512, 512, 4, 3, True) == 128
    bad_k = k.copy()
    bad_k[0, 0, 500, 1] = np.nan
    mask = np.ones((512, 512), bool)
    mask[300] = False  # row 300 would see keys 0..300
    q[0, 0, 0] = 2.0  # scaled by 1/sqrt(4): 1.0
    big = k.copy()
    big[0, 0, 0] = 1e308  # row 0's score for key 0 (visible): 4e308
    for args, kw, error in (
        ((q, bad_k, v), {}, NonFiniteInputError),
        ((q, k, v), {"attn_mask": mask}, FullyMaskedRowError),
        ((q, big, v), {}, ScoreOverflowError),
    ):
        kw["is_causal"] = True
        with pytest.raises(error) as want:
            oracle.attention(*args, **kw)
        for block_size in (None, "dense"):
            with pytest.raises(error) as got:
                impl.attention(*args, block_size=block_size, **kw)
            assert str(got.value) == str(want.value)
