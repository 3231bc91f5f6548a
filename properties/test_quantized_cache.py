"""Properties of the quantized (fp8) KV cache (:mod:`oracle.rules.quantization`): appended
keys and values are stored as fp8 codes with float32 scales per tensor or per K/V head, read
back dequantized, and ``cached_attention`` attends over what it reads back.

The round trip keeps every entry within the fp8 rounding of its scaled value
(:mod:`properties.quantization_bounds`); decoding through the cache equals causal attention over the
dequantized keys and values (the 50-digit oracle, items 1-3); bad scales, a storage that is not
fp8 and values outside the fp8 range at their scale are refused, and a refused append changes
nothing.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume
from hypothesis import given
from hypothesis import note
from hypothesis import strategies as st

from attnprops.oracle.rules import fp8_max
from attnprops.oracle.violations import BY_RULE
from attnprops.oracle.violations import Call
from attnprops.properties._support import assert_cache_unchanged
from attnprops.properties._support import assert_output_within
from attnprops.properties._support import attend
from attnprops.properties._support import cache_state
from attnprops.properties._support import decode_in_chunks
from attnprops.properties._support import oracle_with_bounds
from attnprops.properties.checks import assert_equal
from attnprops.properties.checks import assert_shape_dtype
from attnprops.properties.checks import assert_within
from attnprops.properties.checks import call_subject
from attnprops.properties.checks import fail
from attnprops.properties.invalid import Draws
from attnprops.properties.kernel_checks import agree
from attnprops.properties.plugin import current_subject
from attnprops.properties.quantization_bounds import quantization_bounds
from attnprops.properties.quantized_cases import kernel_quantized_runs
from attnprops.properties.quantized_cases import quantized_runs

SUBJECT = current_subject()


def _new_quantized(subject, run):
    """The subject's ``QuantizedKVCache`` for ``run``. Per-head scales are passed as arrays
    of this caller's that are doubled in place right after the call: the cache must keep its
    own copy (as it copies appended keys and values), so one that reads the caller's array
    by reference (vLLM recalibrates ``k_scale`` in place) dequantizes with the wrong scales."""
    B, Hkv, _, D = run.case.key.shape
    kwargs = run.cache_kwargs()
    passed = {
        name: np.array(kwargs[name])  # a fresh array, which this caller owns
        for name in ("key_scale", "value_scale")
        if isinstance(kwargs[name], np.ndarray)  # per head (per tensor: a float)
    }
    kwargs.update(passed)
    cache = call_subject(
        subject.module.QuantizedKVCache,
        B,
        Hkv,
        D,
        run.case.value.shape[3],
        **kwargs,
        what="QuantizedKVCache(...)",
    )
    for scales in passed.values():
        scales *= 2  # the caller's arrays change; the cache's scales must not
    return cache


def _describe(run) -> None:
    note(
        f"{run.storage}; key_scale {np.asarray(run.key_scale).tolist()}, value_scale "
        f"{np.asarray(run.value_scale).tolist()}; chunks {list(run.chunks)}"
    )


def _decoded(subject, run):
    cache = _new_quantized(subject, run)
    return decode_in_chunks(subject, run.case, run.chunks, cache=cache)


@pytest.mark.requires("quantized_cache")
@given(run=quantized_runs(SUBJECT))
def test_quantized_cache_round_trip_within_the_fp8_rounding(subject, run):
    """After decoding a sequence through a ``QuantizedKVCache``, the cache reports the scales
    it was given (float32, one per K/V head), holds fp8 codes of its storage dtype, and reads
    back each key and value ``x`` as ``x~`` in the cache's dtype with ``|x~ - c s|`` within the
    dequantization's rounding and ``|x~ - x|`` within the whole round trip's
    (:mod:`properties.quantization_bounds`): a scale read from another head, inverted, or not applied, fails
    it."""
    _describe(run)
    cache, _ = _decoded(subject, run)
    _assert_round_trip(cache, run)


def _assert_round_trip(cache, run) -> None:
    """``cache`` (``run`` decoded through it) reports the run's scales, holds fp8 codes of
    its storage and reads back each key and value within the round trip's bounds."""
    __tracebackhide__ = True
    case = run.case
    for which, appended in (("key", case.key), ("value", case.value)):
        given_scales = run.scales(which)
        reported = np.asarray(getattr(cache, f"{which}_scale"))
        assert_equal(
            out=np.broadcast_to(reported.astype(np.float64), given_scales.shape),
            expected=given_scales.astype(np.float64),
            what=f"{which}_scale as the cache reports it",
        )
        codes = getattr(cache, f"{which}_codes")
        if np.asarray(codes).dtype != np.dtype(run.storage):
            fail(f"{which}_codes: dtype {np.asarray(codes).dtype}, expected {run.storage}")
        read = assert_shape_dtype(
            out=getattr(cache, f"{which}s"),
            shape=appended.shape,
            dtype=case.dtype,
            what=f"dequantized {which}s",
        )
        bounds = quantization_bounds(appended, codes, given_scales, run.storage, case.dtype)
        exact = (
            np.asarray(codes).astype(np.float64)
            * given_scales.astype(np.float64)[None, :, None, None]
        )
        assert_within(
            out=read,
            expected=exact,
            bound=bounds.dequantized,
            what=f"dequantized {which}s against code * scale",
        )
        assert_within(
            out=read,
            expected=appended,
            bound=bounds.round_trip,
            what=f"dequantized {which}s against the appended ones ({run.storage})",
        )


@pytest.mark.requires("quantized_cache")
@pytest.mark.oracle_backed
@given(run=quantized_runs(SUBJECT))
def test_quantized_cache_attention_equals_attention_over_the_dequantized_kv(subject, run):
    """Decoding a sequence chunk by chunk through a ``QuantizedKVCache`` equals causal
    attention (the 50-digit oracle, with the subject's declared rounding model) over the
    keys and values the cache reads back, at every position: attention must read the codes
    with the scales the cache shows (vLLM's dequantize-then-attend), not the codes alone or
    with another head's scale."""
    _describe(run)
    cache, decoded = _decoded(subject, run)
    dequantized = run.case._replace(key=np.array(cache.keys), value=np.array(cache.values))
    parts, bounds = oracle_with_bounds(dequantized, subject)
    assert_output_within(
        decoded,
        dequantized,
        parts,
        bounds,
        what=f"{run.case.mask_layout}: decoded vs attention over the dequantized K/V",
        shape_what="decoded outputs",
    )


@pytest.mark.requires("quantized_cache")
@pytest.mark.kernel_sized
@given(run=kernel_quantized_runs(SUBJECT))
def test_kernel_sized_quantized_cache_grows_keeping_every_position(subject, run):
    """Hundreds of appends of mixed sizes (single tokens and sizes at tile boundaries) into a
    ``QuantizedKVCache``, growing it past any plausible preallocated capacity, leave it
    holding every position: its length is the positions appended, it reads each one back
    within the round trip's bounds (as test_quantized_cache_round_trip_within_the_fp8_rounding)
    and the decoded rows equal the subject's attention over what it reads back, within twice
    the agreement bound. A growth that copies the fp8 codes by value (``.to(uint8)`` where
    ``.view(uint8)`` was meant), rounds the history through another dtype or loses the
    scales fails here, and only past the first capacity."""
    case = run.case
    T = case.key.shape[2]
    note(f"{run.storage}, {len(run.chunks)} appends: {list(run.chunks[:40])}")
    cache, decoded = _decoded(subject, run)
    if len(cache) != T:
        fail(f"len(cache) = {len(cache)} after appending {T} positions")
    _assert_round_trip(cache, run)
    dequantized = case._replace(key=np.array(cache.keys), value=np.array(cache.values))
    agree(
        subject,
        dequantized,
        decoded,
        attend(subject, dequantized, "attention over the dequantized K/V"),
        what=f"decoded in {len(run.chunks)} appends vs attention over what the cache holds",
    )


def _out_of_range(run, which: str, data) -> np.ndarray:
    """One new position of ``which`` with one entry just past ``fp8_max * s`` of its head."""
    case = run.case
    x = (case.key if which == "key" else case.value)[:, :, :1].copy()
    scales = run.scales(which)
    b, h, d = (
        data.draw(st.integers(0, x.shape[0] - 1), label="batch"),
        data.draw(st.integers(0, x.shape[1] - 1), label="head"),
        data.draw(st.integers(0, x.shape[3] - 1), label="entry"),
    )
    limit = fp8_max(run.storage) * float(scales[h])
    sign = data.draw(st.sampled_from([1, -1]), label="sign")
    past = np.array(sign * limit * 1.02).astype(x.dtype)  # 2 % past: > 1 ulp of any dtype
    assume(np.isfinite(past) and abs(float(past)) > limit)
    x[b, h, 0, d] = past
    return x


@pytest.mark.requires("quantized_cache", "validates_inputs")
@given(run=quantized_runs(SUBJECT), data=st.data())
def test_quantized_cache_refuses_bad_scales_and_out_of_range_values(subject, run, data):
    """A ``QuantizedKVCache`` refuses (``ValueError``/``TypeError``) a key or value scale that
    is 0, negative, NaN, infinite, rounds to 0 in float32 or has the wrong shape, and a
    storage dtype that is not fp8; after some appends, an append with one entry past
    ``fp8_max * s`` of its head is refused (rejected, not saturated) and leaves the cache
    exactly as it was."""
    _describe(run)
    case = run.case
    B, Hkv, _, D = case.key.shape
    kind = data.draw(st.sampled_from(["scale", "storage", "range"]), label="what is wrong")
    if kind == "range":
        cache, _ = decode_in_chunks(
            subject, case, run.chunks[:1], cache=_new_quantized(subject, run)
        )
        before = cache_state(cache)
        which = data.draw(st.sampled_from(["key", "value"]), label="which")
        new = {"key": case.key[:, :, :1], "value": case.value[:, :, :1]}
        new[which] = _out_of_range(run, which, data)
        query = case.query[:, :, :1]
        try:
            subject.cached_attention(query, new["key"], new["value"], cache, scale=case.scale)
        except (ValueError, TypeError):
            pass
        else:
            fail(f"an appended {which} past {run.storage}'s range at its scale was accepted")
        assert_cache_unchanged(cache, before, f"the refused out-of-range {which}")
        return
    # The broken argument from the registry of rule violations (oracle.violations), applied
    # to this run's cache; a bad key scale is given to the value scale half the time.
    rule = {
        "storage": "quantized storage not fp8",
        "scale": "quantization scale not finite and > 0",
    }
    sizes = dict(batch=B, num_kv_heads=Hkv, head_dim=D, value_dim=case.value.shape[3])
    base = Call(None, None, None, {"cache": {**sizes, **run.cache_kwargs()}}, "quantized_append")
    kwargs = BY_RULE[rule[kind]].breaks(base, Draws(data.draw)).kwargs["cache"]
    if kind == "scale" and data.draw(st.booleans(), label="the value scale instead"):
        kwargs["key_scale"], kwargs["value_scale"] = run.key_scale, kwargs["key_scale"]
    kwargs = {k: v for k, v in kwargs.items() if k not in sizes}
    try:
        subject.module.QuantizedKVCache(B, Hkv, D, case.value.shape[3], **kwargs)
    except (ValueError, TypeError):
        return
    fail(f"QuantizedKVCache accepted {kind} {kwargs}")
