"""Properties of the KV caches at kernel sizes: a cache grown by hundreds of appends of mixed
sizes past any plausible preallocated capacity, and a paged pool with pages of a kernel's
sizes, each against plain causal attention (within twice the agreement bound, no reference
needed). Sizes as in ``properties/test_kernel_sizes.py`` (:mod:`properties.kernel_cases`).

Shape legend: query (B, Hq, Tq, D), key (B, Hkv, Tk, D), value (B, Hkv, Tk, Dv),
output (B, Hq, Tq, Dv).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from attnprops.properties._support import agree, attend, decode_in_chunks
from attnprops.properties.checks import assert_equal, assert_shape_dtype, call_subject, fail
from attnprops.properties.kernel_cases import subject_kernel_specs
from attnprops.properties.plugin import current_subject
from attnprops.properties.sizes import TILES, boundary_sizes, limits

SUBJECT = current_subject()


@st.composite
def _cache_runs(draw):
    """``(spec, pattern)``: causal self-attention of ``T`` positions, appended in chunks whose
    sizes repeat ``pattern`` (up to 8 sizes: single tokens and boundary sizes) until the ``T``
    positions are covered (:func:`_chunks`), so a run makes hundreds of appends of mixed
    sizes while Hypothesis shrinks (and the counterexample shows) a pattern, not hundreds of
    draws."""
    lim = limits()
    spec = draw(
        subject_kernel_specs(
            SUBJECT, shapes=("prefill",), masks=False, max_len=lim.max_appends, long=True
        )
    )
    T = spec.key_len
    pattern = draw(
        st.lists(st.one_of(st.just(1), boundary_sizes(T)), min_size=1, max_size=8),
        label="chunk pattern",
    )
    return spec._replace(is_causal=True, query_start=None, block_size=None), pattern


def _chunks(T: int, pattern: list[int]) -> list[int]:
    """Chunk sizes repeating ``pattern`` over ``T`` positions (the last one cut to fit)."""
    chunks, left = [], T
    while left:
        chunks.append(min(pattern[len(chunks) % len(pattern)], left))
        left -= chunks[-1]
    return chunks


@pytest.mark.requires("kv_cache")
@pytest.mark.kernel_sized
@given(run=_cache_runs())
def test_kernel_sized_cache_growth_equals_full_causal(subject, run):
    """Hundreds of ``cached_attention`` appends of mixed sizes, growing the cache past any
    plausible preallocated capacity, give full causal attention's rows (within the agreement
    bound), and the cache ends holding exactly the appended keys and values (a growth that
    copies one position too few, or the wrong buffer, fails here)."""
    spec, pattern = run
    case = spec.build()
    chunks = _chunks(case.key.shape[2], pattern)
    note(f"{len(chunks)} appends: {chunks[:40]}{' ...' if len(chunks) > 40 else ''}")
    T = case.key.shape[2]
    cache, decoded = decode_in_chunks(subject, case, chunks)
    if len(cache) != T:
        fail(f"len(cache) = {len(cache)} after appending {T} positions in {len(chunks)} chunks")
    assert_equal(out=cache.keys, expected=case.key, what="cached keys after growth", case=case)
    assert_equal(
        out=cache.values, expected=case.value, what="cached values after growth", case=case
    )
    decoded = assert_shape_dtype(
        out=decoded,
        shape=case.query.shape[:3] + case.value.shape[3:],
        dtype=case.dtype,
        what="decoded outputs",
    )
    agree(
        subject,
        case,
        decoded,
        attend(subject, case, "full causal attention"),
        what=f"cached decode in {len(chunks)} chunks vs full causal (T={T})",
    )


@st.composite
def _paged_layouts(draw):
    """``(spec, page_size, shortfalls, spare)``: a decode or chunk call at kernel sizes
    (causal, the queries the last positions, no mask), pages of a kernel's sizes (16-256) or
    a boundary size, each sequence ``shortfalls[b]`` positions shorter than the longest (up to
    two pages: lengths end inside pages), and spare pages in the pool."""
    spec = draw(subject_kernel_specs(SUBJECT, shapes=("decode", "chunk"), masks=False))
    spec = spec._replace(is_causal=True, query_start=None, block_size=None)
    page_size = draw(st.one_of(st.sampled_from(TILES), boundary_sizes(64)), label="page size")
    room = spec.key_len - spec.query_len
    shortfalls = draw(
        st.lists(
            st.integers(0, min(room, 2 * page_size)), min_size=spec.batch, max_size=spec.batch
        ),
        label="shortfalls",
    )
    return spec, page_size, shortfalls, draw(st.integers(0, 2), label="spare pages")


@pytest.mark.requires("paged_cache")
@pytest.mark.kernel_sized
@given(layout=_paged_layouts(), data=st.data())
def test_kernel_sized_paged_attention_equals_contiguous(subject, layout, data):
    """At kernel sizes, ``attention_with_kvcache`` over a page pool (pages of 16-256 positions
    or a boundary size, in a drawn order, spare pages holding other values; each sequence's
    length ending inside a page) gives each sequence's rows of plain causal attention over its
    own keys, within twice the agreement bound: a gather that drops the last partial page,
    reads a page off by one at a page boundary or takes another sequence's page moves them
    (FlashAttention's pages are multiples of 256; flashinfer#4347: page sizes above 128)."""
    spec, page_size, shortfalls, spare = layout
    case = spec.build()
    B, Hkv, Tk, D = case.key.shape
    lengths = np.array([Tk - s for s in shortfalls])
    owned = [-(-int(n) // page_size) for n in lengths]
    num_pages = sum(owned) + spare
    order = np.asarray(data.draw(st.permutations(range(num_pages)), label="page order"))
    table = np.full((B, max(owned)), -1, dtype=np.int64)
    rng = np.random.default_rng(spec.seed + 3)
    pools = [
        rng.standard_normal((num_pages, Hkv, page_size, x.shape[3])).astype(case.dtype) * 8
        for x in (case.key, case.value)
    ]
    taken = 0
    for b, n in enumerate(owned):
        table[b, :n] = order[taken : taken + n]
        taken += n
        for j, page in enumerate(table[b, :n]):
            positions = slice(j * page_size, min((j + 1) * page_size, int(lengths[b])))
            width = positions.stop - positions.start
            for pool, x in zip(pools, (case.key, case.value)):
                pool[page, :, :width] = x[b, :, positions]
    note(f"pages of {page_size}, lengths {lengths.tolist()}, {num_pages} pages")
    extra = {
        name: getattr(case, name)
        for name in ("window", "sinks", "softcap", "alibi_slopes")
        if getattr(case, name) is not None
    }
    out = assert_shape_dtype(
        out=np.asarray(
            call_subject(
                subject.attention_with_kvcache,
                case.query,
                pools[0],
                pools[1],
                lengths,
                block_table=table,
                is_causal=True,
                scale=case.scale,
                **extra,
                what="attention_with_kvcache over the pool",
            )
        ),
        shape=case.query.shape[:3] + case.value.shape[3:],
        dtype=case.dtype,
        what="paged output",
    )
    for b, n in enumerate(lengths.tolist()):
        alone = case._replace(
            query=case.query[b : b + 1],
            key=case.key[b : b + 1, :, :n],
            value=case.value[b : b + 1, :, :n],
        )
        agree(
            subject,
            alone,
            out[b : b + 1],
            attend(subject, alone, f"sequence {b} alone"),
            what=f"sequence {b} ({n} positions in pages of {page_size}) vs plain attention",
        )
