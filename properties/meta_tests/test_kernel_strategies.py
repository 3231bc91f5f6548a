"""The kernel-sized strategies reach tile boundaries, stay in budget and shrink to a boundary."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import find
from hypothesis import given
from hypothesis import settings

from attnprops.properties._support import visibility
from attnprops.properties.kernel_cases import kernel_specs
from attnprops.properties.kernel_spec import MASK_KINDS
from attnprops.properties.kernel_spec import KernelSpec
from attnprops.properties.reference_rows import boundary_rows
from attnprops.properties.sizes import LEN_ENV_VAR
from attnprops.properties.sizes import LIMITS
from attnprops.properties.sizes import TILES
from attnprops.properties.sizes import boundary_sizes
from attnprops.properties.sizes import capacity
from attnprops.properties.sizes import capacity_sizes
from attnprops.properties.sizes import limits
from attnprops.properties.sizes import primes_up_to


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


def test_capacity_sizes_are_the_largest_power_of_two_and_one_past_it():
    """Each profile's decode length holds its capacity and one key past it (dev 2048/2049, ci
    8192/8193, thorough 16384/16385); a fault past the capacity shrinks to ``P + 1``."""
    for name, cap in (("ci", 8192), ("thorough", 16384), ("dev", 2048)):
        assert capacity(LIMITS[name].max_decode_len) == cap, name
    assert (capacity(256), capacity(257), capacity(8193)) == (None, 256, 8192)
    limit = LIMITS["ci"].max_decode_len
    found = find(capacity_sizes(limit), lambda n: n > 8192, settings=settings(database=None))
    assert found == 8193
    assert find(capacity_sizes(limit), lambda n: True, settings=settings(database=None)) == 8192


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

    @settings(max_examples=40, derandomize=True, database=None)
    @given(spec=kernel_specs(shapes=("decode", "chunk")))
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
