"""The rules on a whole attention call, in the rulebook's order: :func:`check_attention_call`
(every rule but the fully-masked-row rule, array-free) and :func:`check_attention_inputs` (all
of them, with the dense visibility), and what they return (:mod:`oracle.rules`)."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from attnprops.oracle.rules.alibi import check_alibi_slopes
from attnprops.oracle.rules.arguments import check_float_array
from attnprops.oracle.rules.arguments import check_is_causal
from attnprops.oracle.rules.arguments import check_mask
from attnprops.oracle.rules.arguments import check_query_start
from attnprops.oracle.rules.arguments import check_scale
from attnprops.oracle.rules.arguments import check_window
from attnprops.oracle.rules.arguments import window_visible
from attnprops.oracle.rules.dtypes import compute_dtype
from attnprops.oracle.rules.errors import AttentionInputError
from attnprops.oracle.rules.errors import DtypeError
from attnprops.oracle.rules.errors import FullyMaskedRowError
from attnprops.oracle.rules.errors import QueryStartError
from attnprops.oracle.rules.errors import ScoreOverflowError
from attnprops.oracle.rules.errors import ShapeError
from attnprops.oracle.rules.options import takes_options
from attnprops.oracle.rules.packing import check_chunk_size
from attnprops.oracle.rules.packing import check_segment_ids
from attnprops.oracle.rules.packing import chunk_visible
from attnprops.oracle.rules.packing import segment_visible
from attnprops.oracle.rules.sinks import check_sinks
from attnprops.oracle.rules.softcap import check_softcap

__all__ = [
    "AttentionCall",
    "AttentionProblem",
    "FULLY_MASKED_ROW_CONVENTIONS",
    "check_attention_call",
    "check_attention_inputs",
    "dense_visibility",
    "raise_fully_masked_row",
    "raise_score_overflow",
    "sink_catches",
]


FULLY_MASKED_ROW_CONVENTIONS = ("raise", "zeros")


class AttentionCall(NamedTuple):
    """A call that passed every rule except the fully-masked-row rule (which needs the
    visibility of every row; see :func:`check_attention_inputs`).

    Arrays are 4-D *views* of the caller's data (2-D inputs get two leading axes of length 1),
    never copies. ``mask`` is the caller's ``attn_mask`` as a 4-D view (leading axes of length
    1 added), NOT broadcast to ``(B, Hq, Tq, Tk)``; ``None`` without a mask. ``query_start`` is
    the absolute position of the first query (``Tk - Tq`` when the caller passed None).
    ``scale`` is None for the default ``1/sqrt(D)``. ``window`` is ``(left, right)`` (each an
    int >= 0 or None) or None for no window (:func:`oracle.rules.check_window`); a side that
    reaches past every key is None (so ``(2**63, 0)`` is ``(None, 0)``). ``segments``:
    integer ``(B or 1, Tq)`` and ``(B or 1, Tk)`` document ids or None; ``chunk_size``:
    positions per chunk or None, a chunk longer than every distance written shorter (see
    :func:`_reach`; same chunks) (:mod:`oracle.rules.packing`). ``alibi``: float64 ``(B or 1, Hq)``
    slopes or None (:mod:`oracle.rules.alibi`). ``softcap``: the cap or None
    (:mod:`oracle.rules.softcap`). ``sinks``: float64 ``(Hq,)`` logits or None
    (:mod:`oracle.rules.sinks`).
    """

    query: np.ndarray  # (B, Hq, Tq, D)
    key: np.ndarray  # (B, Hkv, Tk, D)
    value: np.ndarray | None  # (B, Hkv, Tk, Dv); None when the call needs no value
    mask: np.ndarray | None  # 4-D, broadcastable to (B, Hq, Tq, Tk)
    scale: float | None
    query_start: int
    is_causal: bool
    two_d: bool
    dtype: np.dtype
    window: tuple[int | None, int | None] | None = None
    segments: tuple[np.ndarray, np.ndarray] | None = None
    chunk_size: int | None = None
    alibi: np.ndarray | None = None
    softcap: float | None = None
    sinks: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """The score shape ``(B, Hq, Tq, Tk)``."""
        B, Hq, Tq, _ = self.query.shape
        return B, Hq, Tq, self.key.shape[2]

    @property
    def batch(self) -> int:
        return self.query.shape[0]

    @property
    def num_heads(self) -> int:
        return self.query.shape[1]

    @property
    def num_kv_heads(self) -> int:
        return self.key.shape[1]

    @property
    def group(self) -> int:
        """Query heads per K/V head: query head ``h`` reads K/V head ``h // group``."""
        return self.num_heads // self.num_kv_heads

    @property
    def head_dim(self) -> int:
        return self.query.shape[3]

    @property
    def float_mask(self) -> bool:
        return self.mask is not None and self.mask.dtype != np.bool_


@dataclasses.dataclass(frozen=True)
class AttentionProblem:
    """A validated attention call (:class:`AttentionCall`, ``call``) with its dense visibility.

    ``visible`` is a read-only bool array broadcast to ``(B, Hq, Tq, Tk)``: True where the
    query may attend (mask AND causality AND window AND segments AND chunks); a row that it
    leaves without a key is one whose head's sink is finite (or, under
    ``fully_masked_rows="zeros"``, any). ``bias`` is the float mask broadcast likewise
    (``None`` when there is no float mask); it is ``-inf`` exactly where a float mask hides.
    ALiBi (``alibi``) is NOT in ``bias``: each reference adds it exactly.

    Every other attribute is the call's (``problem.query``, ``problem.scale``,
    ``problem.group``, ...: :class:`AttentionCall` documents them), so the fields are declared
    once; :meth:`replace` changes call fields and these two alike.
    """

    call: AttentionCall
    visible: np.ndarray
    bias: np.ndarray | None

    def __post_init__(self):
        # The call's fields as the problem's own attributes: read directly (the references
        # read them once per score), not through __getattr__.
        for name, value in zip(self.call._fields, self.call):
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str):  # the call's properties (group, head_dim, ...)
        if name == "call":  # not set yet (unpickling, copying): no recursion
            raise AttributeError(name)
        return getattr(self.call, name)

    def replace(self, **changes) -> AttentionProblem:
        """A copy with ``changes`` applied, to ``visible``/``bias`` or to the call's fields."""
        own = {name: changes.pop(name) for name in ("visible", "bias") if name in changes}
        return dataclasses.replace(self, call=self.call._replace(**changes), **own)


@takes_options
def check_attention_call(
    query,
    key,
    value=None,
    *,
    needs_value: bool = True,
    scan: bool = True,
    **options,
) -> AttentionCall:
    """Every rule except the fully-masked-row rule, in the order below, without building any
    ``(B, Hq, Tq, Tk)`` array (how it differs from :func:`check_attention_inputs`, which also
    builds the dense visibility and applies that rule: this one costs ``O(inputs)``, and impl
    calls it, then checks the rows one key block at a time): ``is_causal``,
    ``scale``, then dtype/size/finiteness of query,
    key (and value), ndim and dtype agreement, batch/head_dim/head grouping/length agreement,
    ``query_start``, then ``attn_mask`` (dtype, broadcast shape, entries), then ``window``,
    ``segment_ids``, ``chunk_size``, ``alibi_slopes``, ``softcap`` and ``sinks``.

    ``scan=False``: query, key and value are not scanned for NaN/infinity here (see
    :func:`check_float_array`); the caller must scan them before using their values.
    Raises a subclass of :class:`AttentionInputError` naming the argument and the rule.
    Reads its inputs only.
    """
    is_causal = check_is_causal(options["is_causal"])
    scale = check_scale(options["scale"])
    named = [("query", query), ("key", key)] + ([("value", value)] if needs_value else [])
    arrays = {name: check_float_array(x, name, scan=scan) for name, x in named}
    q, k = arrays["query"], arrays["key"]
    v = arrays.get("value")
    if q.ndim not in (2, 4):
        raise ShapeError(
            f"query: ndim {q.ndim} (shape {q.shape}); expected (B, Hq, Tq, D) or (T, D)"
        )
    for name, x in arrays.items():
        if x.ndim != q.ndim:
            raise ShapeError(
                f"{name}: ndim {x.ndim} (shape {x.shape}) differs from query's ndim {q.ndim}"
            )
        if x.dtype != q.dtype:
            raise DtypeError(
                f"{name}: dtype {x.dtype} differs from query's {q.dtype}; cast them to one dtype"
            )
    two_d = q.ndim == 2
    if two_d:
        q, k = q[None, None], k[None, None]
        v = None if v is None else v[None, None]
    B, Hq, Tq, D = q.shape
    _, Hkv, Tk, _ = k.shape
    if k.shape[0] != B:
        raise ShapeError(f"key: batch {k.shape[0]} differs from query's batch {B}")
    if k.shape[3] != D:
        raise ShapeError(f"key: head_dim {k.shape[3]} differs from query's head_dim {D}")
    if Hq % Hkv:
        raise ShapeError(
            f"key: num_kv_heads={Hkv} must divide num_heads={Hq} (query head h reads K/V "
            "head h // (Hq // Hkv))"
        )
    if v is not None:
        if v.shape[0] != B:
            raise ShapeError(f"value: batch {v.shape[0]} differs from query's batch {B}")
        if v.shape[1] != Hkv:
            raise ShapeError(f"value: num_kv_heads {v.shape[1]} differs from key's {Hkv}")
        if v.shape[2] != Tk:
            raise ShapeError(f"value: length {v.shape[2]} differs from key's length {Tk}")
    start = check_query_start(options["query_start"], Tq, Tk)
    if start is None:
        start = Tk - Tq
        if is_causal and start < 0:
            raise QueryStartError(
                f"query_start: None means Tk - Tq = {start} < 0 (Tq={Tq} > Tk={Tk}); with "
                "is_causal=True the first queries would see no key"
            )
    mask = check_mask(options["attn_mask"], (Tq, Tk) if two_d else (B, Hq, Tq, Tk))
    if mask is not None:
        mask = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)  # a view: never copied
    window = _reach(check_window(options["window"]), start, Tq, Tk)
    segments = check_segment_ids(options["segment_ids"], B, Tq, Tk)
    chunk_size = check_chunk_size(options["chunk_size"])
    if chunk_size is not None:  # longer than any |position|: the same chunks, in a small int
        chunk_size = min(chunk_size, abs(start) + Tq + Tk)
    alibi = check_alibi_slopes(options["alibi_slopes"], B, Hq)
    softcap = check_softcap(options["softcap"])
    sinks = check_sinks(options["sinks"], Hq)
    return AttentionCall(
        q,
        k,
        v,
        mask,
        scale,
        start,
        is_causal,
        two_d,
        q.dtype,
        window,
        segments,
        chunk_size,
        alibi,
        softcap,
        sinks,
    )


def _reach(window, start: int, Tq: int, Tk: int):
    """``window`` with a side that reaches past every key written ``None`` (and no window
    when both do): ``left >= start + Tq - 1`` reaches key 0 from the last query, ``right >=
    Tk - 1 - start`` reaches the last key from the first. The same visibility, in ints no
    larger than the sequence (a side of ``2**63`` must not overflow anyone's arithmetic)."""
    if window is None:
        return None
    left, right = window
    if left is not None and left >= start + Tq - 1:
        left = None
    if right is not None and right >= Tk - 1 - start:
        right = None
    return None if left is None and right is None else (left, right)


@takes_options
def check_attention_inputs(
    query,
    key,
    value=None,
    *,
    fully_masked_rows: str = "raise",
    needs_value: bool = True,
    **options,
) -> AttentionProblem:
    """Apply every rule to one attention call and return the validated problem, with its
    dense ``(B, Hq, Tq, Tk)`` visibility (``O(B Hq Tq Tk)`` memory: the dense paths and the
    oracle; :func:`check_attention_call` is the same without the visibility).

    The rules of :func:`check_attention_call`, then the fully-masked-row rule on the dense
    visibility (mask AND causality AND window AND segments AND chunks) under
    ``fully_masked_rows="raise"``, which spares the rows of a head with a finite sink
    (:mod:`oracle.rules.sinks`: such a row gives 0).
    Raises a subclass of :class:`AttentionInputError` naming the argument and the rule.
    Reads its inputs only.
    """
    if fully_masked_rows not in FULLY_MASKED_ROW_CONVENTIONS:
        raise AttentionInputError(
            f"fully_masked_rows: {fully_masked_rows!r} must be one of "
            f"{FULLY_MASKED_ROW_CONVENTIONS}"
        )
    call = check_attention_call(query, key, value, needs_value=needs_value, **options)
    visible, bias = dense_visibility(call)
    if fully_masked_rows == "raise":
        empty = ~visible.any(axis=-1) & ~sink_catches(call.sinks, call.num_heads)
        if empty.any():
            raise_fully_masked_row(empty)
    visible.setflags(write=False)
    return AttentionProblem(call, visible, bias)


def dense_visibility(call: AttentionCall) -> tuple[np.ndarray, np.ndarray | None]:
    """``(visible, bias)`` of a validated ``call``: ``visible`` the bool ``(B, Hq, Tq, Tk)``
    mask AND causality AND window AND segments AND chunks (True: the query may attend),
    ``bias`` the float mask broadcast to that shape (``-inf`` where it hides) or None. What
    :func:`check_attention_inputs` returns in its problem, before the fully-masked-row rule."""
    target = call.shape  # (B, Hq, Tq, Tk)
    Tq, Tk = target[2], target[3]
    visible = np.ones(target, dtype=bool)
    bias = None
    if call.mask is not None:
        if call.mask.dtype == np.bool_:
            visible = visible & call.mask
        else:
            bias = np.broadcast_to(call.mask, target)  # (B, Hq, Tq, Tk)
            visible = visible & ~np.isneginf(bias)
    if call.is_causal:
        i = np.arange(Tq)[:, None]
        j = np.arange(Tk)[None, :]
        visible = visible & (j <= call.query_start + i)
    in_window = window_visible(call.window, call.query_start, Tq, Tk)
    if in_window is not None:
        visible = visible & in_window
    rows, keys = slice(0, Tq), slice(0, Tk)
    for positional in (
        segment_visible(call.segments, rows, keys),
        chunk_visible(call.chunk_size, call.query_start, rows, keys),
    ):
        if positional is not None:
            visible = visible & positional
    return visible, bias


def sink_catches(sinks: np.ndarray | None, num_heads: int) -> np.ndarray:
    """Bool ``(Hq, 1)``: True for the heads whose finite sink makes a row without a visible
    key allowed (:mod:`oracle.rules.sinks`); all False without sinks."""
    if sinks is None:
        return np.zeros((num_heads, 1), dtype=bool)
    return np.isfinite(sinks)[:, None]


def raise_fully_masked_row(empty: np.ndarray) -> None:
    """Raise the fully-masked-row error for ``empty``, bool ``(B, Hq, Tq)``, True where a query
    row sees no key (at least one True): the first such row and their count."""
    b, h, i = (int(n) for n in np.argwhere(empty)[0])
    raise FullyMaskedRowError(
        f"attn_mask/is_causal/window/segment_ids/chunk_size: query row (batch={b}, head={h}, "
        f"query={i}) has no visible key ({int(empty.sum())} such rows); every query must see "
        "at least one key (or its head have a finite sink)"
    )


def raise_score_overflow(problem: AttentionProblem | AttentionCall) -> None:
    """Raise the overflow error for ``problem`` (called by implementations that detect it),
    naming every argument that enters a score: the inputs, the scale, and the float mask
    and ALiBi's slopes where the call has them."""
    named = ["query", "key", "scale"]
    if isinstance(problem, AttentionCall):  # a call's mask may be bool
        float_mask = problem.mask is not None and problem.mask.dtype != bool
    else:  # a problem's bias is its float mask
        float_mask = problem.bias is not None
    alibi = problem.alibi is not None and bool(np.any(np.asarray(problem.alibi) != 0))
    named += ["attn_mask"] if float_mask else []
    named += ["alibi_slopes"] if alibi else []  # slopes of 0 add nothing
    advice = ["rescale the inputs", "pass a smaller scale"]
    advice += ["smaller attn_mask entries"] if float_mask else []
    advice += ["smaller alibi_slopes"] if alibi else []
    raise ScoreOverflowError(
        f"{'/'.join(named)}: a visible scaled score overflows "
        f"{compute_dtype(problem.dtype)} (dtype of the inputs: {problem.dtype}); "
        + ", ".join(advice[:-1])
        + f" or {advice[-1]}"
    )
