"""Hypothesis strategies for attention inputs, built on ``hypothesis.extra.numpy``.

Shape legend: B batch, Hq query heads, Hkv key/value heads (``Hq = Hkv * G``), Tq/Tk query/key
positions, D query/key head dim, Dv value head dim.

Every strategy shrinks towards the smallest case along each axis: B=1, Hkv=1, G=1 (plain
one-head attention), Tq=Tk=1, D=Dv=1, no mask, not causal, ``query_start=None``, default
scale, float64, small values. Sizes are bounded (the oracle computes at 50 digits in Python).

The drawn regions are themselves tested (``properties/meta_tests``): GQA with Hkv > 1 and
G > 1, MQA, Tq != Tk both ways, decode (Tq=1), ``query_start`` strictly inside ``(0, Tk-Tq)``,
masks of every broadcast shape, per-batch masks, finite additive biases, scores beyond
``exp``'s range, near-ties, exact zeros, float16/32/64 (and bfloat16 where asked), explicit
scales, fully masked rows.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attnprops.oracle.rules import BFLOAT16
from attnprops.properties import DEFAULT_DTYPES
from attnprops.properties.sizes import cached_strategy

# Value regimes. "large" makes |scores| exceed exp's range for every dtype (float64 exp
# overflows at ~709.8), so an implementation without max subtraction overflows.
MAGNITUDES = ("unit", "ties", "large")

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


_NONE_OR_SCALE = st.one_of(st.none(), st.floats(0.05, 4))


class AttentionCase(NamedTuple):
    """One valid attention call. ``case.kwargs()`` gives the keyword arguments."""

    query: np.ndarray  # (B, Hq, Tq, D) or (Tq, D)
    key: np.ndarray  # (B, Hkv, Tk, D) or (Tk, D)
    value: np.ndarray  # (B, Hkv, Tk, Dv) or (Tk, Dv)
    attn_mask: np.ndarray | None  # broadcastable to (B, Hq, Tq, Tk)
    is_causal: bool
    query_start: int | None
    scale: float | None
    mask_layout: str
    magnitude: str
    block_size: int | None = None  # keys per block for a blocked (online-softmax) subject
    window: tuple[int | None, int | None] | None = None  # local window (left, right)
    segment_ids: tuple[np.ndarray, np.ndarray] | None = None  # documents of queries, keys
    chunk_size: int | None = None  # chunked attention
    alibi_slopes: np.ndarray | None = None  # ALiBi, (Hq,) or (B, Hq)
    softcap: float | None = None  # c: scores become c tanh(s / c)
    sinks: np.ndarray | None = None  # one logit per query head, (Hq,), in the case's dtype

    def kwargs(self) -> dict:
        """The call's keyword arguments in the shared API (what the oracle takes too);
        ``window``, ``segment_ids``, ``chunk_size``, ``alibi_slopes``, ``softcap`` and
        ``sinks`` only when the case has them (a subject without them never gets them)."""
        kwargs = dict(
            attn_mask=self.attn_mask,
            is_causal=self.is_causal,
            query_start=self.query_start,
            scale=self.scale,
        )
        for name in ("window", "segment_ids", "chunk_size", "alibi_slopes", "softcap", "sinks"):
            if getattr(self, name) is not None:
                kwargs[name] = getattr(self, name)
        return kwargs

    def block_kwargs(self) -> dict:
        """``{"block_size": n}`` when the case was drawn for a blocked subject, else ``{}``."""
        return {} if self.block_size is None else {"block_size": self.block_size}

    def subject_kwargs(self) -> dict:
        """Keyword arguments for the subject's ``attention``: :meth:`kwargs` plus the block."""
        return {**self.kwargs(), **self.block_kwargs()}

    @property
    def dtype(self) -> np.dtype:
        return self.query.dtype

    @property
    def start(self) -> int:
        """The absolute position of the first query: ``query_start``, or ``Tk - Tq`` for
        None (the rulebook's convention; negative when ``Tq > Tk``)."""
        if self.query_start is not None:
            return self.query_start
        return self.key.shape[-2] - self.query.shape[-2]

    def describe(self) -> str:
        mask = (
            "None" if self.attn_mask is None else f"{self.attn_mask.dtype} {self.attn_mask.shape}"
        )
        return (
            f"query {self.query.shape} key {self.key.shape} value {self.value.shape} "
            f"{self.dtype}; attn_mask {mask} [{self.mask_layout}]; is_causal={self.is_causal} "
            f"query_start={self.query_start} scale={self.scale} values={self.magnitude}"
            + ("" if self.window is None else f" window={self.window}")
            + (
                ""
                if self.segment_ids is None
                else f" segment_ids=({self.segment_ids[0].tolist()}, "
                f"{self.segment_ids[1].tolist()})"
            )
            + ("" if self.chunk_size is None else f" chunk_size={self.chunk_size}")
            + ("" if self.alibi_slopes is None else f" alibi_slopes={self.alibi_slopes.tolist()}")
            + ("" if self.softcap is None else f" softcap={self.softcap}")
            + ("" if self.sinks is None else f" sinks={self.sinks.tolist()}")
            + ("" if self.block_size is None else f" block_size={self.block_size}")
        )


class Dims(NamedTuple):
    batch: int
    num_heads: int
    num_kv_heads: int
    query_len: int
    key_len: int
    head_dim: int
    value_dim: int

    @property
    def group(self) -> int:
        return self.num_heads // self.num_kv_heads


@cached_strategy
@st.composite
def dims(
    draw,
    *,
    max_batch=2,
    max_kv_heads=2,
    max_group=3,
    max_len=6,
    max_dim=5,
    causal_ok: bool = False,
    query_len: int | None = None,
) -> Dims:
    """Sizes with ``Hq % Hkv == 0``; with ``causal_ok`` also ``Tq <= Tk``.

    Defaults: B in [1, 2], Hkv in [1, 2], G in [1, 3] (so MHA, MQA and GQA), Tq, Tk in
    [1, 6], D, Dv in [1, 5]. ``query_len`` fixes Tq. Shrinks towards all ones.

    Tq is drawn equal to B about half the time (when B fits): with ``B == Tq`` a 2-D
    ``(Tq, Tk)`` mask has the shape of PyTorch's ``(B, Tk)`` key-padding mask, and code that
    dispatches on a mask's shape (``nn.MultiheadAttention`` takes both) reads one as the other.
    Uniform sizes make that coincidence too rare (about 1 draw in 12) to be found reliably.
    """
    batch = draw(st.integers(1, max_batch))
    num_kv_heads = draw(st.integers(1, max_kv_heads))
    group = draw(st.integers(1, max_group))
    key_len = draw(st.integers(1, max_len))
    if query_len is None:
        longest = key_len if causal_ok else max_len
        sizes = st.integers(1, longest)
        if 1 < batch <= longest:
            sizes = st.one_of(sizes, st.just(batch))
        query_len = draw(sizes)
    head_dim = draw(st.integers(1, max_dim))
    value_dim = draw(st.integers(1, max_dim))
    return Dims(batch, num_kv_heads * group, num_kv_heads, query_len, key_len, head_dim, value_dim)


def to_bfloat16(x: float) -> float:
    """``x`` rounded to the nearest bfloat16 (ties to even), as a float."""
    return float(np.float32(x).astype(BFLOAT16))


# bfloat16's ``large`` values pass float16's largest, 65504: a subject that stores bfloat16 in
# float16 overflows there (bfloat16 has float32's range, the reason it exists).
BFLOAT16_LARGE = 1e5


@cached_strategy
def _elements(dtype: str, magnitude: str):
    if np.dtype(dtype) == BFLOAT16:  # Hypothesis draws no bfloat16: float32, rounded
        if magnitude == "large":
            wide = st.floats(-BFLOAT16_LARGE, BFLOAT16_LARGE, width=32, allow_subnormal=False)
            return wide.map(to_bfloat16)
        return _elements("float32", magnitude).map(to_bfloat16)
    width = np.dtype(dtype).itemsize * 8
    if magnitude == "ties":
        # A coarse grid: exact zeros, exact ties between scores, negative values.
        return st.sampled_from([0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0])
    if magnitude == "large":
        return st.floats(-200, 200, width=width, allow_subnormal=False)
    return st.floats(-4, 4, width=width)


@cached_strategy
def values(shape, dtype: str, magnitude: str):
    """Arrays of ``shape``/``dtype`` in a value regime (``unit``, ``ties`` or ``large``)."""
    return hnp.arrays(np.dtype(dtype), shape, elements=_elements(dtype, magnitude))


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


def window_sides(max_side: int, sliding_window: bool = False):
    """The sides of a local window ``(left, right)`` (:func:`oracle.rules.check_window`):
    each an int in ``[0, max_side]`` (shrinks to 0: the query alone) or None (unbounded).
    ``sliding_window``: Hugging Face's convention, ``left`` an int and ``right`` None (its
    windows are causal, ``sliding_window = left + 1``)."""
    side = st.one_of(st.integers(0, max_side), st.none())
    if sliding_window:
        return st.tuples(st.integers(0, max_side), st.none())
    return st.tuples(side, side)


def fit_window(window, start: int):
    """``window`` with ``right`` raised to ``-start`` when the first query's position
    ``start`` is negative (``query_start=None`` with ``Tq > Tk``), so that every query's
    window reaches key 0; the strategies draw windows that leave no row without a key."""
    left, right = window
    if right is not None and start < 0:
        right = max(right, -start)
    return left, right


def anchor_in_window(mask: np.ndarray | None, start: int, Tq: int, Tk: int) -> None:
    """In place: make each query's own position (``start + i``, clipped to ``[0, Tk)``)
    visible in ``mask`` (True, or 0.0 for a float mask), in every broadcast row that serves
    it. That key is in every window (both sides >= 0; :func:`fit_window`) and causally
    visible, so a windowed case keeps a key in every row."""
    if mask is None:
        return
    keys = np.clip(start + np.arange(Tq), 0, Tk - 1)
    fill = True if mask.dtype == np.bool_ else 0.0
    if mask.shape[-1] == 1:  # one entry for every key: it must not hide
        if mask.dtype == np.bool_:
            mask[...] = True
        else:
            mask[np.isneginf(mask)] = 0.0
        return
    if mask.ndim >= 2 and mask.shape[-2] == Tq and Tq > 1:
        mask[..., np.arange(Tq), keys] = fill
    elif mask.ndim >= 2:
        mask[..., 0, keys] = fill
    else:
        mask[keys] = fill


@st.composite
def documents(draw, batch: int, Tq: int, Tk: int, start: int):
    """``segment_ids`` for packed documents: each key's document id, per batch element or
    one row for all (query and key ids choose apart, so ``(1, Tq)`` meets ``(B, Tk)``), or
    the 1-D form; non-decreasing with gaps (an id skipped is a document of length zero) or,
    a third of the time, any small id (FlexAttention allows documents that interleave).
    Each query gets the id of the key at its own position (clipped to ``[0, Tk)``) in every
    batch element, so every query has a key of its document at its position."""
    flat = draw(st.booleans()) and draw(st.booleans())  # the 1-D form, a quarter of the time
    rows_k = 1 if flat else draw(st.sampled_from([batch, 1]))
    rows_q = 1 if flat else draw(st.sampled_from([batch, 1]))
    keys = []
    for _ in range(rows_k):
        if draw(st.integers(0, 2)) == 0:
            ids = draw(hnp.arrays(np.int64, Tk, elements=st.integers(0, 3)))
        else:
            steps = draw(hnp.arrays(np.int64, Tk, elements=st.integers(0, 2)))
            ids = np.cumsum(steps) - steps[0]
        keys.append(ids)
    key_ids = np.stack(keys)  # (rows_k, Tk)
    own = np.clip(start + np.arange(Tq), 0, Tk - 1)  # each query's own key
    query_ids = np.broadcast_to(key_ids[:, own], (max(rows_q, rows_k), Tq))[:rows_q].copy()
    if rows_q == 1 and rows_k > 1:  # one row of query ids: every batch element's own key too
        key_ids[:, own] = query_ids[0]
    if flat:
        return query_ids[0], key_ids[0]
    return query_ids, key_ids


@st.composite
def alibi_slopes(draw, batch: int, num_heads: int):
    """ALiBi slopes, ``(Hq,)`` or ``(B, Hq)`` float64: Press et al.'s geometric
    ``2**(-8 k / Hq)``, ``k = 1 .. Hq`` (half the time), else any in ``[-2, 2]`` (a negative
    slope, a slope of 0, per batch element)."""
    if draw(st.booleans()):
        slopes = 2.0 ** (-8.0 * np.arange(1, num_heads + 1) / num_heads)
    else:
        shape = draw(st.sampled_from([(num_heads,), (batch, num_heads)]))
        slopes = draw(hnp.arrays(np.float64, shape, elements=st.floats(-2, 2, width=32)))
    return slopes


@st.composite
def attention_sinks(draw, num_heads: int, dtype):
    """Sink logits ``(Hq,)`` in ``dtype`` (:mod:`oracle.rules.sinks`): each ``-inf`` (no sink),
    near the scores (``[-8, 8]``), far above them (the sink takes nearly all the weight) or
    far below (``-100``: nothing), a third of the time one value for every head."""
    logit = st.one_of(
        st.just(-np.inf),
        st.floats(-8, 8, width=16),
        st.sampled_from([0.0, 30.0, -100.0]),
        st.floats(-300, 300, width=16),
    )
    if draw(st.integers(0, 2)) == 0:
        return np.full(num_heads, draw(logit), dtype=dtype)
    return np.array(draw(st.lists(logit, min_size=num_heads, max_size=num_heads)), dtype=dtype)


@st.composite
def rows_left_to_the_sink(draw, case: AttentionCase) -> AttentionCase:
    """``case`` (with sinks) with some query rows of heads whose sink is finite hiding every
    key (a bool mask, or ``-inf`` in the float mask, now full ``(B, Hq, Tq, Tk)``): the rows a
    sink makes valid, whose weights and output are 0. Unchanged when no head has a finite
    sink, or (a third of the time) drawn so."""
    finite = np.flatnonzero(np.isfinite(case.sinks))
    if not finite.size or draw(st.integers(0, 2)) == 0:
        return case
    B, Hq, Tq, _ = (1, 1) + case.query.shape if case.query.ndim == 2 else case.query.shape
    hidden = np.zeros((B, Hq, Tq), dtype=bool)
    for b, h, i in draw(
        st.lists(
            st.tuples(
                st.integers(0, B - 1), st.sampled_from(finite.tolist()), st.integers(0, Tq - 1)
            ),
            min_size=1,
            max_size=3,
        )
    ):
        hidden[b, h, i] = True
    return with_keys_hidden(case, hidden[..., None])  # (B, Hq, Tq, 1): whole rows


def with_keys_hidden(case: AttentionCase, hidden, layout: str | None = None) -> AttentionCase:
    """``case`` with the keys where ``hidden`` (bool, broadcastable to ``(B, Hq, Tq, Tk)``)
    is True hidden too: its mask made full, a bool one AND-ed with ``~hidden``, a float one
    ``-inf`` there (in its dtype); a 2-D case keeps a ``(Tq, Tk)`` mask. ``layout``: the mask
    layout to record (default: the full mask's)."""
    two_d = case.query.ndim == 2
    B, Hq, Tq, _ = (1, 1) + case.query.shape if two_d else case.query.shape
    shape = (B, Hq, Tq, case.key.shape[-2])
    hidden = np.broadcast_to(hidden, shape)
    mask = case.attn_mask
    if mask is not None and mask.dtype != np.bool_:
        full = np.where(hidden, -np.inf, np.broadcast_to(mask, shape)).astype(mask.dtype)
    else:
        full = np.broadcast_to(True if mask is None else mask, shape) & ~hidden
    if two_d:
        return case._replace(attn_mask=full[0, 0], mask_layout=layout or "(Tq, Tk)")
    return case._replace(attn_mask=full, mask_layout=layout or "per-head (B, Hq, Tq, Tk)")


@st.composite
def attention_cases(
    draw,
    *,
    dtypes=DEFAULT_DTYPES,
    magnitudes=MAGNITUDES,
    causal=None,
    masks_allowed: bool = True,
    float_masks: bool = True,
    mask_layouts: tuple[str, ...] = MASK_LAYOUTS,
    explicit_scale: bool = True,
    two_d: bool = False,
    block_sizes: bool = False,
    windows: str | None = None,
    packing: bool = False,
    alibi: bool = False,
    softcap: bool = False,
    sinks: bool = False,
    d: Dims | None = None,
    **dim_kwargs,
) -> AttentionCase:
    """A valid attention call: every query row sees at least one key.

    Args:
        dtypes: dtype names to draw from (shrinks towards the last, normally float64).
        magnitudes: value regimes (``unit``, ``ties``, ``large``).
        causal: force ``is_causal`` (None: drawn).
        masks_allowed / float_masks: allow masks / float additive masks.
        mask_layouts: the :data:`MASK_LAYOUTS` to draw (``"none"`` among them for no mask).
        explicit_scale: allow ``scale`` in ``[0.05, 4]`` besides the default ``None``.
        two_d: draw 2-D ``(T, D)`` inputs.
        block_sizes: also draw ``block_size`` (None, or 1 .. Tk + 1: blocks smaller than Tk,
            not dividing it, and larger than Tk) for subjects with a blocked path.
        windows: draw a local window (:func:`window_sides`, sides up to ``Tk + 1``) in a
            subject's window convention (``"offsets"`` or ``"sliding_window"``, which also
            forces ``is_causal``); None: no window. The mask then also shows each query its
            own position (:func:`anchor_in_window`).
        packing: also draw ``segment_ids`` (:func:`documents`, each a third of the time
            absent) and ``chunk_size`` (None or 1 .. Tk + 1; only when no query is before
            position 0); the mask then shows each query its own position too.
        alibi: also draw ``alibi_slopes`` (:func:`alibi_slopes`).
        softcap: also draw a ``softcap``: Gemma 2's 50 and 30, and any in ``[0.25, 64]``
            (with ``large`` values the scores reach far past it, ``tanh`` saturates).
        sinks: also draw ``sinks`` (:func:`attention_sinks`), and rows that only a finite
            sink makes valid (:func:`rows_left_to_the_sink`).
        d: fixed sizes; else drawn by :func:`dims` with ``dim_kwargs``.
    """
    if windows == "sliding_window":
        causal = True
    is_causal = draw(st.booleans()) if causal is None else causal
    if d is None:
        if two_d:
            dim_kwargs = dict(dim_kwargs, max_batch=1, max_kv_heads=1, max_group=1)
        d = draw(dims(causal_ok=is_causal, **dim_kwargs))
    if d.query_len > d.key_len and is_causal:
        is_causal = False
    dtype = draw(st.sampled_from(tuple(reversed(dtypes))))
    magnitude = draw(st.sampled_from(magnitudes))
    max_start = d.key_len - d.query_len
    if max_start >= 0:
        query_start = draw(st.one_of(st.none(), st.integers(0, max_start)))
    else:
        query_start = None
    start = max_start if query_start is None else query_start
    scale = draw(_NONE_OR_SCALE) if explicit_scale else None
    if masks_allowed:
        attn_mask, layout = draw(
            masks(
                d,
                is_causal=is_causal,
                start=start,
                float_masks=float_masks,
                layouts=mask_layouts,
                two_d=two_d,
            )
        )
    else:
        attn_mask, layout = None, "none"
    B, Hq, Hkv, Tq, Tk, D, Dv = d
    if two_d:
        q_shape, k_shape, v_shape = (Tq, D), (Tk, D), (Tk, Dv)
    else:
        q_shape, k_shape, v_shape = (B, Hq, Tq, D), (B, Hkv, Tk, D), (B, Hkv, Tk, Dv)
    query = draw(values(q_shape, dtype, magnitude))
    key = draw(values(k_shape, dtype, magnitude))
    value = draw(values(v_shape, dtype, magnitude))
    block_size = draw(st.one_of(st.none(), st.integers(1, Tk + 1))) if block_sizes else None
    window = segment_ids = chunk_size = None
    if windows is not None:
        window = fit_window(draw(window_sides(Tk + 1, windows == "sliding_window")), start)
    if packing:
        if draw(st.integers(0, 2)):
            segment_ids = draw(documents(B, Tq, Tk, start))
        if start >= 0:
            chunk_size = draw(st.one_of(st.none(), st.integers(1, Tk + 1)))
    if windows is not None or packing:
        anchor_in_window(attn_mask, start, Tq, Tk)
    slopes = draw(alibi_slopes(B, Hq)) if alibi else None
    cap = draw(st.one_of(st.sampled_from([50.0, 30.0]), st.floats(0.25, 64))) if softcap else None
    logits = draw(attention_sinks(1 if two_d else Hq, dtype)) if sinks else None
    case = AttentionCase(
        query,
        key,
        value,
        attn_mask,
        is_causal,
        query_start,
        scale,
        layout,
        magnitude,
        block_size,
        window,
        segment_ids,
        chunk_size,
        slopes,
        cap,
        logits,
    )
    return draw(rows_left_to_the_sink(case)) if sinks else case


def subject_declared(subject, kwargs: dict) -> dict:
    """``kwargs`` with what ``subject`` declares as the defaults of a case strategy: its
    ``dtypes``, ``float_masks`` and ``block_sizes`` (its ``block_size`` capability); a
    ``windows=True`` in ``kwargs`` becomes the subject's window convention."""
    if kwargs.get("windows") is True:
        kwargs = {**kwargs, "windows": subject.capabilities.window or "offsets"}
    return {
        "dtypes": subject.capabilities.dtypes,
        "float_masks": subject.capabilities.float_masks,
        "block_sizes": subject.capabilities.block_size,
        **kwargs,
    }


def declared_variants(subject, **overrides) -> dict:
    """The variant flags of :func:`attention_cases` that ``subject`` declares (``windows``,
    ``packing``, ``alibi``, ``softcap``, ``sinks``), so a property of one variant draws it
    together with every other the subject has; ``overrides`` set flags explicitly."""
    caps = subject.capabilities
    return {
        "windows": True if caps.window else None,
        "packing": caps.segment_ids and caps.chunk_size,
        "alibi": caps.alibi,
        "softcap": caps.softcap,
        "sinks": caps.sinks,
        **overrides,
    }


def subject_cases(subject, **kwargs):
    """:func:`attention_cases` restricted to what ``subject`` declares it supports."""
    return attention_cases(**subject_declared(subject, kwargs))
