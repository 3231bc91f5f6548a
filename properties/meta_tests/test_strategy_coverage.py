"""Meta-tests: the strategies really draw every region the properties rely on.

A strategy that silently stops drawing a region (say, GQA with Hkv > 1 and group > 1, or
fully masked rows) would leave the properties toothless there without any test failing; these
tests draw a few hundred cases from each strategy and assert that every axis occurs.

*Robust by design, not by luck.* Derandomized draws are one fixed sequence, and that
sequence changes with the constants Hypothesis mines from every imported local module (a
subject, another test file), so a threshold that one sequence happens to meet is luck. And
one Hypothesis run's draws are not independent: in 100 runs of 25 draws, the
"query_start strictly inside (0, Tk - Tq)" feature (9 % of all draws) was absent from 44 of
the runs. So each test pools :data:`RUNS` runs of :data:`DRAWS_PER_RUN` draws, each run with
its own fixed seed (independent sequences), and asserts only what holds with a stated margin
whatever the sequences are: with the measured per-run miss rates ``p_f`` (``python -m
attnprops.properties.meta_tests.coverage_rates``, Hypothesis 6.170.27: worst 0.42, 0.25,
0.24, ...), every feature is missed by all 16 runs with probability ``sum_f p_f ** 16`` ~
1e-6; the key-padding rate below has a margin of the same order. A change of the strategies
(or of the Hypothesis release) that moves these rates calls for re-measuring, not for
re-seeding.
"""

from __future__ import annotations

import functools
from collections import Counter

import numpy as np
import pytest
from hypothesis import Phase
from hypothesis import given
from hypothesis import seed
from hypothesis import settings

from attnprops import oracle
from attnprops.oracle.rules import AttentionInputError
from attnprops.oracle.rules import check_attention_inputs
from attnprops.properties.invalid import INVALID_KINDS
from attnprops.properties.invalid import fully_masked_cases
from attnprops.properties.invalid import invalid_cases
from attnprops.properties.mask_draws import MASK_LAYOUTS
from attnprops.properties.strategies import attention_cases

DRAWS = settings(
    max_examples=200, derandomize=True, database=None, phases=[Phase.generate], deadline=None
)
RUNS = 16  # independent Hypothesis runs pooled (module docstring)
DRAWS_PER_RUN = 25


def pooled_draws(
    strategy, runs: int = RUNS, per_run: int = DRAWS_PER_RUN, first_seed: int = 0
) -> list:
    """``runs`` independent Hypothesis runs of ``per_run`` draws of ``strategy``, run ``k``
    seeded with ``first_seed + k`` (fixed, so the draws are reproducible; independent, so
    the pooled counts have the margins of the module docstring)."""
    drawn = []
    for k in range(runs):

        @seed(first_seed + k)
        @settings(DRAWS, max_examples=per_run, derandomize=False)
        @given(case=strategy)
        def collect(case):
            drawn.append(case)

        collect()
    return drawn


@functools.cache
def _drawn_cases() -> tuple:
    """RUNS x DRAWS_PER_RUN = 400 pooled draws of attention_cases(), drawn once per process
    and shared by the tests that read every case."""
    return tuple(pooled_draws(attention_cases()))


KEY_PADDING_SHAPED = "2-D mask, rows differ, B = Tq > 1 (the shape of a key-padding mask)"


def _scores(case) -> np.ndarray:
    q = case.query.astype(np.float64)
    k = case.key.astype(np.float64)
    if q.ndim == 2:
        q, k = q[None, None], k[None, None]
    group = q.shape[1] // k.shape[1]
    scale = 1 / np.sqrt(q.shape[-1]) if case.scale is None else case.scale
    return scale * q @ np.repeat(k, group, axis=1).swapaxes(-1, -2)  # (B, Hq, Tq, Tk)


def features(case) -> set[str]:
    """The coverage features a drawn case exhibits."""
    seen = {f"dtype {case.dtype}", f"mask layout {case.mask_layout}", f"values {case.magnitude}"}
    q = case.query if case.query.ndim == 4 else case.query[None, None]
    k = case.key if case.key.ndim == 4 else case.key[None, None]
    v = case.value if case.value.ndim == 4 else case.value[None, None]
    B, Hq, Tq, D = q.shape
    Hkv, Tk, Dv = k.shape[1], k.shape[2], v.shape[3]
    group = Hq // Hkv
    seen.add("2-D inputs" if case.query.ndim == 2 else "4-D inputs")
    if Hkv > 1 and group > 1:
        seen.add("GQA: Hkv > 1 and group > 1")
    if Hkv == 1 and Hq > 1:
        seen.add("MQA: Hkv = 1 < Hq")
    if Hkv == Hq and Hq > 1:
        seen.add("MHA: Hq = Hkv > 1")
    if B > 1:
        seen.add("batch > 1")
    seen.add("Tq < Tk" if Tq < Tk else "Tq > Tk" if Tq > Tk else "Tq = Tk")
    if Tq == 1:
        seen.add("decode Tq = 1")
    if Tk == 1:
        seen.add("Tk = 1")
    if D != Dv:
        seen.add("D != Dv")
    if case.query_start is None:
        seen.add("query_start None")
    elif 0 < case.query_start < Tk - Tq:
        seen.add("query_start strictly inside (0, Tk - Tq)")
    elif case.query_start == 0:
        seen.add("query_start 0")
    if case.is_causal:
        seen.add("causal")
        if case.attn_mask is not None:
            seen.add("causal AND mask")
    if case.scale is not None:
        seen.add("explicit scale")
    mask = case.attn_mask
    if mask is not None:
        if mask.dtype == np.bool_:
            seen.add("bool mask")
        else:
            seen.add("float mask")
            if (np.isfinite(mask) & (mask != 0)).any():
                seen.add("finite non-zero bias")
            if np.isneginf(mask).any():
                seen.add("-inf in float mask")
        if mask.ndim == 4 and mask.shape[0] > 1 and not (mask == mask[:1]).all():
            seen.add("mask differs per batch element")
        if mask.ndim == 2 and B == mask.shape[0] == Tq > 1 and not (mask == mask[:1]).all():
            seen.add(KEY_PADDING_SHAPED)
    for x in (q, k, v):
        if (x == 0).any():
            seen.add("exact zeros")
        if (x < 0).any():
            seen.add("negative values")
    scores = _scores(case)
    limit = 709.0 if case.dtype == np.float64 else 88.0
    if np.abs(scores).max() > limit:
        seen.add("scores beyond exp's range")
    sorted_rows = np.sort(scores, axis=-1)
    if Tk > 1 and (np.diff(sorted_rows, axis=-1) == 0).any():
        seen.add("score ties")
    return seen


REQUIRED = {
    "dtype float16",
    "dtype float32",
    "dtype float64",
    *(f"mask layout {name}" for name in MASK_LAYOUTS),
    "values unit",
    "values ties",
    "values large",
    "2-D inputs",
    "4-D inputs",
    "GQA: Hkv > 1 and group > 1",
    "MQA: Hkv = 1 < Hq",
    "MHA: Hq = Hkv > 1",
    "batch > 1",
    "Tq < Tk",
    "Tq > Tk",
    "Tq = Tk",
    "decode Tq = 1",
    "Tk = 1",
    "D != Dv",
    "query_start None",
    "query_start strictly inside (0, Tk - Tq)",
    "query_start 0",
    "causal",
    "causal AND mask",
    "explicit scale",
    "bool mask",
    "float mask",
    "finite non-zero bias",
    "-inf in float mask",
    "mask differs per batch element",
    "exact zeros",
    "negative values",
    "scores beyond exp's range",
    "score ties",
}


def test_attention_cases_cover_every_axis():
    """Over 460 draws (400 pooled 4-D and 60 2-D), every feature in REQUIRED occurs at least
    once (the 2-D draws are needed only for "2-D inputs", which every one of them has)."""
    seen: Counter = Counter()
    for case in _drawn_cases():
        seen.update(features(case))

    @settings(DRAWS, max_examples=60)
    @given(case=attention_cases(two_d=True))
    def collect_2d(case):
        seen.update(features(case))

    collect_2d()
    missing = sorted(REQUIRED - set(seen))
    assert not missing, f"never drawn: {missing}; drawn: {dict(seen)}"


def test_two_d_mask_layout_draws_batch_equal_to_query_len():
    """The (Tq, Tk) layout that test_broadcast_mask_equals_expanded draws reaches B == Tq > 1
    with rows that differ (the shape of a (B, Tk) key-padding mask) in at least 1 of 40 of 8
    pooled runs of 25 draws. Measured (coverage_rates, Hypothesis 6.170.27): 3.9 of 25 per
    run on average (sd 2.7; 3 of 100 runs had none); resampling those runs, 8 of them summed
    to fewer than 5 in none of 200 000 trials (the least: 8)."""
    cases = pooled_draws(attention_cases(two_d=False, mask_layouts=("(Tq, Tk)",)), runs=8)
    hits = [KEY_PADDING_SHAPED in features(case) for case in cases]
    assert sum(hits) >= len(hits) // 40, f"{sum(hits)} of {len(hits)} draws"


def test_valid_cases_never_have_fully_masked_rows():
    """attention_cases only draws valid calls: every query row sees a key."""
    for case in _drawn_cases():
        problem = check_attention_inputs(
            case.query, case.key, case.value, **case.kwargs(), fully_masked_rows="zeros"
        )
        assert problem.visible.any(axis=-1).all(), case.describe()


def test_fully_masked_cases_always_have_an_empty_row():
    """fully_masked_cases always hides every key from at least one query row, by each of its
    three routes (row, key padding, causal + mask)."""
    routes: Counter = Counter()

    @settings(DRAWS, max_examples=100)
    @given(case=fully_masked_cases())
    def check(case):
        problem = check_attention_inputs(
            case.query, case.key, case.value, **case.kwargs(), fully_masked_rows="zeros"
        )
        assert (~problem.visible.any(axis=-1)).any(), case.describe()
        routes[case.mask_layout.split("(")[1].split(",")[0]] += 1

    check()
    assert set(routes) == {"row", "key padding", "causal"}, routes


@pytest.mark.parametrize("kind", sorted(INVALID_KINDS))
def test_invalid_cases_break_their_rule(kind):
    """invalid_cases(kinds=(kind,)) draws that kind, and the rulebook (the oracle) rejects
    every such call with an AttentionInputError: the rejection property tests real errors."""

    @settings(DRAWS, max_examples=15)
    @given(bad=invalid_cases(kinds=(kind,)))
    def check(bad):
        assert bad.kind == kind
        with pytest.raises(AttentionInputError):
            oracle.attention(bad.query, bad.key, bad.value, **bad.kwargs)

    check()
