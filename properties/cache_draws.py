"""Draws shared by the cache properties (the contiguous, rolling and quantized caches): the
arrays of a causal self-attention run and its split into appended chunks. Each shrinks
towards one sequence, one K/V head, dims of 1 and a single chunk."""

from __future__ import annotations

from hypothesis import strategies as st

from attnprops.properties.strategies import values

__all__ = ["append_chunks", "run_arrays"]


@st.composite
def run_arrays(draw, total: int, dtype, magnitude: str, *, max_kv_heads: int, max_dim: int):
    """``(q, k, v)`` of ``total`` positions in ``dtype`` and value regime ``magnitude``: 1-2
    sequences, 1-``max_kv_heads`` K/V heads, groups of 1-2 query heads (MHA and GQA), head and
    value dims 1-``max_dim`` (drawn apart, so ``Dv != D`` shows)."""
    batch, kv_heads, group = (
        draw(st.integers(1, 2)),
        draw(st.integers(1, max_kv_heads)),
        draw(st.integers(1, 2)),
    )
    heads = kv_heads * group
    head_dim, value_dim = draw(st.integers(1, max_dim)), draw(st.integers(1, max_dim))
    name = dtype.name
    q = draw(values((batch, heads, total, head_dim), name, magnitude))
    k = draw(values((batch, kv_heads, total, head_dim), name, magnitude))
    v = draw(values((batch, kv_heads, total, value_dim), name, magnitude))
    return q, k, v


@st.composite
def append_chunks(draw, total: int) -> list[int]:
    """Sizes of the appends that cover ``total`` positions in order: all ones (token by token)
    half the time, else each drawn from 1 to what is left."""
    token_by_token = draw(st.booleans())
    chunks, left = [], total
    while left:
        n = 1 if token_by_token else draw(st.integers(1, left))
        chunks.append(n)
        left -= n
    return chunks
