"""The kernel-sized strategies reach tile boundaries, stay in budget and shrink to a boundary."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import find
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from attnprops.properties._support import visibility
from attnprops.properties.kernel_cache_cases import rolling_cache_runs
from attnprops.properties.kernel_cases import kernel_specs
from attnprops.properties.kernel_cases import many_head_specs
from attnprops.properties.kernel_cases import per_head_mask_specs
from attnprops.properties.kernel_serving_cases import serving_batches
from attnprops.properties.kernel_spec import MASK_KINDS
from attnprops.properties.kernel_spec import PER_HEAD_MASK
from attnprops.properties.kernel_spec import KernelSpec
from attnprops.properties.meta_tests.test_strategy_coverage import pooled_draws
from attnprops.properties.reference_rows import boundary_heads
from attnprops.properties.reference_rows import boundary_rows
from attnprops.properties.reference_rows import heads_of
from attnprops.properties.sizes import LEN_ENV_VAR
from attnprops.properties.sizes import LIMITS
from attnprops.properties.sizes import TILES
from attnprops.properties.sizes import boundary_sizes
from attnprops.properties.sizes import capacity
from attnprops.properties.sizes import capacity_sizes
from attnprops.properties.sizes import describe_limits
from attnprops.properties.sizes import limits
from attnprops.properties.sizes import long_sizes
from attnprops.properties.sizes import past_powers
from attnprops.properties.sizes import primes_up_to
from attnprops.properties.subject import load_subject

CAUSAL = ("prefill", "chunk", "decode")


def test_boundary_rows_reach_tile_edges():
    """First and last rows, query-tile edges and (causal) the rows whose visible keys end at
    a key-tile edge are among the reference rows; never more than the limit."""
    spec = KernelSpec(
        "chunk", 1, 1, 1, 300, 1000, 8, 8, True, 77, "none", "float64", "unit", None, 0
    )
    rows = boundary_rows(spec.build(), limit=100)
    for row in (0, 299, 255, 256, 127, 128, 256 - 1 - 77, 256 - 77, 128 - 77):
        assert row in rows, (row, rows)
    assert len(boundary_rows(spec.build(), limit=5)) == 5


def test_sizes_hit_tile_multiples_and_their_neighbours():
    """Over 400 draws, sizes land on k*t-1, k*t and k*t+1 for every tile t, on primes, and
    on tiny sizes; none leaves the range."""
    seen = []

    @settings(max_examples=400, derandomize=True, database=None)
    @given(n=boundary_sizes(1100))
    def draw(n):
        seen.append(n)

    draw()
    assert all(1 <= n <= 1100 for n in seen)
    for t in TILES:
        for off in (-1, 0, 1):
            assert any(n % t == off % t and n > 8 for n in seen), (t, off)
    primes = set(primes_up_to(1100))
    assert sum(n in primes and n > 8 for n in seen) >= 20
    assert sum(n <= 8 for n in seen) >= 5


@pytest.mark.parametrize("threshold, tile", [(128, 64), (512, 256), (64, 16)])
def test_failing_size_shrinks_to_one_past_the_boundary(threshold, tile):
    """A fault at lengths past ``threshold`` that are not multiples of ``tile`` shrinks to
    the smallest such length, one past the boundary: ``threshold + 1``."""
    found = find(
        boundary_sizes(1100),
        lambda n: n > threshold and n % tile != 0,
        settings=settings(max_examples=2000, database=None),
    )
    assert found == threshold + 1


@pytest.mark.parametrize(
    "fails, shrunk",
    [
        (lambda n: n >= 600, 608),  # from 600 keys on: the next tile boundary
        (lambda n: n > 1000 and n % 80 != 0, 1008),  # past 1000 in a partial 80-key tile
        (lambda n: n > 2048, 2049),
    ],
    ids=["from 600", "partial 80-key tile past 1000", "past 2048"],
)
def test_long_sizes_shrink_to_the_boundary_wherever_found(fails, shrunk):
    """A fault of long sizes (ci's decode lengths, up to 8200) shrinks to the smallest
    boundary size that fails, not to where the long draws start (2049 before)."""
    for seed in range(3):  # random runs: the draw that first fails differs in each
        found = find(
            long_sizes(LIMITS["ci"].max_decode_len),
            fails,
            settings=settings(max_examples=300, database=None),
            random=random.Random(seed),
        )
        assert found == shrunk, (seed, found)


def test_capacity_sizes_are_the_largest_power_of_two_and_one_past_it():
    """Each profile's decode length holds its capacity and one key past it (dev 2048/2049, ci
    8192/8193, thorough 16384/16385); a fault past the capacity shrinks to ``P + 1``, one
    past a smaller capacity (1024, 4096) to one past that, any fault to 257; with
    ``beyond``, a capacity that is not a power of two to the first listed size past it."""
    for name, cap in (("ci", 8192), ("thorough", 16384), ("dev", 2048)):
        assert capacity(LIMITS[name].max_decode_len) == cap, name
    assert (capacity(256), capacity(257), capacity(8193)) == (None, 256, 8192)
    sizes = capacity_sizes(LIMITS["ci"].max_decode_len)
    for past, shrunk in ((8192, 8193), (8191, 8192), (4096, 4097), (1024, 1025), (0, 257)):
        assert find(sizes, lambda n: n > past, settings=settings(database=None)) == shrunk
    with pytest.raises(ValueError, match="power of two"):
        past_powers(1000)
    rings = past_powers(2048, beyond=3098)  # ci's rolling caches: past 2500 only at 3098
    for past, shrunk in ((2500, 3098), (2048, 2049), (1500, 2049), (512, 513)):
        assert find(rings, lambda n: n > past, settings=settings(database=None)) == shrunk
    with pytest.raises(ValueError, match="beyond"):
        past_powers(2048, beyond=2049)


def test_specs_stay_within_the_budget():
    """Every drawn spec keeps B*Hq*Tq*Tk and B*Hkv*Tk*(D+Dv) within the profile's limits,
    builds arrays of its sizes, and leaves every query row a visible key; every shape and
    mask kind is drawn, and GQA groups that are no power of two past 4 (5, 6, 7: a kernel
    that rounds a group up is wrong there)."""
    lim = limits("ci")
    kinds, masks, groups = set(), set(), set()

    @settings(max_examples=80, derandomize=True, database=None)
    @given(spec=kernel_specs())
    def check(spec):
        kinds.add(spec.shape)
        masks.add(spec.mask)
        groups.add(spec.num_heads // spec.num_kv_heads)
        assert spec.batch * spec.num_heads * spec.query_len * spec.key_len <= max(
            lim.max_scores, spec.query_len * spec.key_len
        )
        assert spec.batch * spec.num_kv_heads * spec.key_len * (
            spec.head_dim + spec.value_dim
        ) <= max(lim.max_kv, 2 * spec.batch * spec.num_kv_heads * spec.key_len)
        case = spec.build()
        assert case.query.shape == (spec.batch, spec.num_heads, spec.query_len, spec.head_dim)
        assert case.value.shape[-1] == spec.value_dim and case.dtype == np.dtype(spec.dtype)
        assert visibility(case).any(axis=-1).all(), spec  # no fully masked row

    check()
    assert kinds == {"prefill", "decode", "chunk", "cross"}
    assert masks == set(MASK_KINDS), masks
    assert groups & {5, 6, 7}, groups


def test_few_queries_are_drawn_in_decodes_and_chunks():
    """Decodes of more than 16 queries (a draft tree) and of one; chunks of one query at an
    explicit position below ``Tk - 1`` (a static cache's decode step), and chunks of more
    than 64 queries (a prefill's, past a query tile). Each shape drawn on its own, so the
    counts do not hang on how often the other shapes come."""
    seen = {"decode": set(), "chunk": set()}
    for shape in seen:  # 40 draws each (measured, random seeds: a chunk of one query at an
        # explicit position missed by 1 run in 30 of 40 chunks, by 1 in 5 of 40 mixed draws)

        @settings(max_examples=40, derandomize=True, database=None)
        @given(spec=kernel_specs(shapes=(shape,)))
        def check(spec):
            seen[spec.shape].add((spec.query_len, spec.start < spec.key_len - spec.query_len))

        check()
    decode = {tq for tq, _ in seen["decode"]}
    assert max(decode) > 16 and 1 in decode, decode
    assert (1, True) in seen["chunk"], seen["chunk"]
    assert max(tq for tq, _ in seen["chunk"]) > 64, seen["chunk"]


def test_env_var_raises_the_limits(monkeypatch):
    monkeypatch.setenv(LEN_ENV_VAR, "4096")
    raised = limits("ci")
    assert raised.max_len == 4096 and raised.max_scores > 10 * LIMITS["ci"].max_scores
    # what a run's header says: the raised length, so that one can see it applied
    assert describe_limits(raised).startswith("prefill/cross Tq, Tk <= 4096, decode Tk <= 8200")
    from attnprops.properties import plugin

    assert plugin._collected(3)["kernel_sizes"] == describe_limits(limits())
    monkeypatch.setenv(LEN_ENV_VAR, "ten")
    with pytest.raises(ValueError, match=f"{LEN_ENV_VAR}='ten'"):
        limits("ci")


def test_raised_lengths_give_every_profile_the_same_budgets(monkeypatch):
    """A raised length brings budgets that depend on the lengths alone, so dev's (small
    base length) are not larger than thorough's."""
    monkeypatch.setenv(LEN_ENV_VAR, "4096")
    dev, ci, thorough = limits("dev"), limits("ci"), limits("thorough")
    assert dev.max_scores == ci.max_scores == thorough.max_scores == 2 * 4096**2
    assert dev.max_appends == ci.max_appends == 4096 < thorough.max_appends
    assert dev.max_decode_len == LIMITS["dev"].max_decode_len  # never lowered, only raised


def test_small_limit_still_draws(monkeypatch):
    """boundary_sizes works below the smallest tile (no tile multiple fits)."""
    values = [find(boundary_sizes(5), lambda n: n >= k) for k in (1, 5)]
    assert values == [1, 5]
    with pytest.raises(ValueError, match="min_size=3, max_size=2"):
        boundary_sizes(2, min_size=3)


def test_readme_size_table_states_the_limits():
    """The README's table of largest sizes per profile is LIMITS (one home: sizes.py) and
    the kernel example counts (profiles.costly_examples)."""
    from pathlib import Path

    from hypothesis import settings as hsettings

    from attnprops.properties.profiles import costly_examples

    text = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[0].startswith("`") and cells[1].replace(",", "").isdigit():
            rows[cells[0].split("`")[1]] = [int(c.replace(",", "")) for c in cells[1:]]
    assert set(rows) == {"dev", "ci", "thorough"}, rows
    for name, numbers in rows.items():
        examples = costly_examples("kernel_sized", hsettings.get_profile(name).max_examples)
        assert numbers == [*LIMITS[name], examples], (name, numbers, LIMITS[name])


def test_a_kernel_sized_quantized_run_prints_as_its_spec():
    """A kernel-sized quantized run prints (repr, falsifying example) as its spec (sizes,
    seed), storage, exact scales and appends, a few kB, from which the run is rebuilt: as a
    plain QuantizedRun it prints its arrays (NumPy's summaries; about 90 kB with 8 heads)."""
    from hypothesis import Phase
    from hypothesis.vendor.pretty import pretty

    from attnprops.properties.quantized_cases import KernelQuantizedRun
    from attnprops.properties.quantized_cases import QuantizedRun
    from attnprops.properties.quantized_cases import kernel_quantized_runs
    from attnprops.properties.subject import load_subject

    spec = KernelSpec(
        "prefill", 1, 2, 2, 1000, 1000, 64, 64, True, None, "none", "float32", "unit", None, 7
    )
    scales = np.array([0.01, 1 / 3], np.float32)
    parts = (spec.build(), "float8_e4m3fn", scales, scales, (1,) * 500 + (500,), spec)
    text = pretty(KernelQuantizedRun(*parts))
    assert text == repr(KernelQuantizedRun(*parts))
    assert text.startswith("KernelQuantizedRun(spec=KernelSpec(shape='prefill'"), text
    assert "key_len=1000" in text and "seed=7" in text and "array(" not in text
    assert f"chunks={(1,) * 500 + (500,)!r})" in text and len(text) < 4000, text
    printed = text[text.index("key_scale=[") + 11 :].split("]")[0].split(", ")
    assert np.array_equal(np.array(printed, np.float32), scales)  # exact, from the text
    assert len(pretty(QuantizedRun(*parts))) > 2 * len(text)

    @settings(max_examples=2, phases=[Phase.generate], database=None, derandomize=True)
    @given(run=kernel_quantized_runs(load_subject("attnprops.impl")))
    def drawn(run):  # the strategy's runs are such runs, their spec the case's
        assert isinstance(run, KernelQuantizedRun)
        assert run.spec.build().key.shape == run.case.key.shape

    drawn()


def test_rolling_capacities_pass_a_power_of_two_and_reach_past_2048():
    """A rolling cache run's capacity is at most ``T - 2`` (the ring fills and wraps), and
    among 8 ci draws (as many as the property's examples; for impl's capabilities and for a
    subject without a window, which draw differently) are capacities of a third of ``T`` or
    less and 2049 (one slot past the power of two a ring index ``t & 2047`` wraps at) with
    ``T >= 2051``, within the K/V budget; for impl also the largest ring a ci run fills,
    3098 (past a ring index that wraps at any size up to 3097, 2500 say). Measured over 40
    random runs of 8 draws each: no such ring in 0 of 40 for impl's capabilities, in 2 of 40
    for the mutant's (its derandomized 8 are one of those: it dies at 2049)."""
    lim = limits("ci")
    for name in ("attnprops.impl", "attnprops.mutants.rolling_cache_ring_index_wraps_at_2048"):
        subject = load_subject(name)
        seen = []

        @settings(max_examples=8, derandomize=True, database=None)
        @given(run=rolling_cache_runs(subject))
        def check(run):
            spec, _, _, cap = run
            T = spec.key_len
            assert 1 <= cap <= max(1, T - 2) and T <= lim.max_appends, (cap, T)
            assert spec.window is not None and spec.window[0] <= cap, spec.window
            kv = spec.batch * spec.num_kv_heads * T * (spec.head_dim + spec.value_dim)
            assert kv <= max(lim.max_kv, 2 * spec.batch * spec.num_kv_heads * T)
            seen.append((cap, T))

        check()
        assert any(cap <= T // 3 for cap, T in seen), (name, seen)
        assert any(cap == 2049 and T >= 2051 for cap, T in seen), (name, seen)
        if name == "attnprops.impl":
            assert any(cap == lim.max_appends - 2 for cap, T in seen), (name, seen)


def test_many_head_specs_pass_16_query_heads_within_budget():
    """The many-heads property draws 17 to 128 query heads, a multiple of its 1, 2, 4 or 8
    K/V heads or one K/V head each, within the ci budgets, with sinks, masks of their own per
    (batch, head), and ``(B, Hq)`` ALiBi slopes of more than 64 entries (impl declares every
    variant); a fault from 17 query heads on shrinks to 17 over one K/V head."""
    lim = limits("ci")
    subject = load_subject("attnprops.impl")
    kv_heads, seen = set(), set()
    # four independent runs of 15 draws (pooled_draws): one run's draws are alike, so a rate
    # of about 1 in 8 (a per-head mask with B > 1) was missed by 3 of 20 random runs of 100
    # draws, by none of 20 pooled sets of 4 x 15
    for spec in pooled_draws(many_head_specs(subject), 4, 15):
        assert 17 <= spec.num_heads <= 128 and spec.num_heads % spec.num_kv_heads == 0
        assert spec.batch * spec.num_heads * spec.query_len * spec.key_len <= lim.max_scores
        kv = spec.batch * spec.num_kv_heads * spec.key_len * (spec.head_dim + spec.value_dim)
        assert kv <= max(lim.max_kv, 2 * spec.batch * spec.num_kv_heads * spec.key_len)
        case = spec.build()
        assert case.query.shape[1] == spec.num_heads and case.key.shape[1] == spec.num_kv_heads
        assert visibility(case).any(axis=-1).all(), spec
        kv_heads.add(spec.num_kv_heads if spec.num_kv_heads <= 8 else "Hq")
        seen.update(name for name in ("sinks", "alibi") if getattr(spec, name))
        if spec.mask == PER_HEAD_MASK and spec.batch > 1:
            seen.add("per-(batch, head) mask")
        if spec.batch_slopes and spec.batch * spec.num_heads > 64:
            seen.add("(B, Hq) slopes past 64")
    assert {1, "Hq"} <= kv_heads and len(kv_heads) >= 4, kv_heads  # MQA, GQA and MHA
    assert seen == {"sinks", "alibi", "per-(batch, head) mask", "(B, Hq) slopes past 64"}, seen
    found = find(many_head_specs(subject), lambda s: True, settings=settings(database=None))
    assert (found.num_heads, found.num_kv_heads) == (17, 1)


def test_documents_meet_windows_at_kernel_sizes():
    """The kernel-sized documents property's draws (impl: every variant declared) put a
    window that hides keys of a query's own document on some of its rows, among 40 draws."""
    seen = 0

    @settings(max_examples=40, derandomize=True, database=None)
    @given(spec=kernel_specs(shapes=CAUSAL, documents=True, windows="offsets"))
    def check(spec):
        nonlocal seen
        case = spec.build()
        with_window = visibility(case)
        without = visibility(case._replace(window=None))
        seen += bool(spec.documents) and bool((without & ~with_window).any())

    check()
    assert seen >= 5, seen


def test_boundary_heads_are_the_heads_next_to_16_32_64_and_the_ends():
    assert boundary_heads(17) == [0, 15, 16]
    assert boundary_heads(40) == [0, 15, 16, 31, 32, 39]
    assert boundary_heads(128) == [0, 15, 16, 31, 32, 63, 64, 127]
    assert boundary_heads(1) == [0]


def test_heads_of_gives_those_heads_outputs():
    """A case cut to some query heads (GQA of 4 over 2 K/V heads, a per-head mask, sinks,
    ``(B, Hq)`` ALiBi slopes) gives exactly impl's outputs of those heads on the whole case:
    each head keeps its own K/V head, mask slice, sink and slope."""
    from attnprops import impl

    rng = np.random.default_rng(7)
    B, Hq, Hkv, T, D = 2, 8, 2, 5, 3
    q, k, v = (rng.standard_normal(s) for s in ((B, Hq, T, D), (B, Hkv, T, D), (B, Hkv, T, D)))
    mask = rng.random((B, Hq, T, T)) < 0.7
    mask[..., 0] = True
    case = KernelSpec(
        "prefill", B, Hq, Hkv, T, T, D, D, False, None, "none", "float64", "unit", None, 0
    ).build()
    case = case._replace(
        query=q,
        key=k,
        value=v,
        attn_mask=mask,
        sinks=rng.standard_normal(Hq),
        alibi_slopes=rng.random((B, Hq)),
    )
    heads = [7, 0, 5]
    whole = impl.attention(case.query, case.key, case.value, **case.kwargs())
    cut = heads_of(case, heads)
    assert cut.query.shape[1] == cut.key.shape[1] == 3
    part = impl.attention(cut.query, cut.key, cut.value, **cut.kwargs())
    np.testing.assert_array_equal(part, whole[:, heads])


def test_per_head_mask_specs_give_each_batch_element_and_head_its_own_mask():
    """The per-(batch, head) mask draws: a ``(B, Hq, Tq, Tk)`` bool mask within the ci
    budgets, two batch elements and two or more heads in most draws (every shape kind among
    them), and the masks of two pairs differ; no row is fully masked."""
    lim = limits("ci")
    subject = load_subject("attnprops.impl")
    both, kinds = 0, set()

    @settings(max_examples=40, derandomize=True, database=None)
    @given(spec=per_head_mask_specs(subject))
    def check(spec):
        nonlocal both
        assert spec.batch * spec.num_heads * spec.query_len * spec.key_len <= max(
            lim.max_scores, spec.query_len * spec.key_len
        )
        case = spec.build()
        mask = case.attn_mask
        assert mask.shape == (spec.batch, spec.num_heads, spec.query_len, spec.key_len)
        assert visibility(case).any(axis=-1).all(), spec
        if spec.batch > 1 and spec.num_heads > 1:
            both += 1
            kinds.add(spec.shape)
            if spec.query_len * spec.key_len > 64:  # (one key: every mask is that key)
                assert not np.array_equal(mask[0, 1], mask[1, 0]), spec

    check()
    assert both >= 20 and kinds == set(CAUSAL) | {"cross"}, (both, kinds)


def test_documents_alibi_and_serving_calls_reach_their_rarer_combinations():
    """Among 100 draws: packed documents over three or four batch elements whose rows of
    key ids differ from one another (a row index that wraps at 2 reads another packing);
    among 40: ALiBi with a visible key after its query (a prefill or chunk not causal: a
    signed distance goes wrong there); and among 20, ragged serving batches that are not
    causal (the lengths alone then hide the storage past them). (The documents' count in
    so few derandomized draws is chance: measured 14 in 40 draws and 1 in 50, and after one
    more choice in a decode's draws, 2 in 40 and 16 in 50; 9 in 100.)"""
    counts = {"documents": 0, "alibi": 0, "serving": 0}

    @settings(max_examples=100, derandomize=True, database=None)
    @given(spec=kernel_specs(shapes=CAUSAL, documents=True))
    def documents(spec):
        ids = spec.segment_ids()
        rows = ids[1][1:] if spec.batch_documents else ()
        counts["documents"] += spec.batch > 2 and len({r.tobytes() for r in rows}) == len(rows)

    @settings(max_examples=40, derandomize=True, database=None)
    @given(spec=kernel_specs(shapes=CAUSAL, alibi=True))
    def alibi(spec):
        case = spec.build()
        after = np.arange(spec.key_len) > spec.start + np.arange(spec.query_len)[:, None]
        counts["alibi"] += spec.alibi and bool((visibility(case) & after).any())

    @settings(max_examples=20, derandomize=True, database=None)
    @given(batch=serving_batches(load_subject("attnprops.impl"), paged=False))
    def serving(batch):
        counts["serving"] += not batch.spec.is_causal

    for check in (documents, alibi, serving):
        check()
    assert min(counts.values()) >= 3, counts


def test_matches_reference_also_in_holds_each_dtype_to_one_exact_result(monkeypatch):
    """``matches_reference(also_in=...)`` runs the spec's call in each dtype with the same
    values, each held to its own bounds: a subject wrong in float16 only (as a bfloat16 or
    float16 kernel of its own) passes the spec's bfloat16 call and fails the float16 one.
    ``exactly_in`` refuses a dtype that does not hold every entry, and one computed in
    another dtype (the shared exact result would not be the call's)."""
    import sys
    import types

    from attnprops import impl
    from attnprops.properties.checks import PropertyViolation
    from attnprops.properties.kernel_checks import exactly_in
    from attnprops.properties.kernel_checks import matches_reference

    seen = []

    def attention(query, key, value, **kwargs):
        seen.append((str(query.dtype), key.astype(np.float64).sum()))
        out = impl.attention(query, key, value, **kwargs)
        return out * out.dtype.type(1.01) if query.dtype == np.float16 else out

    module = types.ModuleType("float16_wrong_subject")
    module.attention = attention
    module.ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES
    monkeypatch.setitem(sys.modules, module.__name__, module)
    subject = load_subject(module.__name__)
    spec = KernelSpec(
        "decode", 1, 2, 1, 1, 300, 8, 8, True, None, "none", "bfloat16", "positive", None, 0
    )

    def check(also_in):  # matches_reference notes what it checks: in a Hypothesis test
        @settings(max_examples=1, database=None, deadline=None)
        @given(st.just(spec))
        def run(spec):
            matches_reference(subject, spec, also_in=also_in)

        run()

    check(())  # bfloat16 alone: right
    with pytest.raises(PropertyViolation, match="float16"):
        check(("float16",))
    # the bfloat16 call, then (Hypothesis runs the failing example again) bfloat16, float16
    assert [d for d, _ in seen[:3]] == ["bfloat16", "bfloat16", "float16"]
    assert seen[1][1] == seen[2][1]  # the same keys, exactly
    case = spec.build()
    assert exactly_in(case, "float16").query.dtype == np.float16
    sunk = spec._replace(sinks=True).build()  # the sinks go with the values
    assert exactly_in(sunk, "float16").sinks.dtype == np.float16
    with pytest.raises(ValueError, match="does not hold every query entry"):
        exactly_in(spec._replace(dtype="float32").build(), "float16")
    with pytest.raises(ValueError, match="computes in another dtype"):
        exactly_in(case, "float64")


def test_wide_head_specs_keep_the_profile_lengths(monkeypatch):
    """The wide heads' lengths, capped by their K/V budget, stay within the profile's
    lengths too: a raised decode length raises that budget, and prefill lengths went past
    ``ATTNPROPS_MAX_LEN`` (5567 for 4096, found by a review helper)."""
    from attnprops.properties.sizes import DECODE_ENV_VAR
    from attnprops.properties.test_kernel_wide_heads import wide_head_specs

    monkeypatch.setenv(LEN_ENV_VAR, "1500")
    monkeypatch.setenv(DECODE_ENV_VAR, "32768")
    lim = limits()
    longest = {"decode": lim.max_decode_len}
    drawn = []

    @settings(max_examples=100, database=None, deadline=None)
    @given(spec=wide_head_specs(load_subject("attnprops.impl")))
    def draw(spec):
        drawn.append(spec)
        assert max(spec.query_len, spec.key_len) <= longest.get(spec.shape, lim.max_len)

    draw()
    assert max(s.key_len for s in drawn if s.shape != "decode") > 1100  # past ci's 1100
