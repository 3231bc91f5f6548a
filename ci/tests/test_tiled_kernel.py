"""The tiled kernel the kernel-kind mutants build on is right when unmutated, and each of those
mutants is exactly impl below its threshold."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from attnprops import impl
from attnprops.mutants._tiled import TiledKernel
from attnprops.oracle import ball
from attnprops.oracle.rules import compute_dtype
from attnprops.properties._support import visibility
from attnprops.properties.agreement_bounds import agreement_bounds
from attnprops.properties.bounds import lse_bounds
from attnprops.properties.kernel_cases import kernel_specs

KERNEL_MUTANTS = (
    "tiled_last_key_tile_dropped",
    "split_kv_sink_in_every_split",
    "split_kv_merge_not_rescaled",
    "causal_tile_skip_off_by_one",
    "head_dim_tail_chunk_dropped",
    "decode_split_remainder_dropped",
    "gqa_large_group_head_interleaved",
    "split_kv_lse_without_the_rescale",
    "chunk_tile_keys_end_at_its_first_rows_chunk_end",
)


class _Small(TiledKernel):
    """Every path of the kernel on small calls: odd tiles, splits and head-dim chunks."""

    q_tile, k_tile, split_kv, d_chunk = 7, 5, 11, 3


_SMALL_SIZES = dict(
    dtypes=impl.ATTNPROPS_CAPABILITIES["dtypes"], max_len=40, max_decode_len=60, max_scores=1 << 14
)


@settings(max_examples=40, deadline=None, database=None)
@given(
    spec=st.one_of(
        kernel_specs(**_SMALL_SIZES),
        kernel_specs(**_SMALL_SIZES, windows="offsets"),
        kernel_specs(**_SMALL_SIZES, documents=True),
        kernel_specs(**_SMALL_SIZES, chunks=True),
    ),
    sinks=st.booleans(),
)
def test_unmutated_kernel_agrees_with_impl(spec, sinks):
    """Within twice the agreement bound (both are within their bound of the exact result),
    with sinks or without, and with a local window, packed documents (what
    TILED_CAPABILITIES declares beside them) or chunks (what the chunk mutants add)."""
    spec = spec._replace(sinks=sinks)
    case = spec.build()
    got = _Small().attention(case.query, case.key, case.value, **case.kwargs())
    want = impl.attention(case.query, case.key, case.value, **case.kwargs())
    assert got.dtype == want.dtype and got.shape == want.shape
    with np.errstate(over="ignore"):
        bound = 2 * agreement_bounds(case, visibility(case))
    assert (np.abs(got.astype(np.float64) - want) <= bound).all()
    _, lse = _Small().attention(case.query, case.key, case.value, **case.kwargs(), return_lse=True)
    exact = ball.attention_parts(case.query, case.key, case.value, **case.kwargs(), lse=True)
    assert lse.dtype == compute_dtype(case.dtype) and lse.shape == exact.lse.value.shape
    error = np.abs(np.where(np.isfinite(exact.lse.value), lse - exact.lse.value, 0.0))
    assert (error <= lse_bounds(case, exact)).all()  # the lse within its bound


@pytest.mark.parametrize("name", KERNEL_MUTANTS + ("cache_growth_drops_last_position",))
@settings(max_examples=15, deadline=None, database=None)
@given(
    spec=st.one_of(
        kernel_specs(max_len=32, max_decode_len=32, max_scores=1 << 12),
        kernel_specs(max_len=32, max_decode_len=32, max_scores=1 << 12, chunks=True),
    ),
    chunks=st.lists(st.integers(1, 8), min_size=1, max_size=4),
)
def test_kernel_mutants_are_impl_below_their_thresholds(name, spec, chunks):
    """Small calls (at most 32 queries and keys, head dims up to 64 or 3-fold GQA, chunked
    attention among them) give impl's result bitwise, through attention and through a
    cache."""
    spec = spec._replace(num_heads=spec.num_kv_heads * min(3, spec.num_heads // spec.num_kv_heads))
    if spec.head_dim > 64 or spec.value_dim > 64:
        spec = spec._replace(head_dim=min(spec.head_dim, 64), value_dim=min(spec.value_dim, 64))
    mutant = importlib.import_module(f"attnprops.mutants.{name}")
    case = spec.build()
    got = mutant.attention(case.query, case.key, case.value, **case.kwargs())
    np.testing.assert_array_equal(
        got, impl.attention(case.query, case.key, case.value, **case.kwargs()), strict=True
    )
    B, Hkv, T, D = case.key.shape
    caches = [m.KVCache(B, Hkv, D, case.value.shape[3], dtype=case.dtype) for m in (mutant, impl)]
    start = 0
    for n in chunks:  # cached queries: the first rows of case.query, as many as appended
        rows = slice(start, min(T, start + n))
        if rows.start >= T or rows.stop - rows.start > case.query.shape[2]:
            break
        args = (
            case.query[:, :, : rows.stop - rows.start],
            case.key[:, :, rows],
            case.value[:, :, rows],
        )
        outs = [m.cached_attention(*args, c) for m, c in zip((mutant, impl), caches)]
        np.testing.assert_array_equal(outs[0], outs[1], strict=True)
        start = rows.stop
