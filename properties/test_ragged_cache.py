"""Properties of ragged batches (:mod:`oracle.rules.serving`): one cached length per sequence.

``attention_with_kvcache(query (B, Hq, Tq, D), key_cache (B, Hkv, T, D), value_cache (B, Hkv,
T, Dv), cache_seqlens (B,))`` must equal each sequence run alone over its own ``L_b`` keys, its
queries at positions ``L_b - Tq ..``; a batch padded on the left (Hugging Face's batched
generation) through the plain :class:`KVCache` with a key-padding mask must equal the unpadded
sequences; invalid lengths and block tables are refused and nothing changes.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume
from hypothesis import given
from hypothesis import note
from hypothesis import strategies as st

from attnprops.oracle.violations import BY_RULE
from attnprops.oracle.violations import KVCACHE_RULES
from attnprops.oracle.violations import Call
from attnprops.properties._support import assert_rows_match_oracle
from attnprops.properties._support import oracle_with_bounds
from attnprops.properties.checks import assert_equal
from attnprops.properties.checks import assert_shape_dtype
from attnprops.properties.checks import assert_within
from attnprops.properties.checks import call_subject
from attnprops.properties.checks import fail
from attnprops.properties.invalid import Draws
from attnprops.properties.plugin import current_subject
from attnprops.properties.serving_cases import serving_cases
from attnprops.properties.serving_cases import shared_variants
from attnprops.properties.strategies import AttentionCase
from attnprops.properties.strategies import values

SUBJECT = current_subject()


@pytest.mark.requires("ragged_cache")
@pytest.mark.oracle_backed
@given(case=serving_cases(SUBJECT, paged=False))
def test_ragged_batch_equals_each_sequence_alone(subject, case):
    """Each row of a ragged batch (``cache_seqlens`` ``(B,)``, contiguous storage with
    positions past each length that must not be read) equals its sequence alone: its ``Tq``
    queries, the last of its ``L_b`` positions, over its ``L_b`` keys, with the same window,
    chunks, ALiBi, cap and sinks (the law behind FlashAttention's ``cache_seqlens``)."""
    assert_rows_match_oracle(subject, case, "ragged batch vs each sequence alone")


@pytest.mark.requires("ragged_cache")
@given(
    case=serving_cases(SUBJECT, paged=False),
    junk=st.sampled_from([np.nan, np.inf, -np.inf]),
)
def test_storage_past_the_lengths_is_never_read(subject, case, junk):
    """The contiguous storage past each sequence's length is never read: filled there with
    NaN, inf or -inf (what a preallocated ``np.empty`` / ``torch.empty`` cache may hold,
    and the rulebook allows), the output is bitwise the same and no error is raised. A
    kernel that reads whole tiles past the length and masks afterwards (NaN * 0), or checks
    the whole storage for non-finite values, fails here."""
    key_cache, value_cache = case.key_cache.copy(), case.value_cache.copy()
    for b, n in enumerate(case.cache_seqlens.tolist()):
        key_cache[b, :, n:] = junk
        value_cache[b, :, n:] = junk
    assume((key_cache.shape[2] > case.cache_seqlens).any())  # some storage past a length
    note(f"storage past the lengths {case.cache_seqlens.tolist()} set to {junk}")
    outputs = [
        call_subject(
            subject.attention_with_kvcache,
            case.query,
            k,
            v,
            case.cache_seqlens,
            **case.kwargs(),
            what=f"attention_with_kvcache ({what})",
        )
        for k, v, what in (
            (case.key_cache, case.value_cache, "finite storage"),
            (key_cache, value_cache, f"{junk} past the lengths"),
        )
    ]
    assert_equal(
        out=np.asarray(outputs[1]),
        expected=np.asarray(outputs[0]),
        what=f"output with {junk} past the lengths",
    )


@st.composite
def left_padded_batches(draw, subject):
    """``(sequences, pads, decode_steps, options)``: 1-3 unpadded causal sequences (one
    :class:`AttentionCase` each, ``(1, Hq, n_b, D)``, prompt then ``decode_steps`` decoded
    tokens), each prompt left-padded to the longest by ``pads[b]`` positions; ``options``:
    the subject's window and sinks (what ``cached_attention`` takes)."""
    dtype = np.dtype(draw(st.sampled_from(tuple(reversed(subject.capabilities.dtypes)))))
    magnitude = draw(st.sampled_from(("unit", "ties", "large")))
    batch = draw(st.integers(1, 3))
    kv_heads, group = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    heads, head_dim, value_dim = kv_heads * group, draw(st.integers(1, 4)), draw(st.integers(1, 4))
    prompts = draw(st.lists(st.integers(1, 5), min_size=batch, max_size=batch))
    steps = draw(st.integers(0, 2))
    variants = draw(shared_variants(subject, batch, heads, dtype, chunks=False))
    options = {k: variants[k] for k in ("window", "sinks") if k in variants}
    scale = draw(st.one_of(st.none(), st.floats(0.05, 4)))
    sequences = []
    for n in prompts:
        shape = (1, heads, n + steps, head_dim)
        q = draw(values(shape, dtype.name, magnitude))
        k = draw(values((1, kv_heads, n + steps, head_dim), dtype.name, magnitude))
        v = draw(values((1, kv_heads, n + steps, value_dim), dtype.name, magnitude))
        sequences.append(
            AttentionCase(
                q, k, v, None, True, None, scale, "unpadded sequence", magnitude, **options
            )
        )
    pads = [max(prompts) - n for n in prompts]
    return sequences, pads, steps, options


@pytest.mark.requires("kv_cache")
@pytest.mark.oracle_backed
@given(batch=left_padded_batches(SUBJECT), data=st.data())
def test_left_padded_decode_equals_unpadded(subject, batch, data):
    """A batch of prompts left-padded to one length (pad positions hold values of their own),
    prefilled through ``cached_attention`` with a key-padding mask and then decoded token by
    token, gives every real token the output of its sequence run unpadded: the padded
    positions shift every real position by the same ``pads[b]``, and causality, the window and
    the sinks see only differences of positions (Hugging Face's batched generation)."""
    sequences, pads, steps, options = batch
    first = sequences[0]
    B, prompt = len(sequences), max(s.key.shape[2] for s in sequences) - steps
    heads, kv_heads = first.query.shape[1], first.key.shape[1]
    total = prompt + steps
    arrays = []
    for name, kv in (("query", False), ("key", True), ("value", True)):
        last = getattr(first, name).shape[3]
        filler = data.draw(
            values((B, kv_heads if kv else heads, total, last), first.dtype.name, first.magnitude),
            label=f"{name} at pad positions",
        )
        padded = filler.copy()
        for b, seq in enumerate(sequences):
            padded[b, :, pads[b] :] = getattr(seq, name)[0]
        arrays.append(padded)
    query, key, value = arrays
    real = np.arange(total)[None, :] >= np.array(pads)[:, None]  # (B, T): real positions
    note(f"pads {pads}, prompt {prompt}, decode steps {steps}, options {options}")
    cache = subject.module.KVCache(B, kv_heads, key.shape[3], value.shape[3], dtype=first.dtype)
    prompt_mask = real[:, None, None, :prompt] & real[:, None, :prompt, None]
    prompt_mask |= np.eye(prompt, dtype=bool)[None, None] & ~real[:, None, :prompt, None]
    outputs = [
        call_subject(
            subject.cached_attention,
            query[:, :, :prompt],
            key[:, :, :prompt],
            value[:, :, :prompt],
            cache,
            attn_mask=prompt_mask,  # real queries see real keys, a pad query only itself
            scale=first.scale,
            **options,
            what="cached_attention of the left-padded prompts",
        )
    ]
    for t in range(prompt, total):
        outputs.append(
            call_subject(
                subject.cached_attention,
                query[:, :, t : t + 1],
                key[:, :, t : t + 1],
                value[:, :, t : t + 1],
                cache,
                attn_mask=real[:, None, None, : t + 1],
                scale=first.scale,
                **options,
                what=f"cached_attention decoding padded position {t}",
            )
        )
    out = assert_shape_dtype(
        out=np.concatenate([np.asarray(o) for o in outputs], axis=2),
        shape=(B, heads, total, first.value.shape[3]),
        dtype=first.dtype,
        what="padded outputs",
    )
    for b, seq in enumerate(sequences):
        parts, bounds = oracle_with_bounds(seq, subject)
        assert_within(
            out=out[b : b + 1, :, pads[b] :],
            expected=parts.output.value,
            bound=bounds.output,
            what=f"sequence {b} left-padded by {pads[b]} vs unpadded",
            case=seq,
        )


@pytest.mark.requires("ragged_cache", "validates_inputs")
@given(
    case=st.sampled_from([False, True] if SUBJECT.capabilities.paged_cache else [False]).flatmap(
        lambda paged: serving_cases(SUBJECT, paged=paged)
    ),
    data=st.data(),
)
def test_invalid_lengths_and_block_tables_are_rejected(subject, case, data):
    """A drawn call broken by one rule of the registry
    (:data:`oracle.violations.KVCACHE_RULES`): a length outside ``[0, capacity]`` or below
    ``Tq``, lengths that are not an integer ``(B,)`` array, a block table naming a page outside
    the pool, or one with fewer columns than a sequence's length needs (FlashAttention checks
    exactly this bound), raises ``ValueError``/``TypeError``, and no argument is modified."""
    layout = "contiguous" if case.block_table is None else "paged"
    rule = data.draw(st.sampled_from(KVCACHE_RULES[layout]), label="rule")
    valid = Call(
        case.query,
        case.key_cache,
        case.value_cache,
        {"cache_seqlens": case.cache_seqlens, **case.kwargs()},
        "attention_with_kvcache",
    )
    broken = BY_RULE[rule].breaks(valid, Draws(data.draw))
    args = {
        "query": broken.query,
        "key_cache": broken.key,
        "value_cache": broken.value,
        **broken.kwargs,
    }
    before = {k: np.array(v, copy=True) for k, v in args.items() if isinstance(v, np.ndarray)}
    note(f"broken: {rule}; {case.describe()}")
    try:
        subject.attention_with_kvcache(**args)
    except (ValueError, TypeError):
        pass
    else:
        fail(f"attention_with_kvcache with {rule} was accepted")
    for name, old in before.items():
        assert_equal(out=args[name], expected=old, what=f"{name} after the rejected call ({rule})")
