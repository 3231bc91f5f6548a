"""Properties of paged KV caches (:mod:`oracle.rules.serving`): a pool of pages of ``S``
positions, ``(P, Hkv, S, D)``, addressed by a block table ``(B, M)``.

Attention over pages must equal attention over the gathered contiguous keys for any page size
(1, and sizes that do not divide the lengths) and any order of the pages in the pool; a cache
driven through a run of appends and frees must keep every sequence's own positions, give no
sequence another's, and change nothing when an append fails.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import note
from hypothesis import strategies as st

from attnprops.oracle.rules import pool_call
from attnprops.properties._support import assert_rows_match_oracle
from attnprops.properties._support import oracle_with_bounds
from attnprops.properties.checks import assert_equal
from attnprops.properties.checks import assert_within
from attnprops.properties.checks import call_subject
from attnprops.properties.checks import fail
from attnprops.properties.plugin import current_subject
from attnprops.properties.serving_cases import PAGE_SIZES
from attnprops.properties.serving_cases import serving_cases
from attnprops.properties.strategies import AttentionCase
from attnprops.properties.strategies import values

SUBJECT = current_subject()


@pytest.mark.requires("paged_cache")
@pytest.mark.oracle_backed
@given(case=serving_cases(SUBJECT, paged=True))
def test_paged_attention_equals_the_gathered_sequences(subject, case):
    """``attention_with_kvcache`` over a page pool (pages of 1-5 positions, in a drawn order,
    spare pages and block-table columns holding values of their own) equals, row by row,
    attention over each sequence's keys gathered position by position (vLLM's PagedAttention;
    flashinfer#490: results that differ by page size)."""
    assert_rows_match_oracle(subject, case, "paged attention vs the gathered sequences")


@st.composite
def paged_runs(draw):
    """A pool (1-5 pages of 1-5 positions, its sizes and dtype) and 2-10 steps: an
    ``("add",)`` first, then any of ``("add",)``, ``("append", first, count, tokens)``
    (``count`` live sequences from the ``first``-th, ``tokens`` positions each; drawn twice as
    often), ``("free", which)`` and ``("recycle", which)`` (free it, then add a sequence: the
    new one takes the freed pages first). Indices are taken modulo the live sequences; a step
    with nothing to act on is skipped."""
    dtype = np.dtype(draw(st.sampled_from(tuple(reversed(SUBJECT.capabilities.dtypes)))))
    sizes = dict(
        num_pages=draw(st.integers(1, 5)),
        page_size=draw(PAGE_SIZES),
        num_kv_heads=draw(st.integers(1, 2)),
        head_dim=draw(st.integers(1, 3)),
        value_dim=draw(st.integers(1, 3)),
    )
    group = draw(st.integers(1, 2))
    append = st.tuples(st.just("append"), st.integers(0, 2), st.integers(1, 2), st.integers(1, 3))
    step = st.one_of(
        append,
        st.tuples(st.just("add")),
        st.tuples(st.just("recycle"), st.integers(0, 2)),
        append,
        st.tuples(st.just("free"), st.integers(0, 2)),
    )
    steps = [("add",), *draw(st.lists(step, min_size=1, max_size=9))]
    magnitude = draw(st.sampled_from(("unit", "ties")))
    return sizes, group, dtype, magnitude, steps


def _pool_state(cache, live):
    keys, vals = np.array(cache.key_pages), np.array(cache.value_pages)
    if not live:
        return keys, vals, None, None
    return keys, vals, cache.seqlens(live), cache.block_table(live)


def _pages_of(lengths, page_size) -> int:
    """The pages sequences of ``lengths`` positions own: each its whole pages, no more (a
    page is taken when an append first reaches it, and given back by ``free``)."""
    return sum(-(-int(n) // page_size) for n in lengths)


def _check_ownership(cache, given_kv, num_pages, page_size):
    """Each live sequence has the length it was given, read in the caller's order (here the
    reverse of the ids': ``seqlens`` and ``block_table`` rows follow ``seqs`` as passed, not
    sorted); no page belongs to two of them; and owned + free pages = the pool (a page a
    ``free`` does not give back, or an append takes too many of, shows in ``free_pages``)."""
    order = sorted(given_kv, reverse=True)
    expected = [given_kv[s][0].shape[2] for s in order]
    if order:
        table, lengths = cache.block_table(order), cache.seqlens(order)
        if [int(n) for n in lengths] != expected:
            fail(f"seqlens({order}) = {np.asarray(lengths).tolist()}, given {expected}")
        owned = [int(p) for row, n in zip(table, expected) for p in row[: -(-n // page_size)]]
        if len(set(owned)) != len(owned):
            fail(f"a page belongs to two sequences: block_table {table.tolist()}, seqs {order}")
        if any(not 0 <= p < num_pages for p in owned):
            fail(f"block_table {table.tolist()} names a page outside the pool of {num_pages}")
    free = num_pages - _pages_of(expected, page_size)
    if cache.free_pages != free:
        fail(
            f"free_pages = {cache.free_pages}; the pool of {num_pages} pages of {page_size} "
            f"less the {num_pages - free} owned by sequences of {expected} positions: {free}"
        )


@pytest.mark.requires("paged_cache")
@pytest.mark.oracle_backed
@given(run=paged_runs(), data=st.data())
def test_paged_cache_run_equals_contiguous_decoding(subject, run, data):
    """Drive the subject's ``PagedKVCache`` through adds, appends (one or two sequences at a
    time, crossing page boundaries) and frees whose pages the next sequence reuses: every
    append is ``cached_attention(..., cache, seqs=...)`` (append, then attend through the
    cache, as a serving engine does), and its output equals causal attention over what each
    sequence was given (the oracle); after every step ``seqlens`` and ``block_table`` (asked
    in descending id order) follow the caller's order and ``free_pages`` is the pool less the
    pages the sequences own; at the end ``attention_with_kvcache`` over the pool, its block
    table and lengths, equals it too. So a page index off by one, a stale length, a page
    shared with another sequence or one a ``free`` does not give back shows; an append the
    pool cannot hold (by that count) raises ``ValueError`` and changes nothing
    (FlashAttention's test of ``seqlen`` at capacity)."""
    sizes, group, dtype, magnitude, steps = run
    cache = subject.module.PagedKVCache(**sizes, dtype=dtype)
    Hkv, D, Dv = sizes["num_kv_heads"], sizes["head_dim"], sizes["value_dim"]
    given_kv: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for number, step in enumerate(steps):
        live = sorted(given_kv)
        if step[0] == "recycle" and live:
            seq = live[step[1] % len(live)]
            note(f"step {number}: free sequence {seq}, then add one")
            cache.free(seq)
            del given_kv[seq]
            live = sorted(given_kv)
        if step[0] in ("add", "recycle"):
            if len(live) >= 3:
                continue
            seq = cache.add_sequence()
            note(f"step {number}: add -> sequence {seq}")
            if seq in given_kv:
                fail(f"add_sequence returned {seq}, a live sequence")
            empty = (np.zeros((1, Hkv, 0, D), dtype), np.zeros((1, Hkv, 0, Dv), dtype))
            given_kv[seq] = empty
        elif step[0] == "free":
            if not live:
                continue
            seq = live[step[1] % len(live)]
            note(f"step {number}: free sequence {seq}")
            cache.free(seq)
            del given_kv[seq]
        else:
            if not live:
                continue
            _, first, count, tokens = step
            seqs = [live[(first + i) % len(live)] for i in range(min(count, len(live)))]
            B = len(seqs)
            key = data.draw(values((B, Hkv, tokens, D), dtype.name, magnitude), label="key")
            value = data.draw(values((B, Hkv, tokens, Dv), dtype.name, magnitude), label="value")
            before = _pool_state(cache, live)
            lengths = [given_kv[s][0].shape[2] for s in seqs]
            needed = _pages_of([n + tokens for n in lengths], sizes["page_size"]) - _pages_of(
                lengths, sizes["page_size"]
            )
            free = sizes["num_pages"] - _pages_of(
                [kv[0].shape[2] for kv in given_kv.values()], sizes["page_size"]
            )
            note(f"step {number}: append {tokens} positions to {seqs} ({needed} new pages)")
            if needed > free:
                try:
                    cache.append(seqs, key, value)
                except (ValueError, TypeError):
                    pass
                else:
                    fail(f"append of {needed} new pages with {free} free accepted")
                after = _pool_state(cache, live)
                for what, old, new in zip(
                    ("key pool", "value pool", "lengths", "block table"), before, after
                ):
                    assert_equal(out=new, expected=old, what=f"{what} after a failed append")
                continue
            query = data.draw(
                values((B, Hkv * group, tokens, D), dtype.name, magnitude), label="query"
            )
            out = call_subject(
                subject.cached_attention,
                query,
                key,
                value,
                cache,
                seqs=seqs,
                what="cached_attention on the PagedKVCache (append, then attend)",
            )
            for row, seq in enumerate(seqs):
                k, v = given_kv[seq]
                given_kv[seq] = (
                    np.concatenate([k, key[row : row + 1]], axis=2),
                    np.concatenate([v, value[row : row + 1]], axis=2),
                )
            _assert_sequences(
                subject, out, query, [given_kv[s] for s in seqs], seqs, sizes, number, magnitude
            )
        _check_ownership(cache, given_kv, sizes["num_pages"], sizes["page_size"])
    # the pool read without the cache, its block table and lengths as they are, the sequences
    # in descending id order (the caller's order, not the cache's)
    live = [s for s in sorted(given_kv, reverse=True) if given_kv[s][0].shape[2]]
    if live:
        query = data.draw(values((len(live), Hkv * group, 1, D), dtype.name, magnitude))
        args, call = pool_call(cache, live)
        out = call_subject(
            subject.attention_with_kvcache,
            query,
            *args,
            **call,
            what="attention_with_kvcache over the pool at the end of the run",
        )
        _assert_sequences(
            subject, out, query, [given_kv[s] for s in live], live, sizes, "end", magnitude
        )


def _assert_sequences(subject, out, query, kvs, seqs, sizes, step, magnitude):
    """Row ``b`` of ``out`` within the bounds of the oracle's causal attention of
    ``query[b]`` over what sequence ``seqs[b]`` was given, ``kvs[b]``."""
    __tracebackhide__ = True
    for row, (seq, (k, v)) in enumerate(zip(seqs, kvs)):
        case = AttentionCase(
            query[row : row + 1], k, v, None, True, None, None,
            f"sequence {seq} after step {step}", magnitude,
        )  # fmt: skip
        parts, bounds = oracle_with_bounds(case, subject)
        assert_within(
            out=np.asarray(out)[row : row + 1],
            expected=parts.output.value,
            bound=bounds.output,
            what=f"sequence {seq} ({k.shape[2]} positions, pages of "
            f"{sizes['page_size']}) vs its contiguous keys",
            case=case,
        )
