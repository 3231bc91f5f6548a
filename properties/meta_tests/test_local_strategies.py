"""Meta-tests: the strategies of windows, packed documents, chunks, ALiBi, soft caps and
sinks draw every region the properties rely on, and never an invalid row.

Pooled like ``test_strategy_coverage`` (:func:`pooled_draws`), from :data:`RUNS` = 8
independent runs of 25 draws (half its 16: the draws cost about 15 ms each). Per-run miss
rates measured over 100 runs (seeds 1000..1099, :func:`pooled_draws` of one run each and the
feature functions below, windows, documents, chunks, ALiBi, caps and sinks drawn together;
Hypothesis 6.170.27, 2026-12-06): small cases at most 0.13 ("segment ids per batch
element"), then 0.11, 0.07, 0.07, 0.04 and 0.03 or less (all 8 runs miss one of them with
probability about ``sum_f p_f ** 8`` ~ 1e-7); kernel specs 0.14 ("window starts
mid-block"), 0.09, 0.08 (~ 2e-7; GQA groups 1 to 8 and decodes of up to 64 queries);
kernel documents (seeds 1000..1059) 0.38 ("documents without causality"), 0.05, then 0
(~ 5e-4). The seeds are fixed, so a miss shows only after a change of the strategies or of
the Hypothesis release, which calls for re-measuring.
"""

from __future__ import annotations

import functools

import numpy as np

from attnprops.oracle.rules import check_attention_inputs
from attnprops.properties.kernel_cases import kernel_specs
from attnprops.properties.meta_tests.test_strategy_coverage import _scores
from attnprops.properties.meta_tests.test_strategy_coverage import pooled_draws
from attnprops.properties.strategies import attention_cases

SMALL = (
    "left None",
    "right None",
    "both sides finite",
    "left 0",
    "with a mask",
    "with causality",
    "window alone",
    "negative start",
    "block size",
    "window hides a key",
    "a side past every key",
    "segment ids per batch element",
    "segment ids 1-D",
    "a zero-length document",
    "interleaved documents",
    "a document hides a key",
    "a chunk hides a key",
    "chunks with query_start > 0",
    "alibi per batch element",
    "a negative slope",
    "a cap the scores pass threefold",
    "a sink of -inf",
    "a sink above its row's scores",
    "a row only a sink makes valid",
)
RUNS = 8
KERNEL = (
    "window starts mid-block",
    "left next to a tile multiple",
    "window with a mask",
    "decode window shorter than the cache",
)


def _start(query_start, Tq: int, Tk: int) -> int:
    return Tk - Tq if query_start is None else query_start


def small_features(case) -> set[str]:
    left, right = case.window
    Tq, Tk = case.query.shape[-2], case.key.shape[-2]
    start = case.start
    kwargs = case.kwargs()
    windowed = check_attention_inputs(case.query, case.key, case.value, **kwargs).visible
    del kwargs["window"]
    plain = check_attention_inputs(
        case.query, case.key, case.value, **kwargs, fully_masked_rows="zeros"
    ).visible
    found = {
        "left None": left is None,
        "right None": right is None,
        "both sides finite": left is not None and right is not None,
        "left 0": left == 0,
        "with a mask": case.attn_mask is not None,
        "with causality": case.is_causal,
        "window alone": case.attn_mask is None and not case.is_causal,
        "negative start": start < 0,
        "block size": case.block_size is not None,
        "window hides a key": bool((plain & ~windowed).any()),
        "a side past every key": (left is not None and left >= start + Tq - 1)
        or (right is not None and right >= Tk - 1 - start),
    }
    if case.segment_ids is not None:
        query_ids, key_ids = case.segment_ids
        ids = np.atleast_2d(key_ids)
        steps = np.diff(ids, axis=-1)
        found["segment ids per batch element"] = query_ids.ndim == 2 and len(query_ids) > 1
        found["segment ids 1-D"] = query_ids.ndim == 1
        found["a zero-length document"] = bool((steps > 1).any())
        found["interleaved documents"] = bool((steps < 0).any())
        found["a document hides a key"] = bool(
            (query_ids[..., :, None] != key_ids[..., None, :]).any()
        )
    if case.alibi_slopes is not None:
        found["alibi per batch element"] = case.alibi_slopes.ndim == 2
        found["a negative slope"] = bool((case.alibi_slopes < 0).any())
    if case.softcap is not None:
        largest = np.abs(_scores(case)).max()
        found["a cap the scores pass threefold"] = bool(largest > 3 * case.softcap)
    if case.sinks is not None:
        heads = np.isfinite(case.sinks)
        seen = windowed.any(axis=-1)  # (B, Hq, Tq)
        top = np.where(windowed, _scores(case), -np.inf).max(axis=-1)
        found["a sink of -inf"] = not heads.all()
        found["a sink above its row's scores"] = bool(
            (case.sinks.astype(float)[:, None] > top).any()
        )
        found["a row only a sink makes valid"] = bool((~seen & heads[:, None]).any())
    if case.chunk_size is not None:
        p = start + np.arange(Tq)
        found["a chunk hides a key"] = bool(
            ((p[:, None] // case.chunk_size) != (np.arange(Tk) // case.chunk_size)).any()
        )
        found["chunks with query_start > 0"] = start > 0
    return {name for name, hit in found.items() if hit}


def kernel_features(spec) -> set[str]:
    left = spec.window[0]
    start = _start(spec.query_start, spec.query_len, spec.key_len)
    first = None if left is None else start + 16 - left  # the second 16-row tile's first key
    found = {
        "window starts mid-block": first is not None
        and spec.query_len > 16
        and first > 0
        and first % 16 != 0,
        "left next to a tile multiple": left is not None
        and left > 16
        and min(left % 16, 16 - left % 16) <= 1,
        "window with a mask": spec.mask != "none",
        "decode window shorter than the cache": spec.shape == "decode"
        and left is not None
        and left < spec.key_len,
    }
    return {name for name, hit in found.items() if hit}


@functools.cache
def _small() -> tuple:
    strategy = attention_cases(
        windows="offsets", packing=True, alibi=True, softcap=True, sinks=True, block_sizes=True
    )
    return tuple(pooled_draws(strategy, RUNS))


def test_local_and_packed_cases_draw_every_region():
    seen = set().union(*map(small_features, _small()))
    assert set(SMALL) <= seen, sorted(set(SMALL) - seen)


def test_local_and_packed_cases_leave_every_row_a_key():
    """The rulebook accepts every drawn case with windows, documents, chunks and sinks
    (anchors at each query's own position, whose document the query takes; ``right`` raised
    for queries before key 0; no chunks then; a row hides every key only from a head with a
    finite sink): no property gets an invalid call."""
    for case in _small():
        check_attention_inputs(case.query, case.key, case.value, **case.kwargs())


DOCUMENTS = (
    "a boundary inside a 32-row tile",
    "a boundary next to a tile multiple",
    "a zero-length document",
    "documents with causality",
    "documents without causality",
    "documents in a decode",
)


def document_features(spec) -> set[str]:
    starts = spec.documents
    found = {
        "a boundary inside a 32-row tile": any(c % 32 for c in starts) and spec.query_len > 32,
        "a boundary next to a tile multiple": any(c > 16 and c % 16 in (1, 15) for c in starts),
        "a zero-length document": len(set(starts)) < len(starts),
        "documents with causality": bool(starts) and spec.is_causal,
        "documents without causality": bool(starts) and not spec.is_causal,
        "documents in a decode": bool(starts) and spec.shape == "decode",
    }
    return {name for name, hit in found.items() if hit}


def test_document_kernel_specs_draw_tile_edges():
    """Kernel-sized packed documents start at and next to tile multiples, inside query
    tiles, empty now and then, with and without causality and in decodes; every row keeps a
    key (its own position's, in its own document)."""
    specs = pooled_draws(kernel_specs(documents=True, shapes=("prefill", "chunk", "decode")), RUNS)
    seen = set().union(*map(document_features, specs))
    assert set(DOCUMENTS) <= seen, sorted(set(DOCUMENTS) - seen)
    for spec in specs:
        assert (spec.documents or spec.key_len < 2) and spec.mask in ("none", "alibi float mask"), (
            spec
        )
        case = spec.build()
        check_attention_inputs(case.query, case.key, case.value, **case.kwargs())


def test_windowed_kernel_specs_draw_tile_edges():
    specs = pooled_draws(
        kernel_specs(windows="offsets", shapes=("prefill", "chunk", "decode"), block_sizes=True),
        RUNS,
    )
    seen = set().union(*map(kernel_features, specs))
    assert set(KERNEL) <= seen, sorted(set(KERNEL) - seen)
    for spec in specs:  # the masks leave every row a key (random bool masks anchored)
        Tq, Tk = spec.query_len, spec.key_len
        visible = check_attention_inputs(
            np.zeros((Tq, 1)),
            np.zeros((Tk, 1)),
            needs_value=False,
            attn_mask=None if spec.mask != "random bool" else spec.attn_mask(),
            is_causal=spec.is_causal,
            query_start=spec.query_start,
            window=spec.window,
            fully_masked_rows="zeros",
        ).visible
        assert visible.any(axis=-1).all(), spec
