"""Draws of ``attn_mask``: a named layout (the quick reference's table) or any shape that
broadcasts to the scores, bool or float (finite biases and ``-inf``), with one visible key
kept in every row (drawn, so it shrinks to key 0) within the causal limit of every query
that row serves. Used by :func:`properties.strategies.attention_cases`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attnprops.properties.sizes import cached_strategy

if TYPE_CHECKING:
    from attnprops.properties.strategies import Dims

__all__ = ["MASK_LAYOUTS", "masks"]

# Named mask layouts (the quick reference's table) plus any other broadcastable shape.
MASK_LAYOUTS = (
    "none",
    "(Tq, Tk)",
    "(1, 1, Tq, Tk)",
    "key padding (B, 1, 1, Tk)",
    "query-specific (B, 1, Tq, Tk)",
    "per-head (B, Hq, Tq, Tk)",
    "other broadcastable",
)


@cached_strategy
@st.composite
def _mask_shape(draw, layout: str, d: Dims) -> tuple[int, ...]:
    B, Hq, Tq, Tk = d.batch, d.num_heads, d.query_len, d.key_len
    target = (B, Hq, Tq, Tk)
    named = {
        "(Tq, Tk)": (Tq, Tk),
        "(1, 1, Tq, Tk)": (1, 1, Tq, Tk),
        "key padding (B, 1, 1, Tk)": (B, 1, 1, Tk),
        "query-specific (B, 1, Tq, Tk)": (B, 1, Tq, Tk),
        "per-head (B, Hq, Tq, Tk)": target,
    }
    if layout in named:
        return named[layout]
    shape = draw(hnp.broadcastable_shapes(target, min_dims=1, max_dims=4))
    # keep only shapes that broadcast *to* the score shape (not beyond it)
    return tuple(s if s == t else 1 for s, t in zip(shape, target[len(target) - len(shape) :]))


def _visible_limit(d: Dims, is_causal: bool, start: int) -> np.ndarray:
    """Last key each local query may see under causality, ``(Tq,)`` (Tk-1 if not causal)."""
    rows = np.arange(d.query_len)
    return (
        np.minimum(start + rows, d.key_len - 1)
        if is_causal
        else np.full(d.query_len, d.key_len - 1)
    )


@cached_strategy
def _bool_arrays(shape: tuple[int, ...]):
    return hnp.arrays(np.bool_, shape)


@cached_strategy
def _bias_arrays(dtype: str, shape: tuple[int, ...]):
    """Additive biases: ``-inf`` or finite in ``[-8, 8]``."""
    bias = st.one_of(st.just(-np.inf), st.floats(-8, 8, width=np.dtype(dtype).itemsize * 8))
    return hnp.arrays(np.dtype(dtype), shape, elements=bias)


@cached_strategy
@st.composite
def masks(
    draw,
    d: Dims,
    *,
    is_causal: bool,
    start: int,
    float_masks: bool = True,
    layouts: tuple[str, ...] = MASK_LAYOUTS,
    two_d: bool = False,
):
    """A mask leaving every query row at least one visible key; returns ``(mask, layout)``.

    ``layouts``: the names in :data:`MASK_LAYOUTS` to draw from (2-D inputs only take
    ``none``, ``(Tq, Tk)`` and ``other broadcastable`` among them).
    Bool masks: True = may attend. Float masks: finite biases in ``[-8, 8]`` (ALiBi-like) and
    ``-inf``. After drawing, each row gets one *anchor* key (drawn, so it shrinks to key 0)
    that is forced visible and causally allowed, so no row is fully masked.
    """
    unknown = set(layouts) - set(MASK_LAYOUTS)
    if unknown:
        raise ValueError(f"layouts: unknown mask layouts {sorted(unknown)}; known: {MASK_LAYOUTS}")
    if two_d:
        layouts = tuple(n for n in layouts if n in ("none", "(Tq, Tk)", "other broadcastable"))
    if not layouts:
        raise ValueError("layouts: no mask layout left to draw")
    layout = draw(st.sampled_from(layouts))
    if layout == "none":
        return None, layout
    shape = draw(_mask_shape(layout, d))
    if two_d:
        shape = shape[-2:]
    kind = draw(st.sampled_from(["bool", "float"])) if float_masks else "bool"
    if kind == "bool":
        mask = draw(_bool_arrays(shape))
    else:
        dtype = draw(st.sampled_from(["float64", "float32", "float16"]))
        mask = draw(_bias_arrays(dtype, shape))
    # Anchors: one visible key per (broadcast) row, within the causal limit of every query
    # that row serves.
    limit = _visible_limit(d, is_causal, start)
    expanded_rows = shape[-2] if len(shape) >= 2 else 1
    lead = shape[:-2] if len(shape) >= 2 else ()
    for index in np.ndindex(*lead) if lead else [()]:
        for r in range(expanded_rows):
            served_limit = int(limit.min()) if expanded_rows == 1 else int(limit[r])
            anchor = draw(st.integers(0, served_limit))
            if shape[-1] == 1:
                anchor = 0
            position = index + ((r,) if len(shape) >= 2 else ()) + (anchor,)
            mask[position] = True if kind == "bool" else 0.0
    return mask, layout
