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
from attnprops.properties.mask_draws import MASK_LAYOUTS
from attnprops.properties.mask_draws import masks
from attnprops.properties.sizes import cached_strategy
from attnprops.properties.variant_draws import alibi_slopes
from attnprops.properties.variant_draws import anchor_in_window
from attnprops.properties.variant_draws import attention_sinks
from attnprops.properties.variant_draws import documents
from attnprops.properties.variant_draws import fit_window
from attnprops.properties.variant_draws import rows_left_to_the_sink
from attnprops.properties.variant_draws import window_sides

# Value regimes. "large" makes |scores| exceed exp's range for every dtype (float64 exp
# overflows at ~709.8), so an implementation without max subtraction overflows.
MAGNITUDES = ("unit", "ties", "large")

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

    @classmethod
    def plain(cls, query, key, value, magnitude: str) -> AttentionCase:
        """The plain call on these arrays: no mask, not causal, the default scale and
        ``query_start``; ``magnitude`` one of :data:`MAGNITUDES` (what the values are)."""
        return cls(query, key, value, None, False, None, None, "none", magnitude)

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
    def dims(self) -> Dims:
        """The sizes of a 4-D call (what :func:`dims` draws)."""
        (B, Hq, Tq, D), (Hkv, Tk), Dv = self.query.shape, self.key.shape[1:3], self.value.shape[3]
        return Dims(B, Hq, Hkv, Tq, Tk, D, Dv)

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
