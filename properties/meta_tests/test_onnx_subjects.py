"""Tests of the ONNX ``Attention`` subjects (``onnx_attention``: ONNX's reference evaluator;
``onnxruntime_attention``: onnxruntime's CPU provider): each maps this project's call to the
op (positions through ``past_key``/``nonpad_kv_seqlen``, a size-1 key axis of the mask
expanded, windows, weights from ``qk_matmul_output_mode=3``, the op's own cache update), and
the findings N1-N3 of docs/findings.md are pinned. They skip, with the reason, without onnx
or onnxruntime.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from attnprops import impl
from attnprops import oracle
from attnprops.oracle import lab
from attnprops.properties._support import LAB_KEY
from attnprops.properties._support import LAB_QUERY
from attnprops.properties._support import LAB_VALUE
from attnprops.properties.expected_failures import read_expected_failures
from attnprops.properties.meta_tests.test_subjects import _close
from attnprops.properties.meta_tests.test_subjects import _module
from attnprops.properties.meta_tests.test_subjects import _rng_case
from attnprops.properties.subject import load_subject

ONNX_SUBJECTS = [("onnx_attention", "onnx"), ("onnxruntime_attention", "onnxruntime")]
TOLERANCE = 1e-6  # N2: a float64 scale applied through float32 square roots


@pytest.fixture(params=ONNX_SUBJECTS, ids=["reference", "onnxruntime"])
def onnx_subject(request):
    return _module(*request.param)


def test_declarations(onnx_subject):
    """float16/32/64, zeros for fully masked rows, no validation, windows as offsets and
    caps; weights and a cache; an expected-failures file that parses."""
    declared = load_subject(onnx_subject.__name__)
    caps = declared.capabilities
    assert caps.dtypes == ("float16", "float32", "float64")
    assert (caps.fully_masked_rows, caps.validates_inputs) == ("zeros", False)
    assert (caps.window, caps.softcap, caps.weights, caps.kv_cache) == ("offsets", True, True, True)
    path = Path(onnx_subject.__file__).parent / onnx_subject.ATTNPROPS_EXPECTED_FAILURES
    assert read_expected_failures(path)


def test_positions_windows_and_masks_map_to_the_op(onnx_subject):
    """Bottom-right causality and an explicit ``query_start`` (through ``past_key``), a window
    at an offset, a window with ``Tq > Tk`` (``nonpad_kv_seqlen``), GQA, a float mask, a
    size-1 key axis (broadcast, not padded), ``D != Dv`` and 2-D inputs give the oracle's
    values."""
    rng = np.random.default_rng(11)
    q, k, v = _rng_case(rng, np.float64, tq=3, tk=6)
    full = rng.random((2, 4, 3, 6)) < 0.8
    full[..., 0] = True  # every row keeps a key
    for kwargs in (
        dict(is_causal=True),
        dict(is_causal=True, query_start=1, attn_mask=full),
        dict(window=(1, 1), attn_mask=rng.uniform(-1, 1, (2, 4, 3, 6))),
        dict(window=(2, None), query_start=0),
        dict(attn_mask=np.ones((2, 4, 3, 1), bool), softcap=3.0),
    ):
        got = onnx_subject.attention(q, k, v, **kwargs)
        assert got.dtype == np.float64 and got.shape == (2, 4, 3, 2)
        _close(got, oracle.attention(q, k, v, **kwargs).value, np.float64, TOLERANCE)
    long_q = _rng_case(rng, np.float64, tq=5, tk=3)[0]
    got = onnx_subject.attention(long_q, k[:, :, :3], v[:, :, :3], window=(0, 1))  # offset -2
    want = oracle.attention(
        long_q, k[:, :, :3], v[:, :, :3], window=(0, 1), fully_masked_rows="zeros"
    )
    _close(got, want.value, np.float64, TOLERANCE)
    got = onnx_subject.attention(q[0, 0], k[0, 0], v[0, 0], is_causal=True)
    want = oracle.attention(q[0, 0], k[0, 0], v[0, 0], is_causal=True).value
    _close(got, want, np.float64, TOLERANCE)
    weights = onnx_subject.attention_weights(q, k, attn_mask=full, is_causal=True)
    want = oracle.attention_weights(q, k, attn_mask=full, is_causal=True).value
    _close(weights, want, np.float64, TOLERANCE)


def test_cache_decodes_through_past_key_and_rolls_back(onnx_subject):
    """The lab's decode through the op's past/present cache gives :data:`oracle.lab.DECODE`;
    a refused append leaves the cache as it was; the cache holds copies that cannot be made
    writeable; another implementation's cache is refused."""
    cache = onnx_subject.KVCache(1, 1, 4, 2, dtype=np.float64)
    key = LAB_KEY[:, :, :2].copy()
    onnx_subject.cached_attention(LAB_QUERY[:, :, :2], key, LAB_VALUE[:, :, :2], cache)
    key[...] = 9.0
    assert np.array_equal(cache.keys, LAB_KEY[:, :, :2])
    out = onnx_subject.cached_attention(
        LAB_QUERY[:, :, 2:], LAB_KEY[:, :, 2:], LAB_VALUE[:, :, 2:], cache
    )
    np.testing.assert_allclose(out[0, 0, 0], lab.DECODE.array(), rtol=0, atol=lab.DECODE.tolerance)
    with pytest.raises(ValueError):
        onnx_subject.cached_attention(
            LAB_QUERY[:, :, 2:], LAB_KEY[:, :, 2:], LAB_VALUE[:, :, 2:, :1], cache
        )
    assert len(cache) == 3 and np.array_equal(cache.values, LAB_VALUE)
    for array in (cache.keys, cache.values):
        with pytest.raises(ValueError):
            array.flags.writeable = True
    with pytest.raises(ValueError, match="cache: "):  # another implementation's cache
        onnx_subject.cached_attention(
            LAB_QUERY[:, :, 2:], LAB_KEY[:, :, 2:], LAB_VALUE[:, :, 2:], impl.KVCache(1, 1, 4, 2)
        )


def test_n2_float64_scale_through_float32_square_roots(onnx_subject):
    """N2 pinned: with ``scale=2`` the float64 scores are scaled by ``float32(sqrt(2))**2``."""
    q = np.array([[[[1.0]]]])
    k = np.array([[[[0.0], [1.0]]]])
    v = np.array([[[[0.0], [1.0]]]])
    s = float(np.float64(np.float32(math.sqrt(2.0))) ** 2)
    got = onnx_subject.attention(q, k, v, scale=2.0)[0, 0, 0, 0]
    assert got == pytest.approx(1 / (1 + math.exp(-s)), rel=1e-15)
    assert abs(got - 1 / (1 + math.exp(-2.0))) > 1e-9


def test_reference_n1_and_n3_pinned():
    """N1 and N3 pinned for the reference evaluator (onnxruntime gets both right): a causal
    call with a key-padding mask lets query 1 see key 0 only; a float16 score past 65504
    gives NaN."""
    reference = _module("onnx_attention", "onnx")
    q, v = np.zeros((1, 1, 2, 1)), np.array([[[[0.0], [0.5]]]])
    got = reference.attention(q, q, v, attn_mask=np.ones((1, 1, 1, 2), bool), is_causal=True)
    assert got.ravel().tolist() == [0.0, 0.0]  # exact: [0.0, 0.25]
    q16 = np.full((1, 1, 1, 3), 130, np.float16)
    k16 = np.full((1, 1, 1, 3), 168, np.float16)
    with np.errstate(all="ignore"):
        got = reference.attention(q16, k16, np.zeros((1, 1, 1, 1), np.float16), scale=1.0)
    assert np.isnan(got).all()  # exact: 0
