"""Strategies for the serving caches (:mod:`oracle.rules.serving`): ragged batches over
contiguous storage, the same sequences scattered over a permuted page pool, and the variant
keywords every sequence shares.

A :class:`ServingCase` is one valid ``attention_with_kvcache`` call together with, for each
sequence, the plain :class:`strategies.AttentionCase` it must equal (its queries over its own
gathered keys), so the properties hold each row to the oracle with the usual bounds. Storage the
call must not read (positions past a length, pages of other sequences, block-table entries past
a sequence's pages) holds values of their own, drawn like the rest, so a read of it shows.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from hypothesis import strategies as st

from attnprops.oracle.rules import KVCacheCall
from attnprops.oracle.rules import pages_needed
from attnprops.oracle.serving import sequence_kv
from attnprops.properties.strategies import AttentionCase
from attnprops.properties.strategies import values
from attnprops.properties.variant_draws import alibi_slopes
from attnprops.properties.variant_draws import attention_sinks
from attnprops.properties.variant_draws import window_sides

MAX_SEQUENCE = 7  # positions per sequence: past two pages of 3, with a partial one
PAGE_SIZES = st.one_of(st.integers(1, 4), st.sampled_from([3, 5]))  # 3, 5 divide few lengths


class ServingCase(NamedTuple):
    """One ``attention_with_kvcache`` call and the per-sequence cases it must equal."""

    query: np.ndarray  # (B, Hq, Tq, D)
    key_cache: np.ndarray  # (B, Hkv, T, D) or a pool (P, Hkv, S, D)
    value_cache: np.ndarray  # (B, Hkv, T, Dv) or (P, Hkv, S, Dv)
    cache_seqlens: np.ndarray  # (B,) int32
    block_table: np.ndarray | None  # (B, M) int32, -1 past a sequence's pages
    options: dict  # is_causal, scale and the variants, as the subject's keywords
    sequences: tuple[AttentionCase, ...]  # sequence b alone: (1, Hq, Tq, D) over (1, Hkv, L_b, D)

    def kwargs(self) -> dict:
        table = {} if self.block_table is None else {"block_table": self.block_table}
        return {**table, **self.options}

    def describe(self) -> str:
        layout = (
            f"contiguous key_cache {self.key_cache.shape}"
            if self.block_table is None
            else f"pool {self.key_cache.shape} (page_size {self.key_cache.shape[2]}), "
            f"block_table {self.block_table.tolist()}"
        )
        return (
            f"query {self.query.shape} {self.query.dtype}; {layout}; cache_seqlens "
            f"{self.cache_seqlens.tolist()}; {self.options}"
        )


@st.composite
def shared_variants(draw, subject, batch: int, num_heads: int, dtype, *, chunks: bool = True):
    """The variant keywords ``subject`` declares, each drawn half the time: a window
    (``(left, right)``, causal-only ``right=None`` for Hugging Face's convention), ALiBi slopes
    (``(Hq,)`` or ``(B, Hq)``), a soft cap, sinks and (``chunks``) a chunk size. None of them
    can leave a row without a key: the query always sees itself."""
    caps = subject.capabilities
    found = {}
    if caps.window and draw(st.booleans()):
        found["window"] = draw(window_sides(4, sliding_window=caps.window == "sliding_window"))
    if caps.alibi and draw(st.booleans()):
        found["alibi_slopes"] = draw(alibi_slopes(batch, num_heads))
    if caps.softcap and draw(st.booleans()):
        found["softcap"] = draw(st.sampled_from([30.0, 5.0, 1.0]))
    if caps.sinks and draw(st.booleans()):
        found["sinks"] = draw(attention_sinks(num_heads, dtype))
    if chunks and caps.chunk_size and draw(st.booleans()):
        found["chunk_size"] = draw(st.integers(1, 4))
    return found


def _sequence_case(query, keys, vals, b, is_causal, scale, variants, magnitude, layout):
    extra = dict(variants)
    slopes = extra.pop("alibi_slopes", None)
    if slopes is not None and slopes.ndim == 2:
        slopes = slopes[b : b + 1]
    return AttentionCase(
        query[b : b + 1],
        keys,
        vals,
        None,
        is_causal,
        None,
        scale,
        layout,
        magnitude,
        alibi_slopes=slopes,
        **extra,
    )


@st.composite
def serving_cases(draw, subject, *, paged: bool) -> ServingCase:
    """A ragged batch of 1-3 sequences of 1-7 positions each (the queries the last ``Tq`` of
    each), contiguous (``paged=False``: ``(B, Hkv, T, D)``, ``T`` up to 2 past the longest) or
    paged (pages of 1-5 positions, the pool's pages in a drawn order, 0-2 spare pages and 0-1
    spare block-table columns), with the subject's declared variants."""
    dtype = np.dtype(draw(st.sampled_from(tuple(reversed(subject.capabilities.dtypes)))))
    magnitude = draw(st.sampled_from(("unit", "ties", "large")))
    batch = draw(st.integers(1, 3))
    kv_heads, group = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    heads, head_dim, value_dim = kv_heads * group, draw(st.integers(1, 4)), draw(st.integers(1, 4))
    is_causal = draw(st.booleans())
    query_len = draw(st.integers(1, 3))
    lengths = draw(st.lists(st.integers(query_len, MAX_SEQUENCE), min_size=batch, max_size=batch))
    query = draw(values((batch, heads, query_len, head_dim), dtype.name, magnitude))
    if paged:
        page_size = draw(PAGE_SIZES)
        owned = [pages_needed(n, page_size) for n in lengths]
        num_pages = sum(owned) + draw(st.integers(0, 2))
        order = draw(st.permutations(range(num_pages)))
        width = max(owned) + draw(st.integers(0, 1))
        table = np.full((batch, width), -1, dtype=np.int32)
        taken = 0
        for b, n in enumerate(owned):
            table[b, :n] = order[taken : taken + n]
            taken += n
        pool = (num_pages, kv_heads, page_size)
    else:
        table = None
        pool = (batch, kv_heads, max(lengths) + draw(st.integers(0, 2)))
    key_cache = draw(values(pool + (head_dim,), dtype.name, magnitude))
    value_cache = draw(values(pool + (value_dim,), dtype.name, magnitude))
    scale = draw(st.one_of(st.none(), st.floats(0.05, 4)))
    variants = draw(shared_variants(subject, batch, heads, dtype))
    sequences = []
    seqlens = np.array(lengths, dtype=np.int32)
    call = KVCacheCall(query, key_cache, value_cache, seqlens, table, pool[2] if paged else None)
    for b, n in enumerate(lengths):
        keys, vals = sequence_kv(call, b)  # the oracle's gather, position by position
        layout = f"sequence {b} of {batch}: {n} cached positions"
        sequences.append(
            _sequence_case(query, keys, vals, b, is_causal, scale, variants, magnitude, layout)
        )
    options = {"is_causal": is_causal, "scale": scale, **variants}
    return ServingCase(query, key_cache, value_cache, seqlens, table, options, tuple(sequences))
