"""Properties of the KV cache: incremental decoding equals full causal attention, the cache
holds Hkv heads and its bytes follow the formula, appends copy and are atomic.

Cache shapes: keys ``(B, Hkv, T, D)``, values ``(B, Hkv, T, Dv)``; ``cached_attention``
appends ``Tnew`` positions and attends causally with ``query_start`` = the previous length.
"""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest
from hypothesis import example
from hypothesis import given
from hypothesis import note
from hypothesis import strategies as st

from attnprops.oracle import lab
from attnprops.oracle.violations import BY_RULE
from attnprops.oracle.violations import CACHE_APPEND_RULES
from attnprops.oracle.violations import Call
from attnprops.properties._support import LAB_KEY
from attnprops.properties._support import LAB_QUERY
from attnprops.properties._support import LAB_VALUE
from attnprops.properties._support import assert_cache_unchanged
from attnprops.properties._support import assert_decode_matches_oracle
from attnprops.properties._support import cache_state
from attnprops.properties._support import case_from
from attnprops.properties._support import decode_in_chunks
from attnprops.properties._support import fit_to_subject
from attnprops.properties._support import lab_dtype
from attnprops.properties._support import new_cache
from attnprops.properties.cache_draws import append_chunks
from attnprops.properties.checks import assert_equal
from attnprops.properties.checks import assert_within
from attnprops.properties.checks import fail
from attnprops.properties.invalid import Draws
from attnprops.properties.mask_draws import MASK_LAYOUTS
from attnprops.properties.mask_draws import masks
from attnprops.properties.plugin import current_subject
from attnprops.properties.strategies import dims
from attnprops.properties.strategies import values

SUBJECT = current_subject()
# What a failed append or cached_attention may raise: the rule's ValueError/TypeError, or
# anything from a subject that declares validates_inputs=False.
VALIDATES = SUBJECT.capabilities.validates_inputs
REFUSALS = (ValueError, TypeError) if VALIDATES else Exception


def _takes_capacity() -> bool:
    """Whether the subject's ``KVCache`` takes impl's ``capacity`` (its initial slots)."""
    cache = getattr(SUBJECT.module, "KVCache", None) if SUBJECT.capabilities.kv_cache else None
    try:
        return cache is not None and "capacity" in inspect.signature(cache).parameters
    except (TypeError, ValueError):  # a signature Python cannot read: not used
        return False


_TAKES_CAPACITY = _takes_capacity()


@st.composite
def cache_runs(draw, *, max_len=6):
    """A causal self-attention problem and a split of its T positions into appended chunks
    (all ones = token by token). Returns ``(case, chunks)``."""
    d = draw(dims(max_len=max_len, causal_ok=True))
    T = d.key_len
    dtype = draw(st.sampled_from(tuple(reversed(SUBJECT.capabilities.dtypes))))
    magnitude = draw(st.sampled_from(("unit", "ties", "large")))
    q = draw(values((d.batch, d.num_heads, T, d.head_dim), dtype, magnitude))
    k = draw(values((d.batch, d.num_kv_heads, T, d.head_dim), dtype, magnitude))
    v = draw(values((d.batch, d.num_kv_heads, T, d.value_dim), dtype, magnitude))
    chunks = draw(append_chunks(T))
    scale = draw(st.one_of(st.none(), st.floats(0.05, 4)))
    return case_from(
        q, k, v, is_causal=True, scale=scale, layout="causal self-attention", magnitude=magnitude
    ), chunks


LAB_CACHE_RUN = (
    case_from(
        LAB_QUERY,
        LAB_KEY,
        LAB_VALUE,
        is_causal=True,
        layout="seed 000: cache 2 tokens, decode the 3rd",
    ),
    [2, 1],
)


@pytest.mark.requires("kv_cache")
@pytest.mark.oracle_backed
@given(run=cache_runs())
@example(run=LAB_CACHE_RUN)
def test_cached_decode_equals_full_causal(subject, run):
    """Token-by-token and arbitrary-chunk ``cached_attention`` equals full causal attention
    (each query at its absolute position; the source lab's cache check), and the cache ends
    holding exactly the appended keys and values."""
    case, chunks = run
    case = fit_to_subject(case, subject)
    note(f"chunks: {chunks}")
    cache = assert_decode_matches_oracle(
        subject, case, chunks, f"cached decode in chunks {chunks} vs 50-digit full causal"
    )
    if len(cache) != case.key.shape[2]:
        fail(f"len(cache) = {len(cache)} after appending {case.key.shape[2]} positions")
    assert_equal(out=cache.keys, expected=case.key, what="cached keys")
    assert_equal(out=cache.values, expected=case.value, what="cached values")


@st.composite
def masked_cache_runs(draw):
    """:func:`cache_runs` with an ``attn_mask`` over the whole sequence, of any layout
    (:func:`properties.mask_draws.masks`: bool, or float where the subject takes one), that
    leaves every query a visible key. Returns ``(case, chunks)``."""
    case, chunks = draw(cache_runs())
    layouts = tuple(n for n in MASK_LAYOUTS if n != "none")
    float_masks = SUBJECT.capabilities.float_masks
    mask, layout = draw(
        masks(case.dims, is_causal=True, start=0, layouts=layouts, float_masks=float_masks)
    )
    return case._replace(attn_mask=mask, mask_layout=layout), chunks


@pytest.mark.requires("kv_cache")
@pytest.mark.oracle_backed
@given(run=masked_cache_runs())
def test_masked_cached_decode_equals_full_causal(subject, run):
    """``cached_attention`` with an ``attn_mask``: each call's mask has its queries' rows and
    a column for every key it attends, the cached positions in order, then the appended ones
    (``impl.KVCache.cached_attention``); decoding in chunks with the matching parts of one
    mask over the whole sequence equals full causal attention with that mask. A mask read
    against another order of the keys (a ring's slots, the new keys first) or shifted by
    the cache length shows here."""
    case, chunks = run
    note(f"chunks: {chunks}")
    assert_decode_matches_oracle(
        subject, case, chunks, f"masked cached decode in chunks {chunks} vs 50-digit full causal"
    )


@pytest.mark.requires("kv_cache")
@given(run=cache_runs())
def test_cache_holds_kv_heads(subject, run):
    """After decoding with Hq query heads the cache still holds Hkv heads (K/V are never
    repeated to Hq), and its ``nbytes`` equals ``kv_cache_bytes`` for its size (quick
    reference: 'GQA cache not smaller -> K/V physically copied to Hq before caching')."""
    case, chunks = run
    cache, _ = decode_in_chunks(subject, case, chunks)
    B, Hkv, T, D = case.key.shape
    Dv = case.value.shape[3]
    if np.shape(cache.keys) != (B, Hkv, T, D) or np.shape(cache.values) != (B, Hkv, T, Dv):
        fail(
            f"cache holds keys {np.shape(cache.keys)} values {np.shape(cache.values)}; "
            f"expected {(B, Hkv, T, D)} and {(B, Hkv, T, Dv)} (Hq={case.query.shape[1]})"
        )
    if SUBJECT.capabilities.kv_cache_bytes and D == Dv:
        formula = subject.module.kv_cache_bytes(
            num_layers=1, batch=B, tokens=T, num_kv_heads=Hkv, head_dim=D, dtype=case.dtype
        )
        real = cache.keys.nbytes + cache.values.nbytes
        if formula != real:
            fail(f"cache nbytes {real} != kv_cache_bytes {formula} for B={B} Hkv={Hkv} T={T} D={D}")


def _bad_append(draw, cache, dtype):
    """A (key, value) pair of 1-3 new tokens that breaks one append rule of the registry
    (:data:`oracle.violations.CACHE_APPEND_RULES`), the break's choices drawn."""
    B, Hkv, D, Dv = cache.batch, cache.num_kv_heads, cache.head_dim, cache.value_dim
    n = draw(st.integers(1, 3))
    valid = Call(
        None, np.ones((B, Hkv, n, D), dtype), np.ones((B, Hkv, n, Dv), dtype), {}, "append"
    )
    rule = draw(st.sampled_from(CACHE_APPEND_RULES))
    broken = BY_RULE[rule].breaks(valid, Draws(draw))
    return rule, broken.key, broken.value


def _refused(cache, key, value, what: str) -> bool:
    """``cache.append(key, value)`` of an append that breaks a rule (``what``): True when it
    raised (``ValueError``/``TypeError``, or anything from a subject that declares
    ``validates_inputs=False``); fails when a validating subject accepted it."""
    try:
        cache.append(key, value)
    except REFUSALS as error:
        note(f"raised {type(error).__name__}: {error}")
        return True
    if VALIDATES:
        fail(f"append {what} was accepted")
    return False


@pytest.mark.requires("kv_cache")
@given(run=cache_runs(), data=st.data())
def test_failed_append_changes_nothing(subject, run, data):
    """An append that breaks a rule raises ``ValueError``/``TypeError`` and leaves the
    cache's keys, values and length exactly as before (source lab: 'after a failed append
    the original K/V must be unchanged'). A subject that declares ``validates_inputs=False``
    may raise anything, or accept the append; when it raises, the cache must be as before."""
    case, chunks = run
    cache, _ = decode_in_chunks(subject, case, chunks[:1])
    before = cache_state(cache)
    how, key, value = _bad_append(data.draw, cache, case.dtype)
    note(f"bad append: {how}")
    if _refused(cache, key, value, f"with {how}"):
        assert_cache_unchanged(cache, before, f"a failed append ({how})")


@pytest.mark.requires("kv_cache")
@given(data=st.data())
def test_append_of_one_row_to_many_is_refused(subject, data):
    """An append whose batch or K/V-head axis has size 1 where the cache's has more (the
    registry's "append batch differs" and "append key heads" at their most common form)
    raises ``ValueError``/``TypeError`` and changes nothing: the cache's rule is equal sizes,
    never broadcasting (``cache[:, :, s:e] = k`` with a batch-1 ``k``, as torch's ``copy_``
    and NumPy's assignment allow, gives every sequence the one sequence's keys). A subject
    that declares ``validates_inputs=False`` may accept it."""
    dtype = np.dtype(data.draw(st.sampled_from(tuple(reversed(SUBJECT.capabilities.dtypes)))))
    axis = data.draw(st.sampled_from(["batch", "K/V heads"]), label="axis of size 1")
    many, other = data.draw(st.integers(2, 3)), data.draw(st.integers(1, 3))
    B, Hkv = (many, other) if axis == "batch" else (other, many)
    D, Dv = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    cache = subject.module.KVCache(B, Hkv, D, Dv, dtype=dtype)
    held = data.draw(st.integers(0, 2), label="positions held")
    if held:
        keys = data.draw(values((B, Hkv, held, D), dtype.name, "unit"), label="held keys")
        cache.append(keys, np.ones((B, Hkv, held, Dv), dtype))
    before = cache_state(cache)
    n = data.draw(st.integers(1, 3), label="tokens appended")
    one = (1, Hkv) if axis == "batch" else (B, 1)
    key = data.draw(values((*one, n, D), dtype.name, "unit"), label="key")
    value = np.ones((*one, n, Dv), dtype)
    if _refused(cache, key, value, f"of key {key.shape} to a cache of batch {B}, {Hkv} K/V heads"):
        assert_cache_unchanged(cache, before, f"a failed append of key {key.shape}")


@pytest.mark.requires("kv_cache")
@given(run=cache_runs(), data=st.data())
def test_failed_cached_attention_rolls_back(subject, run, data):
    """``cached_attention`` whose attention step fails (a fully masked row, a query of the
    wrong head_dim) raises and rolls the append back: the cache is exactly as before. A
    subject that declares ``validates_inputs=False`` may raise anything, or accept the
    fully masked row; when it raises, the append must still be rolled back.

    Where the subject's ``KVCache`` takes a ``capacity`` (impl's: slots allocated, grown by
    doubling), the cache is built full half the time, so the failed append has grown it: its
    ``capacity`` must come back too (:func:`cache_state`)."""
    case, chunks = run
    B, Hq, _, D = case.query.shape
    how = data.draw(st.sampled_from(["fully masked row", "query head_dim"]), label="failure")
    full = _TAKES_CAPACITY and data.draw(st.booleans(), label="cache full")
    cache = new_cache(subject, case, capacity=chunks[0]) if full else None
    cache, _ = decode_in_chunks(subject, case, chunks[:1], cache=cache)
    before = cache_state(cache)
    query = np.ones((B, Hq, 1, D), case.dtype)
    mask = None
    if how == "fully masked row":
        mask = np.zeros((B, Hq, 1, len(cache) + 1), dtype=bool)
    else:
        query = np.ones((B, Hq, 1, D + 1), case.dtype)
    key = np.ones((B, case.key.shape[1], 1, D), case.dtype)
    value = np.ones((B, case.key.shape[1], 1, case.value.shape[3]), case.dtype)
    try:
        subject.module.cached_attention(query, key, value, cache, attn_mask=mask)
    except REFUSALS as error:
        note(f"raised {type(error).__name__}: {error}")
    else:
        rule = how == "query head_dim" or SUBJECT.capabilities.fully_masked_rows == "raise"
        if VALIDATES and rule:
            fail(f"cached_attention with a {how} was accepted")
        return
    assert_cache_unchanged(cache, before, f"a failed cached_attention ({how})")


@pytest.mark.requires("kv_cache")
@given(run=cache_runs())
def test_cache_copies_caller_arrays(subject, run):
    """The cache stores copies: changing the caller's arrays after ``append`` does not
    change the cache."""
    case, chunks = run
    cache = new_cache(subject, case)
    key, value = case.key.copy(), case.value.copy()
    cache.append(key, value)
    key[...] = 3.0
    value[...] = -3.0
    assert_equal(out=cache.keys, expected=case.key, what="cached keys after the caller's edit")
    assert_equal(
        out=cache.values, expected=case.value, what="cached values after the caller's edit"
    )


@pytest.mark.requires("kv_cache")
@given(run=cache_runs())
def test_cache_cannot_be_written_through_its_keys_and_values(subject, run):
    """``keys`` and ``values`` are read-only: a caller who sets their WRITEABLE flag back and
    writes into them either is refused (a view of the cache's storage must refuse the flag)
    or writes into a copy; the cache holds what was appended either way. A view marked
    read-only on a writable base (``view.flags.writeable = False``, which the caller can set
    back) lets the write through."""
    case, _ = run
    cache = new_cache(subject, case)
    cache.append(case.key, case.value)
    before = cache_state(cache)
    for name in ("keys", "values"):
        array = getattr(cache, name)
        try:
            array.flags.writeable = True
            array[...] = 7
        except (ValueError, TypeError, AttributeError):  # refused (AttributeError: no flags)
            continue
        note(f"{name}: WRITEABLE set back and written")
    assert_cache_unchanged(cache, before, "writing into keys and values")


@pytest.mark.requires("kv_cache_bytes")
@given(
    num_layers=st.integers(1, 96),
    batch=st.integers(1, 64),
    tokens=st.integers(1, 10**6),
    num_heads=st.sampled_from([1, 2, 8, 32, 64]),
    head_dim=st.sampled_from([1, 64, 128]),
    dtype=st.sampled_from(["float16", "float32", "float64"]),
    data=st.data(),
)
def test_kv_cache_bytes_formula(
    subject, num_layers, batch, tokens, num_heads, head_dim, dtype, data
):
    """``kv_cache_bytes = 2 * layers * batch * tokens * Hkv * head_dim * itemsize`` and the
    MQA/GQA cache is ``Hkv / Hq`` of the MHA cache (quick reference, KV cache table)."""
    num_kv_heads = data.draw(st.sampled_from([h for h in (1, 2, 4, 8, 32) if num_heads % h == 0]))
    f = subject.module.kv_cache_bytes
    kwargs = dict(num_layers=num_layers, batch=batch, tokens=tokens, head_dim=head_dim, dtype=dtype)
    gqa = f(num_kv_heads=num_kv_heads, **kwargs)
    mha = f(num_kv_heads=num_heads, **kwargs)
    expected = 2 * num_layers * batch * tokens * num_kv_heads * head_dim * np.dtype(dtype).itemsize
    if gqa != expected:
        fail(f"kv_cache_bytes({kwargs}, num_kv_heads={num_kv_heads}) = {gqa}, expected {expected}")
    if gqa * num_heads != mha * num_kv_heads:
        fail(f"GQA/MHA bytes {gqa}/{mha} != Hkv/Hq = {num_kv_heads}/{num_heads}")


SIZING_KEYWORDS = ("page_size", "rolling_capacity", "value_dim")


@pytest.mark.requires("kv_cache_bytes")
@given(
    tokens=st.integers(1, 10**5),
    page_size=st.one_of(st.none(), st.sampled_from([16, 32, 64, 128, 256]), st.integers(1, 600)),
    rolling_capacity=st.one_of(st.none(), st.integers(1, 10**5)),
    value_dim=st.one_of(st.none(), st.sampled_from([1, 64, 96, 128, 512])),
    num_kv_heads=st.sampled_from([1, 2, 8]),
    dtype=st.sampled_from(["float16", "float32", "bfloat16", "float8_e4m3fn"]),
)
def test_kv_cache_bytes_of_pages_windows_and_value_dims(
    subject, tokens, page_size, rolling_capacity, value_dim, num_kv_heads, dtype
):
    """With ``rolling_capacity=W`` a cache holds ``min(tokens, W)`` positions; with
    ``page_size=S`` it allocates them in whole pages, ``ceil(n / S) * S`` (both: the window's
    positions rounded up to pages); with ``value_dim=Dv`` a position holds ``head_dim + Dv``
    elements per K/V head, not ``2 * head_dim`` (:func:`oracle.rules.kv_cache_bytes`; Kwon
    et al. 2023 for pages). Only for a ``kv_cache_bytes`` that takes these keywords (impl's,
    the rulebook's): skipped, saying so, for one that does not."""
    f = subject.module.kv_cache_bytes
    missing = [k for k in SIZING_KEYWORDS if k not in inspect.signature(f).parameters]
    if missing:
        pytest.skip(f"{subject.name}'s kv_cache_bytes takes no {', '.join(missing)}")
    kwargs = dict(
        num_layers=3, batch=2, tokens=tokens, num_kv_heads=num_kv_heads, head_dim=64, dtype=dtype
    )
    sizing = dict(page_size=page_size, rolling_capacity=rolling_capacity, value_dim=value_dim)
    got = f(**kwargs, **{k: v for k, v in sizing.items() if v is not None})
    positions = tokens if rolling_capacity is None else min(tokens, rolling_capacity)
    if page_size is not None:
        positions = -(-positions // page_size) * page_size
    per_head = 64 + (64 if value_dim is None else value_dim)
    expected = 3 * 2 * positions * num_kv_heads * per_head * ml_dtypes.finfo(dtype).bits // 8
    if got != expected:
        fail(f"kv_cache_bytes({kwargs}, {sizing}) = {got}, expected {expected}")


@pytest.mark.requires("kv_cache")
def test_lab_decode_through_cache(subject):
    """The source lab's decode: cache the first two tokens, then decode the third; the
    output is :data:`oracle.lab.DECODE` to its printed decimals (not
    :data:`oracle.lab.OFFSET_ZERO_DECODE`, the wrong offset)."""
    dtype = lab_dtype(subject)  # float64; skipped for a subject without it
    q, k, v = (x.astype(dtype) for x in (LAB_QUERY, LAB_KEY, LAB_VALUE))
    cache = subject.module.KVCache(1, 1, 4, 2, dtype=dtype)
    subject.module.cached_attention(q[:, :, :2], k[:, :, :2], v[:, :, :2], cache)
    out = subject.module.cached_attention(q[:, :, 2:], k[:, :, 2:], v[:, :, 2:], cache)
    assert_within(
        out=np.asarray(out)[0, 0, 0],
        expected=lab.DECODE.array(),
        bound=lab.DECODE.tolerance,
        what=f"lab decode of the third token ({lab.DECODE.decimals} printed decimals)",
    )
