"""Tests of the ready-made subjects in ``properties/subjects``: each maps the conventions it
claims to map (checked on tiny inputs whose answer tells conventions apart, against the
oracle), declares what it lacks, and the known-wrong ``torch_sdpa_naive_causal`` is killed by
the suite. Tests that need torch or jax skip, with the reason, when the extra is absent.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

try:
    from attnprops.ci.pytest_process import run_pytest
except ImportError:  # a vendored copy of properties/ has no ci/
    run_pytest = None

from attnprops import impl
from attnprops import oracle
from attnprops import properties
from attnprops.oracle import lab
from attnprops.oracle.rules import BFLOAT16
from attnprops.properties._support import LAB_DECODE
from attnprops.properties._support import LAB_KEY
from attnprops.properties._support import LAB_QUERY
from attnprops.properties._support import LAB_VALUE
from attnprops.properties.options import suite_args
from attnprops.properties.subject import load_subject
from attnprops.properties.subject_import import install_hint

SUITE_ROOT = Path(properties.__file__).resolve().parent.parent


def _module(name: str, library: str):
    """Import ``properties.subjects.NAME`` or skip when its ``library`` (torch, jax, onnx,
    onnxruntime, transformers) is missing."""
    if library:
        pytest.importorskip(library, reason=install_hint(library))
    return importlib.import_module(f"attnprops.properties.subjects.{name}")


LIBRARY_SUBJECTS = [
    pytest.param("torch_sdpa", "torch", id="torch_sdpa"),
    pytest.param("jax_dot_product_attention", "jax", id="jax"),
]


def _rng_case(rng, dtype, b=2, hkv=2, g=2, tq=2, tk=4, d=3, dv=2):
    q = rng.uniform(-2, 2, (b, hkv * g, tq, d)).astype(dtype)
    k = rng.uniform(-2, 2, (b, hkv, tk, d)).astype(dtype)
    v = rng.uniform(-2, 2, (b, hkv, tk, dv)).astype(dtype)
    return q, k, v


# Loose tolerances: these tests check the mappings; the suite checks the accuracy. JAX
# computes its softmax in float32 even for float64 inputs (docs/findings.md), hence 1e-6.
TOLERANCE = {"torch_sdpa": 1e-12, "jax_dot_product_attention": 1e-6}


def _close(got, want, dtype, tol64=1e-12):
    tol = {np.dtype(np.float64): tol64, np.dtype(np.float32): 1e-5}.get(np.dtype(dtype), 1e-2)
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=tol, atol=tol)


# --- oracle_float64 ---------------------------------------------------------------------------


def test_oracle_float64_returns_the_oracle_values():
    """The subject returns the oracle's correctly rounded float64 values for attention,
    weights and cached decode, and declares float64 only."""
    from attnprops.properties.subjects import oracle_float64 as subject

    assert load_subject("attnprops.properties.subjects.oracle_float64").capabilities.dtypes == (
        "float64",
    )
    q, k, v = LAB_DECODE.query, LAB_DECODE.key, LAB_DECODE.value
    want = oracle.attention(q, k, v, is_causal=True, query_start=2).value
    assert np.array_equal(subject.attention(q, k, v, is_causal=True, query_start=2), want)
    assert np.array_equal(
        subject.attention_weights(q, k, is_causal=True, query_start=2),
        oracle.attention_weights(q, k, is_causal=True, query_start=2).value,
    )
    cache = subject.KVCache(1, 1, 4, 2)
    lab_q, lab_k, lab_v = LAB_QUERY, LAB_KEY, LAB_VALUE
    subject.cached_attention(lab_q[:, :, :2], lab_k[:, :, :2], lab_v[:, :, :2], cache)
    assert np.array_equal(
        subject.cached_attention(lab_q[:, :, 2:], lab_k[:, :, 2:], lab_v[:, :, 2:], cache), want
    )
    assert (
        subject.kv_cache_bytes(
            num_layers=1, batch=1, tokens=3, num_kv_heads=1, head_dim=4, dtype="float64"
        )
        == 2 * 3 * 4 * 8
    )


# --- torch_sdpa and jax_dot_product_attention --------------------------------------------------


@pytest.mark.parametrize("name, extra", LIBRARY_SUBJECTS)
def test_adapter_maps_causal_alignment_and_query_start(name, extra):
    """Both libraries' is_causal is top-left; the adapter must give bottom-right by default
    and honour an explicit query_start (q = k = 0 and value = identity show the visible keys)."""
    subject = _module(name, extra)
    q = np.zeros((1, 1, 2, 3))
    k = np.zeros((1, 1, 4, 3))
    v = np.eye(4)[None, None, :, :3]  # (1, 1, 4, 3): column c is key c
    out = subject.attention(q, k, v, is_causal=True)  # visible: keys 0..2 and 0..3
    _close(out[0, 0], [[1 / 3] * 3, [1 / 4] * 3], np.float64, TOLERANCE[name])
    out = subject.attention(q, k, np.eye(4)[None, None], is_causal=True, query_start=0)
    _close(out[0, 0], [[1, 0, 0, 0], [0.5, 0.5, 0, 0]], np.float64, TOLERANCE[name])


@pytest.mark.parametrize("name, extra", LIBRARY_SUBJECTS)
def test_adapter_matches_the_oracle_with_gqa_masks_and_two_d(name, extra):
    """GQA (h // G), a bool key-padding mask AND causality, a float mask, a 1-D mask and 2-D
    inputs give the oracle's values (loose tolerance: this tests the mapping, the suite
    tests the accuracy)."""
    subject = _module(name, extra)
    rng = np.random.default_rng(7)
    dtype = np.float64
    q, k, v = _rng_case(rng, dtype)
    pad = np.ones((2, 1, 1, 4), bool)
    pad[1, ..., 3] = False
    for kwargs in (
        dict(attn_mask=pad, is_causal=True, query_start=1),
        dict(attn_mask=np.where(pad, 0.5, -np.inf).astype(np.float32)),
        dict(attn_mask=np.array([True, False, True, True]), scale=0.7),
    ):
        got = subject.attention(q, k, v, **kwargs)
        assert got.dtype == dtype and got.shape == (2, 4, 2, 2)
        _close(got, oracle.attention(q, k, v, **kwargs).value, dtype, TOLERANCE[name])
    got = subject.attention(q[0, 0], k[0, 0], v[0, 0], is_causal=True)
    _close(
        got,
        oracle.attention(q[0, 0], k[0, 0], v[0, 0], is_causal=True).value,
        dtype,
        TOLERANCE[name],
    )
    weights = subject.attention_weights(q, k, attn_mask=pad)
    _close(weights, oracle.attention_weights(q, k, attn_mask=pad).value, dtype, TOLERANCE[name])
    assert (weights[1, ..., 3] == 0).all()


@pytest.mark.parametrize("name, extra", LIBRARY_SUBJECTS)
def test_adapter_cache_decodes_with_offsets_and_rolls_back(name, extra):
    """The lab's decode through the adapter's cache gives :data:`oracle.lab.DECODE` (the
    library is called with query_start = 2); a failing call leaves the cache unchanged; the
    cache holds copies of Hkv heads."""
    subject = _module(name, extra)
    q, k, v = LAB_QUERY, LAB_KEY, LAB_VALUE
    cache = subject.KVCache(1, 1, 4, 2, dtype=np.float64)
    key = k[:, :, :2].copy()
    subject.cached_attention(q[:, :, :2], key, v[:, :, :2], cache)
    key[...] = 9.0
    assert np.array_equal(cache.keys, k[:, :, :2])
    out = subject.cached_attention(q[:, :, 2:], k[:, :, 2:], v[:, :, 2:], cache)
    np.testing.assert_allclose(out[0, 0, 0], lab.DECODE.array(), rtol=0, atol=lab.DECODE.tolerance)
    with pytest.raises(ValueError):
        subject.cached_attention(q[:, :, 2:], k[:, :, 2:], v[:, :, 2:, :1], cache)
    assert len(cache) == 3 and np.array_equal(cache.values, v)
    assert not cache.keys.flags.writeable
    assert (
        subject.kv_cache_bytes(
            num_layers=2, batch=1, tokens=3, num_kv_heads=1, head_dim=4, dtype="float32"
        )
        == 2 * 2 * 3 * 4 * 4
    )


CACHE_SUBJECTS = [
    *LIBRARY_SUBJECTS,
    pytest.param("torch_sdpa_naive_causal", "torch", id="naive_causal"),
    pytest.param("onnx_attention", "onnx", id="onnx"),
    pytest.param("hf_sdpa_attention", "transformers", id="hf_sdpa"),
    pytest.param("hf_eager_attention", "transformers", id="hf_eager"),
    pytest.param("oracle_float64", "", id="oracle_float64"),
]


@pytest.mark.parametrize("name, extra", CACHE_SUBJECTS)
def test_adapter_cache_refuses_another_implementations_cache(name, extra):
    """Every ready adapter's ``cached_attention`` refuses a cache of another class (here
    impl's, a rolling one too) with an error naming ``cache``, before touching it: an adapter
    that appends to it can roll back only its own arrays, and over a rolling cache's ring it
    attends to the wrong keys."""
    subject = _module(name, extra)
    q, k, v = LAB_QUERY[:, :, :1], LAB_KEY[:, :, :1], LAB_VALUE[:, :, :1]
    for foreign in (impl.KVCache(1, 1, 4, 2), impl.RollingKVCache(1, 1, 4, 2, capacity=2)):
        foreign.append(k, v)
        with pytest.raises(ValueError, match=r"^cache: "):
            subject.cached_attention(q, k, v, foreign)
        assert len(foreign) == 1 and np.array_equal(foreign.keys, k)


def test_torch_sdpa_declarations_and_float16():
    """torch_sdpa declares zeros for fully masked rows (what SDPA does, checked here), no
    input validation, bfloat16 and float16/32/64; float16 stays float16 and bfloat16 stays
    bfloat16 (the same 16 bits both sides, cache views included); an integer mask reaches
    SDPA, which rejects it."""
    subject = _module("torch_sdpa", "torch")
    declared = load_subject("attnprops.properties.subjects.torch_sdpa")
    assert (declared.capabilities.fully_masked_rows, declared.capabilities.validates_inputs) == (
        "zeros",
        False,
    )
    assert declared.capabilities.dtypes == ("bfloat16", "float16", "float32", "float64")
    q, k, v = (
        np.zeros((1, 1, 2, 1)),
        np.zeros((1, 1, 2, 1)),
        np.array([1.0, 3.0]).reshape(1, 1, 2, 1),
    )
    out = subject.attention(q, k, v, attn_mask=np.array([[False, False], [True, True]]))
    assert out.ravel().tolist() == [0.0, 2.0]
    q16, k16, v16 = _rng_case(np.random.default_rng(1), np.float16)
    out = subject.attention(q16, k16, v16, is_causal=True)
    assert out.dtype == np.float16
    _close(out, oracle.attention(q16, k16, v16, is_causal=True).value, np.float16)
    bf16 = np.dtype("bfloat16")
    qb, kb, vb = _rng_case(np.random.default_rng(2), bf16)
    out = subject.attention(qb, kb, vb, is_causal=True)
    assert out.dtype == bf16
    _close(out, oracle.attention(qb, kb, vb, is_causal=True).value, bf16)
    assert subject.to_tensor(kb).dtype == subject.torch.bfloat16
    np.testing.assert_array_equal(subject.to_numpy(subject.to_tensor(kb)), kb, strict=True)
    cache = subject.KVCache(2, 2, 3, 2, dtype=bf16)
    subject.cached_attention(qb, kb[:, :, :2], vb[:, :, :2], cache)
    np.testing.assert_array_equal(cache.keys, kb[:, :, :2], strict=True)
    with pytest.raises(RuntimeError, match="attn_mask dtype"):
        subject.attention(q, k, v, attn_mask=np.ones((2, 2), np.int64))


def test_jax_declarations():
    """The JAX subject declares bfloat16 and float16/32/64 (16-bit computed in float32, the
    weights rounded), no validation, and an expected-failures file that exists and
    parses."""
    module = _module("jax_dot_product_attention", "jax")
    from attnprops.properties.expected_failures import read_expected_failures

    declared = load_subject("attnprops.properties.subjects.jax_dot_product_attention")
    caps = declared.capabilities
    assert caps.dtypes == ("bfloat16", "float16", "float32", "float64")
    assert not caps.validates_inputs and caps.rounds_weights
    assert dict(caps.compute_dtypes) == {"float16": "float32", "bfloat16": "float32"}
    path = Path(module.__file__).parent / module.ATTNPROPS_EXPECTED_FAILURES
    assert read_expected_failures(path)


def test_jax_float64_softmax_is_float32():
    """Finding F1 (docs/findings.md), pinned: with float64 inputs JAX returns weights rounded
    through float32 -- three equal scores give float32(1/3), not float64(1/3)."""
    subject = _module("jax_dot_product_attention", "jax")
    w = subject.attention_weights(np.zeros((1, 1, 1, 1)), np.zeros((1, 1, 3, 1)))
    assert w.dtype == np.float64
    assert w[0, 0, 0, 0] == float(np.float32(1 / 3)) != 1 / 3


def test_jax_float_mask_keeps_its_own_dtype():
    """A float mask wider than a 16-bit query reaches JAX as it is (JAX adds it to its float32
    logits): cast to float16 first, ``-1e5`` became ``-inf`` and the row NaN or wrong; cast to
    bfloat16, masks near 100 lost 7-16% of the output (found by a review helper)."""
    subject = _module("jax_dot_product_attention", "jax")
    q = np.zeros((1, 1, 1, 4), np.float16)
    k = np.zeros((1, 1, 2, 4), np.float16)
    v = np.array([[[[1.0] * 4, [2.0] * 4]]], np.float16)
    far = np.array([-1e5, -2e5])  # float64: key 0 outweighs key 1 by e**1e5
    np.testing.assert_array_equal(subject.attention(q, k, v, attn_mask=far), np.ones((1, 1, 1, 4)))
    rng = np.random.default_rng(3)
    q, k, v = _rng_case(rng, BFLOAT16, b=1, hkv=1, g=1, tq=4, tk=4, d=8, dv=8)
    near = rng.random((4, 4)) * 3 + 100  # float64, differences of a few units
    want = impl.attention(q, k, v, attn_mask=near, is_causal=True).astype(np.float64)
    got = subject.attention(q, k, v, attn_mask=near, is_causal=True).astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=0, atol=2**-7 * np.abs(want).max())


def test_jax_cache_doubles_its_capacity_and_rolls_back_a_growth():
    """Observation O7's fix (docs/findings.md): the JAX cache keeps its keys in buffers of 16,
    32, 64 ... positions (one compilation per capacity, not per length); 40 appends of one
    position, each decode through a bool mask over the keys so far (every third hidden),
    equal the oracle's, the unwritten slots hidden; a mask of the wrong width is refused, and
    an append that grows the buffer and then fails in JAX (a mask of 3 rows for 1 query)
    leaves length and capacity as before."""
    subject = _module("jax_dot_product_attention", "jax")
    rng = np.random.default_rng(11)
    q, k, v = _rng_case(rng, np.float64, b=1, hkv=2, g=2, tq=40, tk=40, d=5, dv=3)
    cache = subject.KVCache(1, 2, 5, 3, dtype=np.float64)
    capacities = []
    for t in range(40):
        keep = np.arange(t + 1) % 3 != 1
        keep[t] = True
        out = subject.cached_attention(
            q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1], cache, attn_mask=keep
        )
        want = oracle.attention(
            q[:, :, t : t + 1], k[:, :, : t + 1], v[:, :, : t + 1], attn_mask=keep
        ).value
        _close(out, want, np.float64, TOLERANCE["jax_dot_product_attention"])
        capacities.append(cache._keys.shape[2])
    assert capacities == [16] * 16 + [32] * 16 + [64] * 8
    assert len(cache) == 40 and np.array_equal(cache.keys, k) and np.array_equal(cache.values, v)
    assert [subject.capacity_for(n) for n in (1, 16, 17, 64, 65)] == [16, 16, 32, 64, 128]
    full = subject.KVCache(1, 2, 5, 3, dtype=np.float64)
    subject.cached_attention(q[:, :, :16], k[:, :, :16], v[:, :, :16], full)
    for width in (18, 32):  # over 17 keys, a mask of 18 or of the buffer's 32 is refused
        with pytest.raises(ValueError, match=f"^attn_mask: last axis {width}"):
            subject.cached_attention(
                q[:, :, 16:17], k[:, :, 16:17], v[:, :, 16:17], full, attn_mask=np.ones(width, bool)
            )
        assert len(full) == 16 and full._keys.shape[2] == 16
        assert np.array_equal(full.keys, k[:, :, :16])
    with pytest.raises(Exception):  # JAX's own refusal after a growth: 3 mask rows, 1 query
        subject.cached_attention(
            q[:, :, 16:17], k[:, :, 16:17], v[:, :, 16:17], full, attn_mask=np.ones((3, 17), bool)
        )
    assert len(full) == 16 and full._keys.shape[2] == 16


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_jax_16_bit_rounding_model(dtype):
    """The declared model, bit for bit on 300 keys: float32 scores and softmax, the normalised
    weights rounded to the input dtype, ``P @ V`` in float32, rounded once. And observation O2
    (docs/findings.md), pinned: under ``jax.jit`` a one-key call raises on the CPU in both
    dtypes (the adapter calls JAX eagerly for them)."""
    subject = _module("jax_dot_product_attention", "jax")
    dtype = np.dtype(dtype)
    q, k, v = _rng_case(np.random.default_rng(3), dtype, b=1, hkv=1, g=1, tq=4, tk=300, d=8, dv=8)
    f32 = np.float32
    s = (q.astype(f32) @ k.astype(f32).swapaxes(-1, -2)) * f32(1 / np.sqrt(8))
    e = np.exp(s - s.max(-1, keepdims=True))
    p = (e / e.sum(-1, keepdims=True)).astype(dtype).astype(f32)
    want = (p @ v.astype(f32)).astype(dtype)
    np.testing.assert_array_equal(subject.attention(q, k, v), want, strict=True)
    keep = np.arange(300) % 2 == 0  # a float mask in the input dtype goes to JAX's bias
    additive = np.where(keep, 0.0, -np.inf).astype(dtype)
    np.testing.assert_array_equal(
        subject.attention(q, k, v, attn_mask=additive), subject.attention(q, k, v, attn_mask=keep)
    )
    tiny = (np.zeros((1, 1, 1, 1), dtype),) * 3 + (None, None, None)  # one key, D = 1
    with pytest.raises(Exception, match="F16_F16_F32|BF16_BF16_F32"):
        subject._dpa_jit(*tiny)
    assert subject._dpa(*tiny).shape == (1, 1, 1, 1)


def test_naive_causal_decodes_wrongly():
    """The naive adapter's decode step sees key 0 only: the lab's third token gives the
    first value (:data:`oracle.lab.OFFSET_ZERO_DECODE`) instead of :data:`oracle.lab.DECODE`."""
    subject = _module("torch_sdpa_naive_causal", "torch")
    q, k, v = LAB_QUERY, LAB_KEY, LAB_VALUE
    cache = subject.KVCache(1, 1, 4, 2, dtype=np.float64)
    subject.cached_attention(q[:, :, :2], k[:, :, :2], v[:, :, :2], cache)
    out = subject.cached_attention(q[:, :, 2:], k[:, :, 2:], v[:, :, 2:], cache)
    np.testing.assert_allclose(out[0, 0, 0], lab.OFFSET_ZERO_DECODE.array())


def test_suite_kills_naive_causal():
    """The property suite's fixed-example tests (the lab's 3-token example and its cached
    decode), run on the naive subject, fail with property violations, not crashes."""
    pytest.importorskip("torch", reason=install_hint("torch"))
    env = dict(os.environ, HYPOTHESIS_PROFILE="dev", PYTHONDONTWRITEBYTECODE="1")
    env.pop("ATTN_XFAIL", None)
    props = SUITE_ROOT / "properties"
    args = [
        "-q",
        *suite_args("attnprops.properties.subjects.torch_sdpa_naive_causal"),
        str(props / "test_seed_examples.py"),
        str(props / "test_kv_cache.py"),
        "-k",
        "test_seed_examples or test_lab_decode_through_cache",
    ]
    if run_pytest is None:  # a vendored copy of properties/ has no ci/
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", *args],
            cwd=SUITE_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        returncode, out = proc.returncode, proc.stdout
    else:  # a fresh process forked with the libraries imported
        returncode, out = run_pytest(args, cwd=SUITE_ROOT, env=env)
    assert returncode == 1, out[-3000:]
    assert "2 failed" in out, out[-3000:]
    assert out.count("PropertyViolation") >= 2, out[-3000:]


def test_probe_reports_the_window_convention():
    """The probe's window cells (docs/conventions.md) read the keys each query sees from the
    output: impl's causal ``(2, 0)`` shows 3 keys, bottom-right aligned when ``Tq < Tk``; a
    library without windows is reported as raising."""
    from attnprops import impl
    from attnprops.properties.subjects import probe

    text = probe.probe_window(probe._subject_caller(impl))
    assert "causal, Tq=6, Tk=6: query 0 sees [0]; query 5 sees [3, 4, 5]" in text
    assert "window=(1, 0), Tq=2, Tk=5: query 0 sees [2, 3]" in text

    class NoWindow:  # a subject whose attention takes no window= argument
        @staticmethod
        def attention(q, k, v, *, attn_mask=None, is_causal=False, query_start=None, scale=None):
            return impl.attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal)

    assert "raised TypeError" in probe.probe_window(probe._subject_caller(NoWindow))


def test_torch_sdpa_sinks_and_lse():
    """torch_sdpa's sinks (a zero key whose float-mask entry is the sink) and its ``lse``
    (the CPU flash kernel's, ``-inf`` for a row without keys: F5 mapped) are the oracle's,
    with GQA, a row left to its sink, ``Dv != D`` and 2-D inputs."""
    subject = _module("torch_sdpa", "torch")
    q, k, v = _rng_case(np.random.default_rng(4), np.float64)
    sinks = np.array([0.5, -np.inf, 3.0, -1.0])
    mask = np.ones((2, 4, 2, 4), dtype=bool)
    mask[0, 0, 1] = False  # head 0's sink is finite: the row gives 0, its lse is -inf
    out, lse = subject.attention(q, k, v, attn_mask=mask, sinks=sinks, return_lse=True)
    parts = oracle.attention_parts(q, k, v, attn_mask=mask, sinks=sinks)
    _close(out, parts.output.value, np.float64)
    assert lse[0, 0, 1] == -np.inf and (out[0, 0, 1] == 0).all()
    finite = np.isfinite(parts.lse.value)
    _close(lse[finite], parts.lse.value[finite], np.float64)
    out2, lse2 = subject.attention(q[0, 0], k[0, 0], v[0, 0], is_causal=True, return_lse=True)
    parts2 = oracle.attention_parts(q[0, 0], k[0, 0], v[0, 0], is_causal=True)
    _close(out2, parts2.output.value, np.float64)
    _close(lse2, parts2.lse.value, np.float64)


def test_torch_flex_attention_maps_every_variant():
    """The FlexAttention adapter (mask_mod and score_mod) is the oracle's with causality at
    an offset, a window, documents, chunks, a bool and a float mask, ALiBi, a cap, GQA,
    2-D inputs and ``lse`` (``-inf`` for a row without keys)."""
    subject = _module("torch_flex_attention", "torch")
    rng = np.random.default_rng(5)
    q, k, v = _rng_case(rng, np.float64, tq=3, tk=6)
    float_mask = rng.uniform(-1, 1, (2, 4, 3, 6))
    float_mask[1, 2, 0] = -np.inf  # a row without keys: zeros, lse -inf
    cases = [
        dict(is_causal=True, query_start=2),
        dict(window=(2, 1), attn_mask=rng.random((3, 6)) < 0.8),
        dict(segment_ids=(np.array([0, 1, 1]), np.array([0, 0, 1, 1, 1, 2])), chunk_size=4),
        dict(attn_mask=float_mask, alibi_slopes=np.array([0.5, 0.25, 1.0, -0.5]), softcap=2.0),
    ]
    for kwargs in cases:
        out, lse = subject.attention(q, k, v, return_lse=True, **kwargs)
        parts = oracle.attention_parts(q, k, v, fully_masked_rows="zeros", **kwargs)
        _close(out, parts.output.value, np.float64)
        assert (np.isneginf(lse) == np.isneginf(parts.lse.value)).all(), kwargs
        finite = np.isfinite(parts.lse.value)
        _close(lse[finite], parts.lse.value[finite], np.float64)
    out = subject.attention(q[0, 0], k[0, 0], v[0, 0], is_causal=True)
    _close(out, oracle.attention(q[0, 0], k[0, 0], v[0, 0], is_causal=True).value, np.float64)
