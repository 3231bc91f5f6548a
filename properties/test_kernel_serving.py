"""Serving caches at kernel sizes: ragged batches of up to 17 sequences of thousands of
positions, page pools of hundreds or thousands of pages, and a ``PagedKVCache`` whose
sequences own tens of pages (:mod:`properties.kernel_serving_cases`).

Each row of a batch is held to the subject's own plain attention over that sequence's keys
alone, within twice the agreement bound (:func:`properties.kernel_checks.agree`): no reference
is needed, so the sizes go where serving kernels break (a batch tile of 4 or 8 sequences, a
compiled ``max_seqlen_k``, page ids past a byte, a block list kept inline) at the cost of the
subject's calls. The small cases of ``properties/test_ragged_cache.py`` and
``properties/test_paged_cache.py`` hold the same laws to the 50-digit oracle. One file: the
derandomized profiles seed each property from its file and function name.

Shape legend: query (B, Hq, Tq, D), key (B, Hkv, Tk, D), value (B, Hkv, Tk, Dv),
output (B, Hq, Tq, Dv).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import note

from attnprops.oracle.rules import SERVING_OPTIONS
from attnprops.oracle.rules import pages_needed
from attnprops.properties._support import attend
from attnprops.properties._support import decode_in_chunks
from attnprops.properties.checks import assert_equal
from attnprops.properties.checks import assert_shape_dtype
from attnprops.properties.checks import call_subject
from attnprops.properties.checks import fail
from attnprops.properties.kernel_cache_cases import chunks_of
from attnprops.properties.kernel_cache_cases import rolling_cache_runs
from attnprops.properties.kernel_checks import agree
from attnprops.properties.kernel_checks import decode_agrees_with_attention
from attnprops.properties.kernel_checks import each_sequence_alone
from attnprops.properties.kernel_checks import sequence_alone
from attnprops.properties.kernel_serving_cases import append_rounds
from attnprops.properties.kernel_serving_cases import paged_cache_runs
from attnprops.properties.kernel_serving_cases import serving_batches
from attnprops.properties.plugin import current_subject

SUBJECT = current_subject()


def _with_kvcache(subject, case, key_cache, value_cache, lengths, table, what):
    """The subject's ``attention_with_kvcache`` of ``case``'s queries over this storage,
    with the case's serving options (causal, scale, variants), checked for shape and dtype."""
    shared = {k: v for k, v in case.kwargs().items() if k in SERVING_OPTIONS}
    out = call_subject(
        subject.attention_with_kvcache,
        case.query,
        key_cache,
        value_cache,
        np.array(lengths),
        block_table=table,
        **shared,
        what=what,
    )
    return assert_shape_dtype(
        out=np.asarray(out),
        shape=case.query.shape[:3] + case.value.shape[3:],
        dtype=case.dtype,
        what=what,
    )


@pytest.mark.requires("ragged_cache")
@pytest.mark.kernel_sized
@given(batch=serving_batches(SUBJECT, paged=False))
def test_kernel_sized_ragged_batch_equals_each_sequence_alone(subject, batch):
    """``attention_with_kvcache`` over contiguous storage ``(B, Hkv, T, D)`` with
    ``cache_seqlens`` of thousands of positions, each its own, for up to 17 sequences, with
    the subject's variants (window, ALiBi slopes, softcap, sinks, chunk_size; each half the
    time): row ``b`` equals sequence ``b``'s queries (its last ``Tq`` positions) over its
    first ``L_b`` keys alone, every row held to a float64 evaluation of that sequence
    (:func:`properties.kernel_checks.each_sequence_alone`). A kernel that clamps a length to the ``max_seqlen_k`` it was compiled for,
    reads a batch tile's first sequence's length for all, or stops at a workspace sized for
    another sequence fails here, at the length or batch size past which it does."""
    case = batch.case()
    note(batch.describe())
    out = _with_kvcache(
        subject, case, case.key, case.value, batch.lengths, None, "ragged attention_with_kvcache"
    )
    each_sequence_alone(subject, case, batch.lengths, out, "contiguous")


@pytest.mark.requires("paged_cache")
@pytest.mark.kernel_sized
@given(batch=serving_batches(SUBJECT, paged=True))
def test_kernel_sized_paged_batch_equals_each_sequence_alone(subject, batch):
    """``attention_with_kvcache`` over a pool of pages (1-64 positions, or 16-512; hundreds
    or thousands of them, in the pool's order, reversed or shuffled; the unused ones and
    every last page's tail holding other values) and a block table, for up to 17 sequences
    of thousands of positions, with the subject's variants: row ``b`` equals sequence ``b``
    over its keys alone (held to a float64 evaluation, as the ragged property). A page
    id narrowed to a byte or a short, a block-table row taken from a batch tile's local
    index, or a table stride from the launch fails here (vLLM and FlashAttention pools hold
    thousands of pages)."""
    case = batch.case()
    note(batch.describe())
    key_pages, value_pages, table = batch.pool(case)
    out = _with_kvcache(
        subject, case, key_pages, value_pages, batch.lengths, table, "paged attention_with_kvcache"
    )
    each_sequence_alone(subject, case, batch.lengths, out, f"pages of {batch.page_size}")


@pytest.mark.requires("paged_cache")
@pytest.mark.kernel_sized
@given(run=paged_cache_runs(SUBJECT))
def test_kernel_sized_paged_cache_run_equals_full_causal(subject, run):
    """Up to 8 sequences appended to the subject's ``PagedKVCache`` in rounds of mixed chunk
    sizes (the sequences that have that many positions left in one ``cached_attention``
    call, each other its last positions alone), so each owns tens or hundreds of pages
    taken in turn with the others': every append's rows equal full causal attention over
    the sequence alone; at the end ``seqlens`` are the lengths, and ``attention_with_kvcache``
    over the pool with the cache's ``block_table`` gives each sequence's last row; freeing
    the sequences one by one gives back exactly the pages each owned (``free_pages``). A
    block list that keeps only its first pages (or pages past a byte) in the table it
    exports, a page handed to two sequences when appends interleave, or a ``free`` that
    returns a long sequence's overflow pages twice fails here."""
    case = run.spec.build()
    note(run.describe())
    calls = append_rounds(run.lengths, run.pattern)
    note(f"{len(calls)} appends; the first: {calls[:6]}")
    B, Hkv, _, D = case.key.shape
    cache = subject.module.PagedKVCache(
        num_pages=run.num_pages,
        page_size=run.page_size,
        num_kv_heads=Hkv,
        head_dim=D,
        value_dim=case.value.shape[3],
        dtype=np.dtype(case.dtype),
    )
    ids = [cache.add_sequence() for _ in range(B)]
    held = [0] * B
    rows = [[] for _ in range(B)]
    for seqs, tokens in calls:
        positions = [slice(held[b], held[b] + tokens) for b in seqs]
        pick = lambda x: np.stack([x[b, :, p] for b, p in zip(seqs, positions)])  # noqa: E731
        out = call_subject(
            subject.cached_attention,
            pick(case.query),
            pick(case.key),
            pick(case.value),
            cache,
            seqs=[ids[b] for b in seqs],
            what=f"cached_attention of {tokens} positions to sequences {list(seqs)}",
        )
        out = assert_shape_dtype(
            out=np.asarray(out),
            shape=(len(seqs), case.query.shape[1], tokens, case.value.shape[3]),
            dtype=case.dtype,
            what="cached_attention output",
        )
        for row, b in enumerate(seqs):
            rows[b].append(out[row])
            held[b] += tokens
    assert_equal(out=np.asarray(cache.seqlens(ids)), expected=np.array(run.lengths), what="seqlens")
    for b, n in enumerate(run.lengths):
        alone = sequence_alone(case, b, n, slice(0, n))
        agree(
            subject,
            alone,
            np.concatenate(rows[b], axis=1)[None],
            attend(subject, alone, f"sequence {b} alone, full causal"),
            what=f"sequence {b}: its {len(rows[b])} appends' rows vs full causal",
        )
    last_rows = case._replace(
        query=np.stack([case.query[b, :, n - 1 : n] for b, n in enumerate(run.lengths)])
    )
    out = _with_kvcache(
        subject,
        last_rows,
        np.array(cache.key_pages),
        np.array(cache.value_pages),
        run.lengths,
        np.asarray(cache.block_table(ids)),
        "attention_with_kvcache over the cache's pool and block_table",
    )
    each_sequence_alone(subject, last_rows, run.lengths, out, "the cache's block_table")
    free = run.spare_pages
    for b in (None, *run.free_order):
        if b is not None:
            cache.free(ids[b])
            free += pages_needed(run.lengths[b], run.page_size)
        if cache.free_pages != free:
            done = "before any free" if b is None else f"after freeing sequence {b}"
            fail(f"free_pages = {cache.free_pages} {done}; the pool less the pages owned: {free}")


@pytest.mark.requires("rolling_cache")
@pytest.mark.kernel_sized
@given(run=rolling_cache_runs(SUBJECT))
def test_kernel_sized_rolling_cache_equals_full_windowed_attention(subject, run):
    """A sequence of up to thousands of positions decoded in chunks and single tokens through
    a ``RollingKVCache`` of ``capacity`` slots (a boundary size up to a third of the length,
    so the ring wraps again and again, or one past a power of two from 256, or the largest
    ring the run can fill, 3098 in ci, the run then two positions longer than the ring: see
    rolling_cache_runs) with a window it serves (``left`` the capacity or less)
    equals causal attention with that window over the whole sequence, every row (within
    twice the agreement bound); afterwards it holds exactly the last ``capacity`` positions,
    in position order. A ring unrolled from the wrong slot, or a window dropped once the
    ring has wrapped, or a ring index that wraps at a power of two below the capacity,
    past a capacity the small cases (1-4 slots) never reach, fails here."""
    spec, pattern, steps, capacity = run
    case = spec.build()
    T = case.key.shape[2]
    chunks = chunks_of(T, pattern, steps)
    note(f"capacity {capacity}, window {case.window}, {len(chunks)} appends: {chunks[:40]}")
    B, Hkv, _, D = case.key.shape
    cache = subject.module.RollingKVCache(
        B, Hkv, D, case.value.shape[3], capacity=capacity, dtype=case.dtype
    )
    cache, decoded = decode_in_chunks(subject, case, chunks, cache=cache)
    decode_agrees_with_attention(
        subject,
        case,
        decoded,
        what=f"rolling cache of {capacity}, {len(chunks)} appends, vs full attention (T={T})",
    )
    held = np.arange(max(0, T - capacity), T)
    assert_equal(out=np.asarray(cache.positions), expected=held, what="held positions")
    assert_equal(out=cache.keys, expected=case.key[:, :, held], what="held keys, in order")
