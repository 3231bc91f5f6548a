"""Properties of the rolling (sliding-window) KV cache (:mod:`oracle.rules.serving`): a ring
of ``capacity`` slots holding the last ``capacity`` positions, served by ``cached_attention``
with ``window=(left, ...)``, ``left <= capacity``.

Decoding through it must equal full causal attention with that window over the whole sequence,
also after the ring has wrapped several times; it holds exactly the last ``capacity`` positions
in position order; a window it cannot serve is refused and changes nothing.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import note
from hypothesis import strategies as st

from attnprops.properties._support import assert_cache_unchanged
from attnprops.properties._support import assert_output_within
from attnprops.properties._support import cache_state
from attnprops.properties._support import decode_in_chunks
from attnprops.properties._support import oracle_with_bounds
from attnprops.properties.cache_draws import append_chunks
from attnprops.properties.cache_draws import run_arrays
from attnprops.properties.checks import assert_equal
from attnprops.properties.checks import fail
from attnprops.properties.mask_draws import masks
from attnprops.properties.plugin import current_subject
from attnprops.properties.strategies import AttentionCase
from attnprops.properties.strategies import values
from attnprops.properties.variant_draws import attention_sinks

SUBJECT = current_subject()


@st.composite
def rolling_runs(draw):
    """``(case, capacity, chunks)``: a causal sequence of up to ``3 * capacity + 3`` positions
    (capacity 1-4) with a window ``(left <= capacity, 0 or None)`` and the subject's sinks half
    the time, and its split into appended chunks (token by token half the time)."""
    caps = SUBJECT.capabilities
    dtype = np.dtype(draw(st.sampled_from(tuple(reversed(caps.dtypes)))))
    magnitude = draw(st.sampled_from(("unit", "ties", "large")))
    capacity = draw(st.integers(1, 4))
    left = draw(st.integers(0, capacity))
    right = None if caps.window == "sliding_window" else draw(st.sampled_from([0, None]))
    total = draw(st.integers(1, 3 * capacity + 3))
    q, k, v = draw(run_arrays(total, dtype, magnitude, max_kv_heads=2, max_dim=3))
    sinks = draw(attention_sinks(q.shape[1], dtype)) if caps.sinks and draw(st.booleans()) else None
    scale = draw(st.one_of(st.none(), st.floats(0.05, 4)))
    chunks = draw(append_chunks(total))
    layout = f"rolling cache of {capacity}, window ({left}, {right})"
    case = AttentionCase(
        q, k, v, None, True, None, scale, layout, magnitude, window=(left, right), sinks=sinks
    )
    return case, capacity, chunks


# The layouts with a row per query: the diagonal can then be kept visible in each row.
_ROW_LAYOUTS = (
    "(Tq, Tk)",
    "(1, 1, Tq, Tk)",
    "query-specific (B, 1, Tq, Tk)",
    "per-head (B, Hq, Tq, Tk)",
)


@st.composite
def masked_rolling_runs(draw):
    """:func:`rolling_runs` with an ``attn_mask`` over the whole sequence (bool, or float
    where the subject takes one; a row per query), each query's own position kept visible,
    so no row is empty whatever the window. Returns ``(case, capacity, chunks)``."""
    case, capacity, chunks = draw(rolling_runs())
    float_masks = SUBJECT.capabilities.float_masks
    mask, layout = draw(
        masks(case.dims, is_causal=True, start=0, layouts=_ROW_LAYOUTS, float_masks=float_masks)
    )
    diagonal = np.arange(case.dims.query_len)
    mask[..., diagonal, diagonal] = True if mask.dtype == bool else 0.0
    return (
        case._replace(attn_mask=mask, mask_layout=f"{case.mask_layout}, {layout}"),
        capacity,
        chunks,
    )


def _new_rolling(subject, case, capacity):
    B, Hkv, _, D = case.key.shape
    return subject.module.RollingKVCache(
        B, Hkv, D, case.value.shape[3], capacity=capacity, dtype=case.dtype
    )


@pytest.mark.requires("rolling_cache")
@pytest.mark.oracle_backed
@given(run=rolling_runs())
def test_rolling_cache_equals_full_windowed_attention(subject, run):
    """Decoding a sequence chunk by chunk through a ``RollingKVCache`` of ``capacity`` slots
    with ``window=(left, ...)``, ``left <= capacity``, equals causal attention with that window
    over the whole sequence (the 50-digit oracle), at every position, also long after the ring
    wrapped; afterwards the cache holds exactly the last ``capacity`` positions, in position
    order, and ``len`` counts every position (Mistral's rolling buffer)."""
    case, capacity, chunks = run
    note(f"capacity {capacity}, chunks {chunks}")
    parts, bounds = oracle_with_bounds(case, subject)
    cache, decoded = decode_in_chunks(
        subject, case, chunks, cache=_new_rolling(subject, case, capacity)
    )
    assert_output_within(
        decoded,
        case,
        parts,
        bounds,
        what=f"rolling cache of {capacity} vs full attention with window {case.window}",
        shape_what="decoded outputs",
    )
    total = case.key.shape[2]
    if len(cache) != total:
        fail(f"len(cache) = {len(cache)} after appending {total} positions")
    held = np.arange(max(0, total - capacity), total)
    assert_equal(out=np.asarray(cache.positions), expected=held, what="held positions")
    assert_equal(out=cache.keys, expected=case.key[:, :, held], what="held keys, in order")
    assert_equal(out=cache.values, expected=case.value[:, :, held], what="held values, in order")


@pytest.mark.requires("rolling_cache")
@pytest.mark.oracle_backed
@given(run=masked_rolling_runs())
def test_masked_rolling_decode_equals_full_windowed_attention(subject, run):
    """``cached_attention`` on a ``RollingKVCache`` with an ``attn_mask``: the mask's columns
    are the positions the ring holds before the call, oldest first, then the appended ones
    (``impl.KVCache.cached_attention``), never its slots' order; decoding with the matching
    parts of one mask over the whole sequence equals causal windowed attention with that
    mask (the 50-digit oracle), also after the ring wrapped."""
    case, capacity, chunks = run
    note(f"capacity {capacity}, chunks {chunks}")
    parts, bounds = oracle_with_bounds(case, subject)
    cache = _new_rolling(subject, case, capacity)
    _, decoded = decode_in_chunks(subject, case, chunks, cache=cache, capacity=capacity)
    assert_output_within(
        decoded,
        case,
        parts,
        bounds,
        what=f"masked rolling cache of {capacity} vs full attention with window {case.window}",
        shape_what="decoded outputs",
    )


@pytest.mark.requires("rolling_cache", "validates_inputs")
@given(run=rolling_runs(), data=st.data())
def test_rolling_cache_refuses_a_window_it_cannot_serve(subject, run, data):
    """``cached_attention`` on a ``RollingKVCache`` of ``capacity`` with no window or a window
    reaching more than ``capacity`` positions back raises ``ValueError``/``TypeError`` and
    leaves the cache as it was."""
    case, capacity, chunks = run
    cache, _ = decode_in_chunks(
        subject, case, chunks[:1], cache=_new_rolling(subject, case, capacity)
    )
    before = cache_state(cache)
    window = data.draw(
        st.one_of(
            st.none(),
            st.tuples(st.integers(capacity + 1, capacity + 4), st.sampled_from([0, None])),
            st.just((None, 0)),
        ),
        label="window",
    )
    if window is not None and SUBJECT.capabilities.window == "sliding_window":
        window = None if window[0] is None else (window[0], None)  # its only form
    one = slice(0, 1)
    try:
        subject.cached_attention(
            case.query[:, :, one],
            case.key[:, :, one],
            case.value[:, :, one],
            cache,
            scale=case.scale,
            **({} if window is None else {"window": window}),
        )
    except (ValueError, TypeError):
        pass
    else:
        fail(f"window {window} on a rolling cache of {capacity} was accepted")
    assert_cache_unchanged(cache, before, f"the refused window {window}")


@pytest.mark.requires("rolling_cache", "validates_inputs")
@given(run=rolling_runs(), data=st.data())
def test_failed_rolling_attention_changes_nothing(subject, run, data):
    """After decoding through a ``RollingKVCache`` (often past a wrap), a ``cached_attention``
    that fails in its attention step (a query of the wrong head_dim, a scale of 0, a row with
    no visible key) raises and leaves the cache exactly as before: ``len``, the held positions,
    keys and values. The ring is written in place, so a rollback must restore the slot the
    failed append overwrote, not only the length."""
    case, capacity, chunks = run
    cache, _ = decode_in_chunks(subject, case, chunks, cache=_new_rolling(subject, case, capacity))
    before = cache_state(cache)
    B, Hq, _, D = case.query.shape
    kinds = ["query head_dim", "scale 0"]
    if SUBJECT.capabilities.fully_masked_rows == "raise":
        kinds.append("row with no visible key")
    how = data.draw(st.sampled_from(kinds), label="failure")
    query, mask, scale = np.ones((B, Hq, 1, D), case.dtype), None, case.scale
    if how == "query head_dim":
        query = np.ones((B, Hq, 1, D + 1), case.dtype)
    elif how == "scale 0":
        scale = 0.0
    else:
        mask = np.zeros((B, Hq, 1, len(cache.positions) + 1), dtype=bool)
    key = data.draw(values((B, case.key.shape[1], 1, D), case.dtype.name, "unit"), label="key")
    value = np.full((B, case.key.shape[1], 1, case.value.shape[3]), 7.0, case.dtype)
    note(f"failure: {how} after {len(cache)} positions (capacity {capacity})")
    try:
        subject.cached_attention(
            query, key, value, cache, attn_mask=mask, scale=scale, window=case.window
        )
    except (ValueError, TypeError):
        pass
    else:
        fail(f"cached_attention with a {how} was accepted")
    assert_cache_unchanged(cache, before, f"the failed call ({how})")
