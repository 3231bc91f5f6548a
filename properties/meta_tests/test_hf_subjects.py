"""Tests of the Hugging Face transformers subjects (``hf_sdpa_attention``:
``sdpa_attention_forward``; ``hf_eager_attention``: Llama's ``eager_attention_forward``):
each maps this project's call through transformers' own mask builders and caches, declares
what it lacks, and pins the findings F7-F10 of docs/findings.md. They skip, with the reason,
without transformers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

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

HF_SUBJECTS = [
    pytest.param("hf_sdpa_attention", id="hf_sdpa"),
    pytest.param("hf_eager_attention", id="hf_eager"),
]


@pytest.mark.parametrize("name", HF_SUBJECTS)
def test_hf_adapter_maps_alignment_masks_gqa_and_windows(name):
    """Through transformers' own mask builders: bottom-right causality and an explicit
    query_start (one query at position 0 of three keys sees key 0 only), a key-padding mask
    (the model's 2-D attention_mask) AND causality, a per-head bool mask and a float mask
    (joined as a 4-D mask), GQA (h // G), sliding_window=W (= window (W - 1, 0)) and 2-D
    inputs give the oracle's values (1e-6: eager's float32 softmax, F8)."""
    subject = _module(name, "transformers")
    q = np.zeros((1, 1, 2, 3))
    out = subject.attention(q, np.zeros((1, 1, 4, 3)), np.eye(4)[None, None, :, :3], is_causal=True)
    _close(out[0, 0], [[1 / 3] * 3, [1 / 4] * 3], np.float64, 1e-6)
    out = subject.attention(
        q[:, :, :1], np.zeros((1, 1, 3, 3)), np.eye(3)[None, None], is_causal=True, query_start=0
    )
    assert out[0, 0, 0].tolist() == [1.0, 0.0, 0.0]
    rng = np.random.default_rng(7)
    q, k, v = _rng_case(rng, np.float64, tq=3, tk=5)
    pad = np.ones((2, 1, 1, 5), bool)
    pad[1, ..., 0] = False
    per_head = rng.random((2, 4, 3, 5)) < 0.7
    per_head[..., 0] = True  # every row keeps key 0
    for kwargs in (
        dict(attn_mask=pad, is_causal=True, query_start=1),
        dict(attn_mask=per_head, is_causal=True),
        dict(attn_mask=np.where(per_head, 0.5, -np.inf), scale=0.7),
        dict(attn_mask=pad, is_causal=True, window=(1, 0)),
    ):
        call = dict(kwargs)
        if "window" in call:
            call["sliding_window"] = call.pop("window")[0] + 1
        got = subject.attention(q, k, v, **call)
        assert got.dtype == np.float64 and got.shape == (2, 4, 3, 2)
        _close(got, oracle.attention(q, k, v, **kwargs).value, np.float64, 1e-6)
    got = subject.attention(q[0, 0], k[0, 0], v[0, 0], is_causal=True)
    _close(got, oracle.attention(q[0, 0], k[0, 0], v[0, 0], is_causal=True).value, np.float64, 1e-6)


@pytest.mark.parametrize("name", HF_SUBJECTS)
def test_hf_dynamic_cache_decodes_with_offsets_and_rolls_back(name):
    """The lab's decode through a transformers DynamicCache (create_causal_mask before
    cache.update, as LlamaModel) gives :data:`oracle.lab.DECODE`; an invalid append leaves
    the cache as it was; it holds Hkv heads, copies of the caller's arrays."""
    subject = _module(name, "transformers")
    q, k, v = LAB_QUERY, LAB_KEY, LAB_VALUE
    cache = subject.KVCache(1, 1, 4, 2, dtype=np.float64)
    key = k[:, :, :2].copy()
    subject.cached_attention(q[:, :, :2], key, v[:, :, :2], cache)
    key[...] = 9.0
    assert np.array_equal(cache.keys, k[:, :, :2]) and len(cache.dynamic.layers) == 1
    out = subject.cached_attention(q[:, :, 2:], k[:, :, 2:], v[:, :, 2:], cache)
    np.testing.assert_allclose(out[0, 0, 0], lab.DECODE.array(), rtol=0, atol=1e-6)
    with pytest.raises(ValueError):
        subject.cached_attention(q[:, :, 2:], k[:, :, 2:], v[:, :, 2:, :1], cache)
    assert len(cache) == 3 and np.array_equal(cache.values, v)
    assert not cache.keys.flags.writeable
    rng = np.random.default_rng(3)
    qg, kg, vg = _rng_case(rng, np.float32, tq=1, tk=1)  # GQA decode: pack_gqa in SDPA
    cache = subject.KVCache(2, 2, 3, 2, dtype=np.float32)
    subject.cached_attention(qg, kg, vg, cache)
    q2, k2, v2 = _rng_case(rng, np.float32, tq=1, tk=1)
    got = subject.cached_attention(q2, k2, v2, cache)
    assert cache.keys.shape == (2, 2, 2, 3)
    want = oracle.attention(q2, np.concatenate([kg, k2], 2), np.concatenate([vg, v2], 2))
    _close(got, want.value, np.float32)


@pytest.mark.parametrize("name", HF_SUBJECTS)
def test_hf_rolling_cache_is_a_sliding_window_layer(name):
    """RollingKVCache(capacity=2) is a DynamicSlidingWindowLayer of sliding_window 3: six
    positions decoded one at a time and then two at once with sliding_window=3 (window (2, 0))
    give the oracle's windowed attention over the whole sequence; it holds the last two
    positions, in order, and counts all eight."""
    subject = _module(name, "transformers")
    q, k, v = _rng_case(np.random.default_rng(11), np.float32, tq=8, tk=8)
    cache = subject.RollingKVCache(2, 2, 3, 2, capacity=2, dtype=np.float32)
    assert type(cache.dynamic.layers[0]).__name__ == "DynamicSlidingWindowLayer"
    steps = [slice(t, t + 1) for t in range(6)] + [slice(6, 8)]
    got = np.concatenate(
        [subject.cached_attention(q[:, :, t], k[:, :, t], v[:, :, t], cache, sliding_window=3)
         for t in steps],
        axis=2,
    )  # fmt: skip
    _close(got, oracle.attention(q, k, v, is_causal=True, window=(2, 0)).value, np.float32)
    assert len(cache) == 8 and cache.positions.tolist() == [6, 7]
    assert np.array_equal(cache.keys, k[:, :, 6:]) and np.array_equal(cache.values, v[:, :, 6:])


def test_hf_declarations():
    """The declarations follow the arithmetic each function does: SDPA's kernel computes
    float16/bfloat16 in float32 and rounds P; eager declares nothing (float16 scores are
    stored in float16); both take HF's sliding_window and no input validation; eager
    returns its weights, SDPA none. Both expected-failures files exist and parse."""

    _module("hf_sdpa_attention", "transformers")  # skips without transformers
    sdpa = load_subject("attnprops.properties.subjects.hf_sdpa_attention").capabilities
    eager = load_subject("attnprops.properties.subjects.hf_eager_attention").capabilities
    assert sdpa.compute_dtypes == (("bfloat16", "float32"), ("float16", "float32"))
    assert sdpa.rounds_weights and not sdpa.weights and sdpa.kv_cache
    assert eager.compute_dtypes == () and not eager.rounds_weights and eager.weights
    for declared in (sdpa, eager):
        assert declared.window == "sliding_window" and not declared.validates_inputs
        assert declared.dtypes == ("bfloat16", "float16", "float32", "float64")
    ints = np.ones((2, 2), np.int64)  # handed over as it is: SDPA rejects it, eager adds it
    with pytest.raises(RuntimeError, match="attn_mask dtype"):
        _module("hf_sdpa_attention", "transformers").attention(
            *[np.zeros((1, 1, 2, 1))] * 3, attn_mask=ints
        )
    for name in ("hf_sdpa_attention", "hf_eager_attention"):
        module = _module(name, "transformers")
        assert read_expected_failures(
            Path(module.__file__).parent / module.ATTNPROPS_EXPECTED_FAILURES
        )


def test_hf_eager_pins_its_findings():
    """F8 and F9 (docs/findings.md), pinned: eager's float64 weights are float32's (three
    equal scores give float32(1/3)); a fully masked row is NaN in float64 (finfo(float64).min
    is -inf in the float32 softmax) and the mean of all values in float32."""
    subject = _module("hf_eager_attention", "transformers")
    w = subject.attention_weights(np.zeros((1, 1, 1, 1)), np.zeros((1, 1, 3, 1)))
    assert w.dtype == np.float64 and w[0, 0, 0, 0] == float(np.float32(1 / 3)) != 1 / 3
    v = np.array([1.0, 3.0]).reshape(1, 1, 2, 1)
    hide = np.array([[False, False], [True, True]])
    out = subject.attention(np.zeros((1, 1, 2, 1)), np.zeros((1, 1, 2, 1)), v, attn_mask=hide)
    assert np.isnan(out[0, 0, 0, 0]) and out[0, 0, 1, 0] == 2.0
    f32 = [x.astype(np.float32) for x in (np.zeros((1, 1, 2, 1)), np.zeros((1, 1, 2, 1)), v)]
    assert subject.attention(*f32, attn_mask=hide).ravel().tolist() == [2.0, 2.0]


def test_hf_sdpa_mask_skip_follows_create_causal_mask():
    """F7: HF's sdpa_mask returns None for one query without padding whatever its offset
    (SDPA then attends every key); the adapter passes allow_is_causal_skip as
    create_causal_mask does for keys past the query (a StaticCache decoding one token: off),
    so query 0 of three keys sees key 0 only."""
    _module("hf_sdpa_attention", "transformers")
    from transformers.masking_utils import sdpa_mask

    assert sdpa_mask(batch_size=1, q_length=1, kv_length=3, q_offset=0) is None
    built = sdpa_mask(batch_size=1, q_length=1, kv_length=3, q_offset=0, allow_is_causal_skip=False)
    assert built[0, 0, 0].tolist() == [True, False, False]


@pytest.mark.parametrize("name", HF_SUBJECTS)
def test_hf_adapter_takes_the_projects_arguments_and_refuses_the_rest(name):
    """Found by a newcomer's attack: a key-padding mask over a rolling cache has impl's
    width (held + new positions); a float32 mask reaches transformers unrounded with float16
    inputs (-1e5 on every key changes nothing); a window wider than the rolling cache, a
    missing one, another implementation's cache and a sliding_window that is not an int >= 1
    are ValueErrors naming them."""
    from attnprops import impl

    subject = _module(name, "transformers")
    rng = np.random.default_rng(0)
    q0, k0, v0, q1, k1, v1 = (rng.standard_normal((1, 1, t, 2)) for t in (2, 2, 2, 1, 1, 1))
    ours, theirs = (
        impl.RollingKVCache(1, 1, 2, capacity=1),
        subject.RollingKVCache(1, 1, 2, capacity=1),
    )
    impl.cached_attention(q0, k0, v0, ours, window=(1, 0))
    subject.cached_attention(q0, k0, v0, theirs, sliding_window=2)
    mask = np.ones((1, 1, 1, 2), bool)
    want = impl.cached_attention(q1, k1, v1, ours, window=(1, 0), attn_mask=mask)
    got = subject.cached_attention(q1, k1, v1, theirs, sliding_window=2, attn_mask=mask)
    _close(got, want, np.float64, 1e-6)
    q = np.array([[[[1.0]]]], np.float16)
    k = np.array([[[[1.0], [0.0]]]], np.float16)
    got = subject.attention(q, k, k, attn_mask=np.array([-1e5, -1e5], np.float32))
    _close(got, oracle.attention(q, k, k).value, np.float16)
    one = np.ones((1, 1, 1, 1))
    cache = subject.RollingKVCache(1, 1, 1, capacity=2)
    for window in (4, None):
        with pytest.raises(ValueError, match="window"):
            subject.cached_attention(one, one, one, cache, sliding_window=window)
    assert len(cache) == 0
    with pytest.raises(ValueError, match="^cache: "):
        subject.cached_attention(one, one, one, impl.KVCache(1, 1, 1))
    for width in (2.5, "2", 0):
        with pytest.raises(ValueError, match="^sliding_window: "):
            subject.attention(one, one, one, is_causal=True, sliding_window=width)
