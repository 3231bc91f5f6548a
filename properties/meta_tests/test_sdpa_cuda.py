"""Tests of the CUDA SDPA subjects' shared code (:mod:`properties.subjects._sdpa_cuda`) on
the CPU: the maskless forms of causality, the operands fitted to the fused kernels, and the
refusal to import without a CUDA device. The subjects themselves run only where torch sees
a GPU (``docs/findings.md`` records what the suite found there)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from attnprops.properties.subject_import import SubjectError
from attnprops.properties.subject_import import install_hint


@pytest.fixture(scope="module")
def cuda():
    """:mod:`_sdpa_cuda`, imported when a test runs (torch is not imported at collection)."""
    pytest.importorskip("torch", reason=install_hint("torch"))
    return importlib.import_module("attnprops.properties.subjects._sdpa_cuda")


@pytest.fixture(scope="module")
def torch_sdpa(cuda):
    return importlib.import_module("attnprops.properties.subjects.torch_sdpa")


SIZES = [(Tq, Tk) for Tk in range(1, 6) for Tq in range(1, Tk + 1)]  # causal: Tq <= Tk


def _visible(keywords: dict, query_len: int, key_len: int):
    """The bool ``(Tq, Tk)`` visibility that SDPA reads from ``keywords``."""
    import torch

    mask = keywords["attn_mask"]
    if mask is not None:  # a CausalBias: PyTorch's own materialisation
        return mask._materialize(torch.device("cpu")).to(torch.bool)
    if keywords["is_causal"]:  # PyTorch's top-left is_causal
        return torch.ones(query_len, key_len, dtype=torch.bool).tril()
    return torch.ones(query_len, key_len, dtype=torch.bool)


@pytest.mark.parametrize("lower_right", [True, False])
@pytest.mark.parametrize(("query_len", "key_len"), SIZES)
def test_maskless_causality_is_the_causal_rule(cuda, query_len, key_len, lower_right):
    """Each maskless form sees exactly the keys ``j <= query_start + i``, at every
    ``query_start`` it is chosen for; the bottom-right form only with ``lower_right``."""
    masks = importlib.import_module("attnprops.properties.subjects._torch_masks")
    chosen = set()
    for start in [None, *range(0, key_len + 2)]:
        keywords = cuda._maskless_causal(query_len, key_len, start, lower_right)
        if keywords is None:
            continue
        chosen.add(start)
        wanted = masks.causal_mask(query_len, key_len, start)
        assert cuda.torch.equal(_visible(keywords, query_len, key_len), wanted), (start, keywords)
    first = masks.first_position(query_len, key_len, None)
    assert 0 in chosen and key_len - 1 in chosen
    assert (None in chosen) == (lower_right or first in (0,) or first >= key_len - 1)


def _random(shape, seed, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


CALLS = [
    pytest.param((2, 4, 3, 5), (2, 2, 7, 5), (2, 2, 7, 3), {"is_causal": True}, id="gqa-causal"),
    pytest.param((1, 2, 4, 9), (1, 1, 4, 9), (1, 1, 4, 9), {"is_causal": True}, id="gqa-square"),
    pytest.param(
        (1, 1, 2, 3), (1, 1, 6, 3), (1, 1, 6, 2), {"is_causal": True, "query_start": 2}, id="offset"
    ),
    pytest.param(
        (3, 5), (4, 5), (4, 6), {"attn_mask": np.array([True, False, True, True])}, id="2d"
    ),
    pytest.param(
        (1, 2, 3, 4),
        (1, 1, 5, 4),
        (1, 1, 5, 4),
        {"attn_mask": np.ones((1, 1)), "sinks": np.array([0.5, -1.0])},
        id="broadcast-mask-sinks",
    ),
    pytest.param(
        (1, 1, 3, 4), (1, 1, 5, 4), (1, 1, 5, 4), {"window": (1, 0), "is_causal": True}, id="window"
    ),
]


@pytest.mark.parametrize("native_gqa", [True, False])
@pytest.mark.parametrize(("q_shape", "k_shape", "v_shape", "options"), CALLS)
def test_cpu_run_equals_torch_sdpa(
    cuda, torch_sdpa, q_shape, k_shape, v_shape, options, native_gqa
):
    """On the CPU (math kernel) the CUDA subjects' path gives :mod:`torch_sdpa`'s output
    within float64 rounding: the head-dim padding, the repeated K/V heads, the maskless
    causality and the row-major mask change no value. The mask is passed transposed in
    memory (a column-major copy) to check that the path does not depend on its layout."""
    query, key, value = (_random(s, n) for n, s in enumerate((q_shape, k_shape, v_shape)))
    if "attn_mask" in options and np.ndim(options["attn_mask"]) == 2:
        options = {**options, "attn_mask": np.asfortranarray(options["attn_mask"])}
    attention, _ = cuda.subject_functions(
        device="cpu",
        backends=[cuda.SDPBackend.MATH],
        lower_right=True,
        native_gqa=native_gqa,
    )
    got = attention(query, key, value, **options)
    wanted = torch_sdpa.attention(query, key, value, **options)
    assert got.shape == wanted.shape and got.dtype == wanted.dtype
    np.testing.assert_allclose(got, wanted, rtol=1e-13, atol=1e-13)


def test_cached_attention_equals_torch_sdpa_and_keeps_the_cache_on_failure(cuda, torch_sdpa):
    """The CUDA subjects' cache path, run on the CPU: two appends give torch_sdpa's cached
    outputs; a call whose query length differs from the new keys' raises and leaves the
    cache as it was."""
    _, cached = cuda.subject_functions(
        device="cpu", backends=[cuda.SDPBackend.MATH], lower_right=True, native_gqa=True
    )
    mine, theirs = (torch_sdpa.KVCache(1, 2, 3, 3, dtype=np.float64) for _ in range(2))
    for step, length in enumerate((3, 2)):
        q, k, v = (
            _random(s, 10 * step + n)
            for n, s in enumerate([(1, 4, length, 3)] + [(1, 2, length, 3)] * 2)
        )
        got = cached(q, k, v, mine, sinks=np.zeros(4))
        wanted = torch_sdpa.cached_attention(q, k, v, theirs, sinks=np.zeros(4))
        np.testing.assert_allclose(got, wanted, rtol=1e-13, atol=1e-13)
    before = mine.keys.copy()
    with pytest.raises(ValueError, match="query"):
        cached(_random((1, 4, 2, 3), 99), *(_random((1, 2, 1, 3), 98),) * 2, mine)
    assert mine.keys.shape == before.shape and np.array_equal(mine.keys, before)


@pytest.mark.parametrize("name", ["torch_sdpa_cuda_flash", "torch_sdpa_cuda_efficient"])
def test_cuda_subjects_refuse_to_import_without_a_device(cuda, name):
    if cuda.torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    with pytest.raises(SubjectError, match=r"torch.cuda.is_available\(\) is False.*torch_sdpa"):
        importlib.import_module(f"attnprops.properties.subjects.{name}")
