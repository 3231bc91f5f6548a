"""Serving batches at kernel sizes: many sequences of thousands of cached positions, contiguous
or over a pool of hundreds of pages, for the serving properties of
``properties/test_kernel_serving.py``.

The small serving cases (:mod:`properties.serving_cases`) hold 1-3 sequences of up to 7
positions in pools of a few pages: every fault of a gather that shows only past a size a
serving kernel is built around stays hidden there. A kernel launches sequences in batch tiles
(4, 8) and indexes the block table from the tile; compiles for a ``max_seqlen_k`` (2048, 4096)
and clamps to it; narrows page ids to a byte or a short; sizes a workspace by the longest
sequence. :func:`serving_batches` draws 1-8 sequences (up to 17 one draw in two), each of its
own length (a boundary size, or one draw in two the larger of two:
:func:`~properties.sizes.long_sizes`), pages of 1-64 positions or of a real cache's 16-512, so that pools of hundreds
or thousands of pages are common, and a page order that is the pool's, its reverse or a
shuffle; :func:`paged_cache_runs` appends up to 8 sequences to a ``PagedKVCache`` in rounds.
The head dims and head counts are cut to the profile's budgets
(:func:`~properties.sizes.limits`): K/V elements ``B * Hkv * T * (D + Dv) <= max_kv`` and scores
``Hq * Tq * sum(L_b) <= max_scores``, so a batch of long sequences has small heads (the faults
here are in the gather, not the head dim).
Shrinks towards one sequence, short lengths, small pages in the pool's order.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from hypothesis import strategies as st

from attnprops.oracle.rules import pages_needed
from attnprops.properties.kernel_cache_cases import PAGE_SIZES
from attnprops.properties.kernel_cases import GROUPS
from attnprops.properties.kernel_cases import MAGNITUDES
from attnprops.properties.kernel_cases import MAX_DECODE_QUERIES
from attnprops.properties.kernel_cases import draw_head_dims
from attnprops.properties.kernel_cases import draw_window
from attnprops.properties.kernel_cases import fit_group
from attnprops.properties.kernel_spec import KernelSpec
from attnprops.properties.sizes import boundary_sizes
from attnprops.properties.sizes import limits
from attnprops.properties.sizes import long_sizes
from attnprops.properties.strategies import AttentionCase
from attnprops.properties.variant_draws import attention_sinks
from attnprops.properties.variant_draws import press_slopes

# Sequences in a batch: up to 8 (past a batch tile of 4, at and past one of 8) one draw in
# two, up to 17 (past two tiles of 8) in the other; both shrink to 1 (a fault past 4 sequences
# shrinks to 5 whichever drew it).
SEQUENCES = st.one_of(st.integers(1, 8), st.integers(1, 17))
PAGE_ORDERS = ("in order", "reversed", "shuffled")  # the pool's pages as the sequences take them
STORAGE_PAST = (0, 1, 16, 64)  # contiguous storage: positions past the longest sequence

__all__ = [
    "PagedCacheRun",
    "ServingBatch",
    "append_rounds",
    "paged_cache_runs",
    "serving_batches",
    "serving_variants",
]


class ServingBatch(NamedTuple):
    """A kernel-sized ``attention_with_kvcache`` call, drawn by :func:`serving_batches`.

    ``spec.build()`` gives the queries ``(B, Hq, Tq, D)`` and the contiguous storage
    ``(B, Hkv, T, D)`` / ``(B, Hkv, T, Dv)`` (``T = spec.key_len``, the longest length and
    some more); sequence ``b`` is the first ``lengths[b]`` positions of its row, its queries
    the last ``Tq`` of them, causal or not (``spec.is_causal``). ``page_size`` None: that
    storage is the cache; else the sequences are copied to a pool of pages of ``page_size``
    positions (:meth:`pool`)."""

    spec: KernelSpec
    lengths: tuple[int, ...]
    page_size: int | None = None
    spare_pages: int = 0
    order: str = "in order"
    variants: dict | None = None  # window, ALiBi slopes, softcap, sinks, chunk_size

    def case(self) -> AttentionCase:
        """``spec.build()`` with the :attr:`variants` every sequence shares (ALiBi slopes
        ``(B, Hq)``: row ``b`` is sequence ``b``'s)."""
        return self.spec.build()._replace(**(self.variants or {}))

    def describe(self) -> str:
        """One line for the counterexample: sizes, lengths and the storage."""
        s = self.spec
        where = (
            "contiguous storage"
            if self.page_size is None
            else (f"pages of {self.page_size} ({self.order}, {self.num_pages} in the pool)")
        )
        variants = {
            k: v.tolist() if hasattr(v, "tolist") else v for k, v in (self.variants or {}).items()
        }
        return (
            f"{s.batch} sequences, lengths {list(self.lengths)}, Tq={s.query_len}, "
            f"Hq={s.num_heads}, Hkv={s.num_kv_heads}, D={s.head_dim}, Dv={s.value_dim}, "
            f"{s.dtype}, {where}; variants {variants}"
        )

    @property
    def num_pages(self) -> int:
        """Pages in the pool: each sequence's, and the spare ones."""
        return sum(pages_needed(n, self.page_size) for n in self.lengths) + self.spare_pages

    def pool(self, case: AttentionCase) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(key_pages (P, Hkv, S, D), value_pages (P, Hkv, S, Dv), block_table (B, M))``:
        sequence ``b``'s position ``t`` in page ``block_table[b, t // S]``; the pages taken
        in :attr:`order` (``shuffled``: a permutation from ``default_rng(seed + 3)``), the
        table's unused entries -1, and every position no sequence holds (spare pages, a last
        page's tail) values of its own from that generator (8 N(0, 1)), so a read shows."""
        owned = [pages_needed(n, self.page_size) for n in self.lengths]
        rng = np.random.default_rng(self.spec.seed + 3)
        order = np.arange(self.num_pages)
        if self.order == "reversed":
            order = order[::-1]
        elif self.order == "shuffled":
            order = rng.permutation(self.num_pages)
        table = np.full((len(owned), max(owned)), -1, dtype=np.int64)
        pools = []
        for x in (case.key, case.value):
            spread = 8 * rng.standard_normal(
                (self.num_pages, x.shape[1], self.page_size, x.shape[3])
            )
            pools.append(spread.astype(x.dtype))
        taken = 0
        for b, n in enumerate(owned):
            table[b, :n] = order[taken : taken + n]
            taken += n
            for j, page in enumerate(table[b, :n]):
                positions = slice(
                    j * self.page_size, min((j + 1) * self.page_size, self.lengths[b])
                )
                width = positions.stop - positions.start
                for pool, x in zip(pools, (case.key, case.value)):
                    pool[page, :, :width] = x[b, :, positions]
        return pools[0], pools[1], table


@st.composite
def _specs(draw, subject, shape, batch, num_kv_heads, group, Tq, Tk, scales) -> KernelSpec:
    """A causal :class:`KernelSpec` of these sizes, no mask: head dims cut to the profile's
    ``max_kv`` for ``B * Hkv * Tk`` positions, the subject's dtypes, a value regime, a scale
    from ``scales`` and a seed."""
    head_dim, value_dim = draw_head_dims(draw, batch, num_kv_heads, Tk)
    dtype = draw(st.sampled_from(tuple(reversed(subject.capabilities.dtypes))), label="dtype")
    magnitude = draw(st.sampled_from(MAGNITUDES), label="values")
    scale = draw(scales, label="scale")
    seed = draw(st.integers(0, 2**32 - 1), label="seed")
    heads = num_kv_heads * group
    return KernelSpec(
        shape,
        batch,
        heads,
        num_kv_heads,
        Tq,
        Tk,
        head_dim,
        value_dim,
        True,
        None,
        "none",
        dtype,
        magnitude,
        scale,
        seed,
    )


@st.composite
def serving_batches(draw, subject, *, paged: bool) -> ServingBatch:
    """A :class:`ServingBatch` for ``subject`` (its declared dtypes) within the profile's
    :func:`~properties.sizes.limits`: 1-8 sequences (or up to 17) of lengths each drawn on its
    own, a boundary size up to the decode length or, one draw in two, from its long regime; ``Tq`` (1-4, or up to 64, at
    most the shortest length); one or two K/V heads, a group from
    :data:`~properties.kernel_cases.GROUPS`, head dims from :data:`~properties.sizes.HEAD_DIMS`,
    each cut to the budgets (the group to the largest that fits, then ``Tq``, then the
    dims). ``paged``: pages of 1-64 positions (a boundary size) or of a real cache's sizes,
    0-2 spare pages, the pool's order; else 0, 1, 16 or 64 positions of storage past the
    longest sequence. Causal, or not one draw in two (each query then sees every position of
    its sequence). Shrinks towards one short sequence, one head, small pages in order,
    causal."""
    lim = limits()
    batch = draw(SEQUENCES, label="sequences")
    length = st.one_of(boundary_sizes(lim.max_decode_len), long_sizes(lim.max_decode_len))
    lengths = draw(st.lists(length, min_size=batch, max_size=batch), label="lengths")
    Tq = draw(st.one_of(st.integers(1, 4), st.integers(1, MAX_DECODE_QUERIES)), label="query_len")
    Tq = min(Tq, min(lengths))
    num_kv_heads = draw(st.integers(1, 2), label="num_kv_heads")
    group = draw(st.sampled_from(GROUPS), label="group")
    total = sum(lengths)
    group = fit_group(group, num_kv_heads * Tq * total, lim.max_scores)
    if num_kv_heads * group * Tq * total > lim.max_scores:
        Tq = max(1, lim.max_scores // (num_kv_heads * group * total))
    past = 0 if paged else draw(st.sampled_from(STORAGE_PAST), label="storage past the longest")
    Tk = max(lengths) + past
    scales = st.one_of(st.none(), st.sampled_from([0.125, 0.3, 1.0]))
    spec = draw(_specs(subject, "decode", batch, num_kv_heads, group, Tq, Tk, scales))
    page_size, spare, order = None, 0, "in order"
    if paged:
        page_size = draw(
            st.one_of(boundary_sizes(64), st.sampled_from(PAGE_SIZES)), label="page size"
        )
        spare = draw(st.integers(0, 2), label="spare pages")
        order = draw(st.sampled_from(PAGE_ORDERS), label="page order")
    variants = draw(serving_variants(subject, spec, max(lengths)), label="variants")
    # drawn last (a batch drawn before keeps its draws); shrinks to causal. Not causal, the
    # lengths alone hide each sequence's storage past its length (a kernel that leaves that
    # to the causal mask reads it).
    causal = draw(st.sampled_from((True, False)), label="is_causal")
    spec = spec._replace(is_causal=causal)
    return ServingBatch(spec, tuple(lengths), page_size, spare, order, variants)


@st.composite
def serving_variants(draw, subject, spec: KernelSpec, longest: int) -> dict:
    """The variant keywords ``subject`` declares, each drawn half the time, at kernel sizes
    (every sequence shares them, over its own absolute positions): a window whose sides are
    boundary sizes up to ``longest + 1``, 0 or None (Hugging Face's convention: a left count
    and ``right=None``); ALiBi slopes, Press et al.'s ``2**(-8 k / Hq)``, mostly ``(B, Hq)``
    with sequence ``b``'s divided by ``b + 1`` when ``B > 1`` (a kernel that reads the first
    sequence's row, or strides the table wrong, fails); a soft cap of 50, 30 or 5; sink
    logits (:func:`~properties.variant_draws.attention_sinks`); a ``chunk_size`` that is a
    boundary size up to ``longest + 1``. None of them leaves a query without a key: each
    sees its own position."""
    caps = subject.capabilities
    Hq, B = spec.num_heads, spec.batch
    found = {}
    if caps.window and draw(st.booleans()):
        found["window"] = draw_window(draw, caps.window, longest + 1)
    if caps.alibi and draw(st.booleans()):
        per_sequence = B > 1 and not draw(st.booleans(), label="slopes (Hq,) for every sequence")
        found["alibi_slopes"] = press_slopes(Hq, B if per_sequence else None)
    if caps.softcap and draw(st.booleans()):
        found["softcap"] = draw(st.sampled_from([50.0, 30.0, 5.0]), label="softcap")
    if caps.sinks and draw(st.booleans()):
        found["sinks"] = draw(attention_sinks(Hq, spec.dtype), label="sinks")
    if caps.chunk_size and draw(st.booleans()):
        found["chunk_size"] = draw(boundary_sizes(longest + 1), label="chunk_size")
    return found


class PagedCacheRun(NamedTuple):
    """A kernel-sized run of a ``PagedKVCache``, drawn by :func:`paged_cache_runs`:
    ``spec.build()`` gives ``B`` causal sequences (prefill, ``T = spec.key_len``), sequence
    ``b`` the first ``lengths[b]`` positions of its row, appended in rounds of chunks
    repeating ``pattern`` (:func:`append_rounds`) to a pool of exactly the pages they take
    and ``spare_pages`` more, then freed one by one in ``free_order``."""

    spec: KernelSpec
    lengths: tuple[int, ...]
    page_size: int
    spare_pages: int
    pattern: tuple[int, ...]
    free_order: tuple[int, ...] = ()  # the sequences freed at the end, in this order

    @property
    def num_pages(self) -> int:
        """The pool: each sequence's pages, and the spare ones."""
        return sum(pages_needed(n, self.page_size) for n in self.lengths) + self.spare_pages

    def describe(self) -> str:
        """One line for the counterexample."""
        s = self.spec
        return (
            f"{s.batch} sequences of {list(self.lengths)} positions, pages of "
            f"{self.page_size} ({self.num_pages} in the pool), chunk pattern "
            f"{list(self.pattern)}, Hq={s.num_heads}, Hkv={s.num_kv_heads}, D={s.head_dim}, "
            f"Dv={s.value_dim}, {s.dtype}"
        )


def append_rounds(lengths, pattern) -> list[tuple[tuple[int, ...], int]]:
    """``(seqs, tokens)`` appends: round ``r`` gives ``pattern[r % len(pattern)]`` positions
    to every sequence that has that many left, in one call, and each sequence that has fewer
    (but some) left its last positions in a call of its own; until every sequence holds its
    length."""
    left, calls, r = list(lengths), [], 0
    while any(left):
        chunk = pattern[r % len(pattern)]
        r += 1
        full = tuple(b for b, n in enumerate(left) if n >= chunk)
        if full:
            calls.append((full, chunk))
        for b, n in enumerate(left):
            if b in full:
                left[b] -= chunk
            elif n:
                calls.append(((b,), n))
                left[b] = 0
    return calls


@st.composite
def paged_cache_runs(draw, subject) -> PagedCacheRun:
    """A :class:`PagedCacheRun` within the profile's budgets: 1-8 sequences, each a boundary
    size of positions up to ``sqrt(max_scores / B)`` (every row is compared with full causal
    attention), pages of 1-16 positions (FlashInfer's 1, vLLM's 16), a boundary size up to 64
    or a real cache's 16-512, so a sequence owns tens or hundreds of pages in most runs;
    chunks as :func:`~properties.kernel_cache_cases.cache_runs` (single tokens and boundary
    sizes); one or two K/V heads, a group, head dims cut to ``max_kv``; the order in which
    the sequences are freed at the end. Shrinks towards one short sequence, small pages, one
    chunk size."""
    lim = limits()
    batch = draw(st.integers(1, 8), label="sequences")
    longest = max(2, min(lim.max_appends, int((lim.max_scores // batch) ** 0.5)))
    lengths = draw(
        st.lists(boundary_sizes(longest), min_size=batch, max_size=batch), label="lengths"
    )
    num_kv_heads = draw(st.integers(1, 2), label="num_kv_heads")
    group = draw(st.sampled_from(GROUPS), label="group")
    squares = sum(n * n for n in lengths)
    group = fit_group(group, num_kv_heads * squares, lim.max_scores)
    T = max(lengths)
    spec = draw(_specs(subject, "prefill", batch, num_kv_heads, group, T, T, st.none()))
    page_size = draw(
        st.one_of(st.integers(1, 16), boundary_sizes(64), st.sampled_from(PAGE_SIZES)),
        label="page size",
    )
    spare = draw(st.integers(0, 2), label="spare pages")
    pattern = draw(
        st.lists(st.one_of(st.just(1), boundary_sizes(T)), min_size=1, max_size=8),
        label="chunk pattern",
    )
    free_order = draw(st.permutations(range(batch)), label="free order")
    return PagedCacheRun(spec, tuple(lengths), page_size, spare, tuple(pattern), tuple(free_order))
