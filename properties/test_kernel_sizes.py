"""Properties at kernel sizes: tile boundaries, long decodes, chunked prefill, growing caches.

Sizes come from :mod:`properties.sizes` (mostly at and around multiples of 16-256, primes,
head dims 59-256, GQA groups up to 8) and values from a seed (:mod:`properties.kernel_cases`).
Values are judged by the ball-arithmetic reference (:mod:`oracle.ball`) on the query rows at
tile boundaries (:func:`~properties.reference_rows.boundary_rows`) with the per-element bounds of
:func:`properties.bounds.attention_bounds`, or against a float64 evaluation within the
agreement bounds (:mod:`properties.kernel_checks`); structural laws compare two calls of the
subject on every row, within twice :func:`properties.agreement_bounds.agreement_bounds` (no
reference needed). One file: the derandomized profiles seed each property from its file and
function name (:func:`properties.draws.pin_seeds`), so moving a property draws other examples.

Shape legend: query (B, Hq, Tq, D), key (B, Hkv, Tk, D), value (B, Hkv, Tk, Dv),
output (B, Hq, Tq, Dv).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume
from hypothesis import given
from hypothesis import note
from hypothesis import strategies as st

from attnprops.properties._support import attend
from attnprops.properties._support import decode_in_chunks
from attnprops.properties._support import last_row_alone
from attnprops.properties._support import one_head
from attnprops.properties._support import repeat_kv
from attnprops.properties._support import unbatched_case
from attnprops.properties._support import visibility
from attnprops.properties.checks import assert_equal
from attnprops.properties.checks import assert_shape_dtype
from attnprops.properties.checks import call_subject
from attnprops.properties.checks import fail
from attnprops.properties.kernel_cache_cases import cache_runs
from attnprops.properties.kernel_cache_cases import chunks_of
from attnprops.properties.kernel_cache_cases import paged_layouts
from attnprops.properties.kernel_cases import chunk_sizes
from attnprops.properties.kernel_cases import per_head_mask_specs
from attnprops.properties.kernel_cases import subject_kernel_specs
from attnprops.properties.kernel_checks import agree
from attnprops.properties.kernel_checks import decode_agrees_with_attention
from attnprops.properties.kernel_checks import each_sequence_alone
from attnprops.properties.kernel_checks import matches_float64_evaluation
from attnprops.properties.kernel_checks import matches_reference
from attnprops.properties.kernel_spec import PADDING_KINDS
from attnprops.properties.plugin import current_subject
from attnprops.properties.sizes import TILES
from attnprops.properties.sizes import boundary_sizes
from attnprops.properties.subject_dtypes import narrowest_first

SUBJECT = current_subject()
CAPS = SUBJECT.capabilities
CAUSAL = ("prefill", "chunk", "decode")  # the kinds whose queries sit among the keys (not cross)


# One test per shape kind, so that each kernel regime gets its own examples (and a mutant can
# name the one that shows its fault).
@pytest.mark.kernel_sized
@given(spec=subject_kernel_specs(SUBJECT, shapes=("prefill",)))
def test_kernel_sized_prefill_matches_reference(subject, spec):
    """Self-attention (``Tq = Tk``, causal or not) at kernel sizes: see matches_reference."""
    matches_reference(subject, spec)


@pytest.mark.requires("window")
@pytest.mark.kernel_sized
@given(spec=subject_kernel_specs(SUBJECT, shapes=CAUSAL, windows=True))
def test_kernel_sized_window_matches_reference(subject, spec):
    """Local windows at kernel sizes, their sides at and around tile multiples (a tile's first
    key block is where a window starts mid-block): see matches_reference."""
    matches_reference(subject, spec)


@pytest.mark.requires("sinks")
@pytest.mark.kernel_sized
@given(spec=subject_kernel_specs(SUBJECT, shapes=("decode", "prefill", "chunk"), sinks=True))
def test_kernel_sized_sinks_match_reference(subject, spec):
    """Sinks at kernel sizes (decode against long caches first: split-KV's regime, where a
    sink carried by every split is counted once per split): see matches_reference; the sink
    is one more key of the bounds (:mod:`properties.bounds`, item 5)."""
    matches_reference(subject, spec)


@pytest.mark.requires("alibi")
@pytest.mark.kernel_sized
@given(spec=subject_kernel_specs(SUBJECT, shapes=CAUSAL, alibi=True, softcap=CAPS.softcap))
def test_kernel_sized_alibi_and_softcap_match_reference(subject, spec):
    """ALiBi's slopes and, for a subject that declares it, soft caps at kernel sizes (each
    drawn or not; the bias by distance across every tile, the cap before the mask; with
    ALiBi, keys after the query too, one prefill or chunk in two not causal): see
    matches_reference."""
    matches_reference(subject, spec)


@pytest.mark.requires("segment_ids")
@pytest.mark.kernel_sized
@given(
    spec=subject_kernel_specs(
        SUBJECT,
        shapes=CAUSAL,
        documents=True,
        alibi=CAPS.alibi,
        windows=True if CAPS.window else None,
        softcap=CAPS.softcap,
    )
)
def test_kernel_sized_documents_match_reference(subject, spec):
    """Packed documents at kernel sizes give each query the keys of its own document only.
    One packed row (FlashAttention's ``cu_seqlens``), each boundary at or next to a tile
    multiple: a query tile that straddles a boundary must give each row its own document's
    keys (a varlen kernel that takes a tile's key range from its first row, or lets a key
    tile leak across, moves these rows): see matches_reference, whose exact rows include
    the last and first row of each document. With the other variants the subject declares
    (a local window, ALiBi, a soft cap), each drawn or not, so that a varlen path that
    builds its mask from the documents alone, dropping the window, fails too (packed
    sliding-window models: Mistral's, Gemma 2's local layers). Then the last query alone, at
    its own position (a decode step's call), equals its row of the whole call (within twice
    the agreement bound): a one-query path that handles the documents or the window its own
    way is seldom drawn with both."""
    out = matches_reference(subject, spec)
    row = last_row_alone(spec.build())
    agree(
        subject,
        row,
        attend(subject, row, "the last query alone"),
        out[:, :, -1:],
        what="the last query alone vs its row of the whole call",
    )


@pytest.mark.requires("chunk_size")
@pytest.mark.kernel_sized
@given(spec=subject_kernel_specs(SUBJECT, shapes=CAUSAL, chunks=True))
def test_kernel_sized_chunks_match_reference(subject, spec):
    """Chunked attention (Llama 4's local layers: a query sees the keys of its own chunk of
    ``chunk_size`` positions) at kernel sizes, the chunk size itself at or around a tile
    multiple, so chunk edges fall inside and at the edges of key tiles and splits; one draw in
    two the chunks are longer than half the queries and shorter than all of them, so a query
    tile straddles the edge of two long chunks (where a kernel that takes the tile's key range
    from one of its rows drops the other rows' keys): see matches_reference."""
    matches_reference(subject, spec)


@pytest.mark.kernel_sized
@given(spec=subject_kernel_specs(SUBJECT, shapes=("decode",), noncausal_decodes=True))
def test_kernel_sized_decode_matches_reference(subject, spec):
    """Decode (1 to 64 queries, causal or not) against up to the profile's decode length of keys
    (the split-KV regime of flash-decoding): see matches_reference. Then the same kind of decode
    against ``L < Tk`` keys for every ``L`` one short of, at and one past the largest multiple
    ``m t`` below ``Tk`` of each tile ``t`` (every row against a float64 evaluation; key padding
    dropped and "large" values made "unit", so that every key counts): each example so meets the
    split remainders ``t - 1``, 0 and 1 of every tile, where a split-KV kernel that drops a
    partial split, or the last key of one, goes wrong."""
    matches_reference(subject, spec)
    lengths = set()
    for t in TILES:
        m = (spec.key_len - 1) // t
        lengths |= {m * t - 1, m * t, m * t + 1}
    # These calls ask which keys the kernel reads, so every key must matter: no padding
    # (it hides the tail, where the remainders are, or moves with the length) and no
    # "large" values (a one-hot softmax ignores every key but one); one batch element (the
    # keys are split the same way for each).
    probe = spec._replace(
        mask="none" if spec.mask in PADDING_KINDS else spec.mask,
        padding=(),
        magnitude="unit" if spec.magnitude == "large" else spec.magnitude,
        batch=1,
    )
    for length in sorted(n for n in lengths if spec.query_len <= n < spec.key_len):
        case = probe._replace(key_len=length).build()
        matches_float64_evaluation(
            subject, case, what=f"output against {length} keys ({probe.mask}, {probe.magnitude})"
        )


# float64 when the subject has it: one key among 8193 moves a row by about 1e-4, inside the
# agreement bound of float32 and below
CAPACITY_DTYPES = ("float64",) if "float64" in CAPS.dtypes else None


@pytest.mark.kernel_sized
@given(
    spec=subject_kernel_specs(
        SUBJECT,
        shapes=("decode",),
        at_capacity=True,
        noncausal_decodes=True,
        masks=False,
        magnitudes=("unit", "ties"),
        **({"dtypes": CAPACITY_DTYPES} if CAPACITY_DTYPES else {}),  # else the declared
    )
)
def test_kernel_sized_decode_past_capacity_reads_every_key(subject, spec):
    """Decode (1 to 64 queries, causal or not) against ``P`` and ``P + 1`` keys, ``P`` the
    largest power of two within the profile's decode length (8192 in ci, 16384 in thorough:
    :func:`~properties.sizes.capacity`), every row against a float64 evaluation (agreement
    bounds, as the decode property's probes): a kernel with a preallocated capacity (a
    workspace of ``P`` keys, a fixed number of splits of a fixed size) that never reads past
    it goes wrong at ``P + 1``, a length the other decode properties reach in about 1 draw
    in 250 (a quarter of the draws are one past a smaller power of two from 256, so a
    smaller capacity's fault shrinks to one past it: :func:`~properties.sizes.past_powers`).
    Every key counts: no mask, no ``large`` values (whose softmax is nearly one
    key's), and float64 when the subject has it (in float32 and below one key's share of
    8193 is inside the agreement bound: a subject without float64 is checked only for
    faults larger than that)."""
    case = spec.build()
    note(f"case: {case.describe()}")
    matches_float64_evaluation(subject, case)


# The long same-sign rows' dtypes, every example in each: the subject's 16-bit ones, or its
# narrowest when it has none; the coarsest first (bfloat16: its values in [0.25, 1] are
# float16's too, so both calls share one exact result).
SAME_SIGN_DTYPES = narrowest_first(CAPS.dtypes, bits=16)
if np.dtype(SAME_SIGN_DTYPES[-1]).itemsize > 2:
    SAME_SIGN_DTYPES = SAME_SIGN_DTYPES[-1:]
SAME_SIGN_DTYPES = tuple(sorted(SAME_SIGN_DTYPES, key=lambda d: -ml_dtypes.finfo(d).eps))


@pytest.mark.kernel_sized
@given(
    spec=subject_kernel_specs(
        SUBJECT,
        shapes=("decode",),
        noncausal_decodes=True,
        masks=False,
        magnitudes=("positive",),
        dtypes=SAME_SIGN_DTYPES[:1],  # the spec's; each example runs in every one
    )
)
def test_kernel_sized_long_same_sign_rows_match_reference(subject, spec):
    """Decode (1 to 64 queries, causal or not) against up to the profile's decode length of
    keys, every entry of the query, key and value in [0.25, 1] (the ``positive`` regime of
    :meth:`~properties.kernel_spec.KernelSpec.build`), in the subject's 16-bit dtypes (its
    narrowest when it has none), no mask: see matches_reference. The weights are then near
    uniform and the outputs of one sign, so a row's running denominator or output
    accumulator kept in the input dtype across key tiles (rounded once a tile, its relative
    error grows like ``sqrt(tiles) u``) moves the whole row by that relative error, against
    a bound that follows the result (a sum of one sign has relative condition number 1:
    Higham 2002, sec. 4.2). With values of mixed signs the outputs shrink like ``1 /
    sqrt(Tk)`` while the bound follows ``sum |w_j v_j|``, and that error hides. A limit of
    the sound bound: for float16 computed in float32 its float32 terms grow like ``Tk`` (an
    exactly checked row's bound, ``D = 128``, impl's arithmetic: 2.7 unit roundoffs of
    float16 of the result at 2048 keys, 7.2 at 8193; 1.2 and 1.8 of bfloat16), so a float16
    sum rounded once per tile of 64 or more keys (about ``sqrt(tiles) u / 3``) shows only
    now and then past a few thousand keys; one rounded every 16 keys, or in bfloat16, shows.

    Each example runs in every one of those dtypes (float16 and bfloat16 for a subject that
    has both), the same sizes and seed: a kernel's path of one dtype (a bfloat16 kernel with
    its own accumulator, taken past a length) then meets every length drawn, not the half
    drawn in its dtype. The values are drawn in the coarsest of them and are the same in
    the others (``also_in`` of matches_reference). The counterexample's spec names that
    dtype; its message's ``call:`` line names the one that failed."""
    matches_reference(subject, spec, also_in=SAME_SIGN_DTYPES[1:])


@pytest.mark.kernel_sized
@given(spec=subject_kernel_specs(SUBJECT, shapes=("chunk",)))
def test_kernel_sized_chunk_matches_reference(subject, spec):
    """Chunked prefill (``Tq < Tk``, causal, ``query_start`` on or off the tile grid), and a
    decode step of one or a few queries at an explicit position of a preallocated (static)
    cache, whose slots past it are unwritten: see matches_reference."""
    matches_reference(subject, spec)


@pytest.mark.kernel_sized
@given(spec=subject_kernel_specs(SUBJECT, shapes=("cross",)))
def test_kernel_sized_cross_matches_reference(subject, spec):
    """Cross-attention (``Tq != Tk`` either way, not causal): see matches_reference."""
    matches_reference(subject, spec)


@pytest.mark.kernel_sized
@given(spec=subject_kernel_specs(SUBJECT, shapes=("prefill",), masks=False), data=st.data())
def test_kernel_sized_chunk_equals_rows_of_full_causal(subject, spec, data):
    """Chunks of ``n`` queries at ``query_start = s`` (chunked prefill; a speculative-decoding
    draft for small ``n``) equal rows ``[s, s + n)`` of full causal self-attention, with all
    keys and with keys ``[0, s + n)``; every row compared. Four chunks per case: ``s`` one
    short of, at and one past a drawn tile size ``t`` (a chunk whose tiles start just off
    the grid is where a kernel's causal tile arithmetic slips), and ``s`` a boundary size;
    each ``n`` a boundary size."""
    _chunks_equal_rows_of_full_causal(subject, spec, data)


@pytest.mark.requires("chunk_size")
@pytest.mark.kernel_sized
@given(spec=subject_kernel_specs(SUBJECT, shapes=("prefill",), masks=False), data=st.data())
def test_kernel_sized_chunked_attention_chunk_equals_rows_of_full(subject, spec, data):
    """The law above for chunked attention (Llama 4's local layers, ``chunk_size = C``: a
    query sees the keys of its own chunk of ``C`` positions, counted from key 0 whatever
    ``query_start`` is): chunks at ``s = t - 1, t, t + 1`` and a boundary ``s`` equal the rows
    of the full chunked causal prefill, every row compared. ``C`` is drawn by
    :func:`~properties.kernel_cases.chunk_sizes`, one draw in two longer than half the
    sequence, so a chunk edge falls among the rows of chunk calls whose query tiles start one
    off the tile grid (a causal prefill's tiles start on it). There a block-sparse kernel that
    takes a query tile's key range from one of its rows' chunks drops the other rows' keys
    (``mutants/chunk_tile_keys_end_at_its_first_rows_chunk_end.py``; over 147 random
    examples ``chunk_tile_starts_at_its_last_rows_chunk_past_200_queries`` differs from impl
    in 105 here, in 12 of 200 draws of :func:`test_kernel_sized_chunks_match_reference`).
    The law compares the subject with itself: a chunk rule wrong the same way in every call
    (a chunk start one off) passes it and fails the reference property. The case shown is
    the drawn prefill; the calls run are causal, with the drawn ``C`` (the message names
    both)."""
    T = spec.key_len
    chunk_size = data.draw(chunk_sizes(T, T), label="chunk_size")
    _chunks_equal_rows_of_full_causal(subject, spec._replace(chunk_size=chunk_size), data)


def _chunks_equal_rows_of_full_causal(subject, spec, data):
    """The chunk laws above for a causal prefill ``spec`` (its ``chunk_size`` kept)."""
    full = spec._replace(is_causal=True, query_start=None).build()
    T = full.key.shape[2]
    assume(T >= 2)
    full_call = full.describe()  # for the messages
    expected = attend(subject, full, f"full causal attention ({full_call})")
    t = data.draw(st.sampled_from(TILES), label="tile")
    starts = {t - 1, t, t + 1, data.draw(boundary_sizes(T - 1), label="query_start")}
    for s in sorted(x for x in starts if 1 <= x <= T - 1):
        n = data.draw(boundary_sizes(T - s), label=f"chunk length at {s}")
        rows = slice(s, s + n)
        for what, chunk in (
            ("all keys, query_start=s", full._replace(query=full.query[:, :, rows], query_start=s)),
            (
                "keys [0, s + n), query_start=None",
                full._replace(
                    query=full.query[:, :, rows],
                    key=full.key[:, :, : s + n],
                    value=full.value[:, :, : s + n],
                ),
            ),
        ):
            agree(
                subject,
                chunk,
                attend(subject, chunk, f"chunk [{s}, {s + n}), {what} ({chunk.describe()})"),
                expected[:, :, rows],
                what=f"chunk [{s}, {s + n}) ({what}) vs rows [{s}, {s + n}) of the full causal "
                f"call ({full_call}); either may be wrong, and row i of the chunk is "
                f"position {s} + i",
            )


@pytest.mark.kernel_sized
@given(spec=subject_kernel_specs(SUBJECT, grouped=True))
def test_kernel_sized_gqa_equals_repeated_kv(subject, spec):
    """Grouped K/V (two K/V heads, 2 to 8 query heads each, 3 among them) equals K/V repeated
    to the query heads, query head ``h`` reading K/V head ``h // G`` (Ainslie et al. 2023),
    at kernel sizes."""
    case = spec.build()
    group = case.query.shape[1] // case.key.shape[1]
    assume(group > 1)
    repeated = case._replace(key=repeat_kv(case.key, group), value=repeat_kv(case.value, group))
    agree(
        subject,
        case,
        attend(subject, case, "grouped K/V"),
        attend(subject, repeated, "K/V repeated to Hq"),
        what=f"GQA (G={group}) vs K/V repeated by h // {group}",
    )


@pytest.mark.kernel_sized
@given(spec=subject_kernel_specs(SUBJECT))
def test_kernel_sized_batch_and_heads_independent(subject, spec):
    """Each (batch element, query head) computed alone, with its own K/V head and its slice
    of the mask, equals that slice of the batched call (a kernel that mixes up the batch or
    head strides of a tile fails); where the subject takes 2-D inputs, the last of them also
    as an unbatched ``(Tq, D)`` call with its ``(Tq, Tk)`` mask (an unbatched path of its
    own is otherwise tried only at the small cases' sizes)."""
    case = spec.build()
    B, Hq, Tq, _ = case.query.shape
    assume(B * Hq > 1)
    batched = attend(subject, case, "batched")
    for b in range(B):
        for h in range(Hq):
            one = one_head(case, b, h)
            agree(
                subject,
                one,
                attend(subject, one, f"batch {b} head {h} alone"),
                batched[b : b + 1, h : h + 1],
                what=f"batch {b}, head {h} alone vs batched",
            )
    if CAPS.two_d_inputs:
        unbatched = unbatched_case(one)
        agree(
            subject,
            one,
            attend(subject, unbatched, "unbatched (Tq, D)")[None, None],
            batched[B - 1 :, Hq - 1 :],
            what=f"batch {B - 1}, head {Hq - 1} as an unbatched (Tq, D) call vs batched",
        )


@pytest.mark.requires("two_d_inputs")
@pytest.mark.kernel_sized
@given(spec=subject_kernel_specs(SUBJECT, shapes=("prefill", "chunk"), masks=("random bool",)))
def test_kernel_sized_unbatched_call_equals_batched(subject, spec):
    """An unbatched call, query ``(Tq, D)``, key ``(Tk, D)``, value ``(Tk, Dv)`` and a
    random bool mask ``(Tq, Tk)``, equals the same rows as a batched ``(1, 1, Tq, D)`` call:
    self-attention (a square mask, which a 2-D path that reads it transposed gets wrong) and
    chunked prefill or a decode step at an explicit ``query_start`` (which a 2-D path that
    ignores it gets wrong), causal or not. The batch/head property's unbatched call reads the
    drawn case's mask and offset, which at kernel sizes are seldom both of these."""
    one = one_head(spec.build(), 0, 0)
    agree(
        subject,
        one,
        attend(subject, unbatched_case(one), "unbatched (Tq, D)")[None, None],
        attend(subject, one, "batched (1, 1, Tq, D)"),
        what="unbatched (Tq, D) call vs the batched (1, 1, Tq, D) call",
    )


@pytest.mark.requires("float_masks")
@pytest.mark.kernel_sized
@given(spec=subject_kernel_specs(SUBJECT))
def test_kernel_sized_bool_mask_equals_additive_mask(subject, spec):
    """A bool mask (key padding on either side, random) equals the additive mask ``0`` /
    ``-inf``: a kernel with one code path per mask kind must read both the same way at every
    tile."""
    case = spec.build()
    assume(case.attn_mask is not None and case.attn_mask.dtype == np.bool_)
    additive = np.where(case.attn_mask, 0.0, -np.inf).astype(case.dtype)
    agree(
        subject,
        case,
        attend(subject, case, "bool mask"),
        attend(subject, case._replace(attn_mask=additive), "additive 0/-inf mask"),
        what="bool mask vs additive 0/-inf mask",
    )


@pytest.mark.kernel_sized
@given(spec=per_head_mask_specs(SUBJECT))
def test_kernel_sized_per_head_masks_match_reference(subject, spec):
    """A bool mask of its own for every batch element and query head, ``(B, Hq, Tq, Tk)``,
    at kernel sizes (two batch elements and two or more heads where the budget holds them):
    see matches_reference. The other mask kinds are the same for every head (padding, a
    random ``(Tq, Tk)`` mask) or for every batch element (ALiBi's); a kernel that finds its
    mask tile by flattening (batch, head) in the other order, swaps the mask's batch and
    head strides, or reads head 0's mask for every head, is right on all of them and fails
    here."""
    matches_reference(subject, spec)


@pytest.mark.kernel_sized
@given(spec=subject_kernel_specs(SUBJECT), data=st.data())
def test_kernel_sized_hidden_keys_do_not_change_output(subject, spec, data):
    """Changing K/V at every position no query may see (past the causal limit, past a key
    padding length, masked keys of a random mask) leaves the output bitwise unchanged: a
    kernel that lets a padded or partial last tile, or a skipped causal tile, leak in fails."""
    case = spec.build()
    visible = visibility(case)  # (B, Hq, Tq, Tk)
    B, Hkv, Tk, _ = case.key.shape
    seen = visible.reshape(B, Hkv, -1, Tk).any(axis=2)[..., None]  # (B, Hkv, Tk, 1)
    assume(not seen.all())
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="new K/V seed"))
    key = np.where(seen, case.key, (50 * rng.standard_normal(case.key.shape)).astype(case.dtype))
    value = np.where(
        seen, case.value, (1e3 * rng.standard_normal(case.value.shape)).astype(case.dtype)
    )
    note(f"hidden K/V positions: {int((~seen).sum())} of {seen.size}")
    before = attend(subject, case, "original K/V")
    after = attend(subject, case._replace(key=key, value=value), "hidden K/V changed")
    assert_equal(out=after, expected=before, what="output after changing hidden K/V", case=case)


@pytest.mark.requires("kv_cache")
@pytest.mark.kernel_sized
@given(run=cache_runs(SUBJECT, variants=True))
def test_kernel_sized_cache_growth_equals_full_causal(subject, run):
    """Hundreds of ``cached_attention`` appends of mixed sizes, growing the cache past any
    plausible preallocated capacity, give full causal attention's rows (within the agreement
    bound; with the subject's window and sinks half the time each, which a cache must keep
    applying at any length), and the cache ends holding exactly the appended keys and values
    (a growth that copies one position too few, or the wrong buffer, fails here)."""
    spec, pattern, steps = run
    case = spec.build()
    chunks = chunks_of(case.key.shape[2], pattern, steps)
    note(f"{len(chunks)} appends: {chunks[:40]}{' ...' if len(chunks) > 40 else ''}")
    T = case.key.shape[2]
    cache, decoded = decode_in_chunks(subject, case, chunks)
    if len(cache) != T:
        fail(f"len(cache) = {len(cache)} after appending {T} positions in {len(chunks)} chunks")
    assert_equal(out=cache.keys, expected=case.key, what="cached keys after growth", case=case)
    assert_equal(
        out=cache.values, expected=case.value, what="cached values after growth", case=case
    )
    decode_agrees_with_attention(
        subject, case, decoded, what=f"cached decode in {len(chunks)} chunks vs full causal (T={T})"
    )


@pytest.mark.requires("paged_cache")
@pytest.mark.kernel_sized
@given(layout=paged_layouts(SUBJECT), data=st.data())
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
    each_sequence_alone(subject, case, lengths.tolist(), out, f"pages of {page_size}")
