"""The rules of the attention variants (:func:`oracle.rules.check_attention_call`'s last
arguments), each with its break function: ``window``, ``segment_ids``, ``chunk_size``,
``alibi_slopes``, ``softcap`` and ``sinks``. Each entry ``needs`` the capability that a
subject declares for the variant; part of :data:`oracle.violations.attention.ATTENTION`."""

from __future__ import annotations

import numpy as np

from attnprops.oracle.rules import AlibiError
from attnprops.oracle.rules import FullyMaskedRowError
from attnprops.oracle.rules import SegmentIdsError
from attnprops.oracle.rules import SinksError
from attnprops.oracle.rules import SoftcapError
from attnprops.oracle.rules import WindowError
from attnprops.oracle.violations.calls import Example
from attnprops.oracle.violations.calls import Violation
from attnprops.oracle.violations.calls import changed
from attnprops.oracle.violations.calls import score_shape

__all__ = ["VARIANTS"]


def _window_not_a_pair(call, pick):
    return changed(call, kw_window=pick.choice([3, (1,), (1, 0, 2), "1, 0"]))


def _window_side_negative(call, pick):
    return changed(call, kw_window=pick.choice([(-1, 0), (0, -1), (None, -3)]))


def _window_side_not_an_int(call, pick):
    return changed(call, kw_window=pick.choice([(1.5, 0), (True, 0), (0, "2"), (2.0, None)]))


_NEEDS_WINDOW = (("window", "offsets"),)


def _segment_ids_malformed(call, pick):
    Tq, Tk = call.query.shape[-2], call.key.shape[-2]
    how = pick.choice(["one array", "query ids too long", "float ids", "bool ids"])
    if how == "one array":
        return changed(call, kw_segment_ids=np.zeros(Tq, dtype=np.int64))
    if how == "query ids too long":
        return changed(call, kw_segment_ids=(np.zeros(Tq + 1, np.int64), np.zeros(Tk, np.int64)))
    dtype = np.float64 if how == "float ids" else np.bool_
    return changed(call, kw_segment_ids=(np.zeros(Tq, dtype), np.zeros(Tk, dtype)))


def _alibi_slopes_invalid(call, pick):
    Hq = call.query.shape[1] if call.query.ndim == 4 else 1
    how = pick.choice(["one slope too many", "integer slopes", "NaN slope"])
    if how == "one slope too many":
        return changed(call, kw_alibi_slopes=np.full(Hq + 1, 0.5))
    if how == "integer slopes":
        return changed(call, kw_alibi_slopes=np.ones(Hq, dtype=np.int64))
    return changed(call, kw_alibi_slopes=np.full(Hq, np.nan))


def _softcap_invalid(call, pick):
    bad = [0.0, -30.0, float("inf"), True, "50", 10**400, np.timedelta64(50, "s")]
    return changed(call, kw_softcap=pick.choice(bad))


def _sinks_invalid(call, pick):
    Hq = call.query.shape[1] if call.query.ndim == 4 else 1
    how = pick.choice(["one sink too many", "integer sinks", "NaN sink", "+inf sink"])
    if how == "one sink too many":
        return changed(call, kw_sinks=np.zeros(Hq + 1))
    if how == "integer sinks":
        return changed(call, kw_sinks=np.zeros(Hq, dtype=np.int64))
    return changed(call, kw_sinks=np.full(Hq, np.nan if how == "NaN sink" else np.inf))


def _row_beside_a_minus_inf_sink(call, pick):
    """Hide every key of one query row of head ``h`` (a bool or float mask) and give every
    head a sink of 0 but ``h``, whose sink is ``-inf``: a ``-inf`` sink is no sink, so that
    row still sees nothing (with a finite sink it would be valid: the sink takes all its
    weight and its output is 0)."""
    shape = score_shape(call)
    B, Hq, Tq, Tk = shape if len(shape) == 4 else (1, 1) + shape
    b, h, i = pick.integer(0, B - 1), pick.integer(0, Hq - 1), pick.integer(0, Tq - 1)
    mask = np.ones((B, Hq, Tq, Tk), dtype=bool)
    mask[b, h, i] = False
    if len(shape) == 2:
        mask = mask[0, 0]
    if pick.choice(["bool", "float"]) == "float":
        mask = np.where(mask, 0.0, -np.inf).astype(call.query.dtype)
    sinks = np.zeros(Hq, dtype=call.query.dtype)
    sinks[h] = -np.inf
    return changed(call, kw_attn_mask=mask, kw_sinks=sinks)


def _chunk_size_invalid(call, pick):
    return changed(call, kw_chunk_size=pick.choice([0, -4, 2.0, True, np.timedelta64(2, "s")]))


def _row_before_the_first_chunk(call, pick):
    """More queries than keys, non-causal, ``query_start=None``: the first queries sit at
    positions ``Tk - Tq < 0``, and with ``chunk_size=C`` position ``p`` is in chunk ``p // C``
    (floor: ``-1 // C = -1``), which holds no key, so each such row sees nothing (a C or
    CUDA ``p / C`` truncates to chunk 0 and shows it the first keys)."""
    Tk = call.key.shape[-2]
    extra = pick.integer(1, 3)  # queries before position 0
    rows = np.arange(Tk + extra) % call.query.shape[-2]  # the call's own query rows, repeated
    return changed(
        call,
        query=np.take(call.query, rows, axis=-2),
        kw_chunk_size=pick.integer(1, Tk + 1),
        kw_is_causal=False,
        kw_query_start=None,
        kw_attn_mask=None,
    )


E = Example
VARIANTS: tuple[Violation, ...] = (
    # WindowError
    Violation(
        "window not a pair",
        WindowError,
        "window",
        _window_not_a_pair,
        (E("window-int"), E("window-three-sides", answers=((1, 0, 2),))),
        needs=_NEEDS_WINDOW,
    ),
    Violation(
        "window side negative",
        WindowError,
        "window",
        _window_side_negative,
        (E("window-left-negative"), E("window-right-negative", answers=((0, -1),))),
        needs=_NEEDS_WINDOW,
    ),
    Violation(
        "window side not an int",
        WindowError,
        "window",
        _window_side_not_an_int,
        (E("window-float-side"), E("window-bool-side", answers=((True, 0),))),
        needs=_NEEDS_WINDOW,
    ),
    # SegmentIdsError
    Violation(
        "segment_ids malformed",
        SegmentIdsError,
        "segment_ids",
        _segment_ids_malformed,
        (
            E("segment-ids-one-array"),
            E("segment-ids-too-long", answers=("query ids too long",)),
            E("segment-ids-float", answers=("float ids",)),
        ),
        needs=(("segment_ids", True),),
    ),
    # WindowError (chunk_size, local attention's other argument)
    Violation(
        "chunk_size not a positive int",
        WindowError,
        "chunk_size",
        _chunk_size_invalid,
        (E("chunk-size-zero"), E("chunk-size-float", answers=(2.0,))),
        needs=(("chunk_size", True),),
    ),
    # FullyMaskedRowError: the fully masked row rule where chunks leave a row nothing
    Violation(
        "fully masked row before the first chunk",
        FullyMaskedRowError,
        "chunk_size",
        _row_before_the_first_chunk,
        (E("row-before-the-first-chunk"),),
        needs=(("chunk_size", True),),
    ),
    # AlibiError
    Violation(
        "alibi_slopes malformed",
        AlibiError,
        "alibi_slopes",
        _alibi_slopes_invalid,
        (
            E("alibi-slopes-too-many"),
            E("alibi-slopes-int", answers=("integer slopes",)),
            E("alibi-slopes-nan", answers=("NaN slope",)),
        ),
        needs=(("alibi", True),),
    ),
    # SoftcapError
    Violation(
        "softcap not a positive number",
        SoftcapError,
        "softcap",
        _softcap_invalid,
        (E("softcap-zero"), E("softcap-inf", answers=(float("inf"),))),
        needs=(("softcap", True),),
    ),
    # SinksError
    Violation(
        "sinks malformed",
        SinksError,
        "sinks",
        _sinks_invalid,
        (
            E("sinks-too-many"),
            E("sinks-int", answers=("integer sinks",)),
            E("sinks-plus-inf", answers=("+inf sink",)),
        ),
        needs=(("sinks", True),),
    ),
    # FullyMaskedRowError: the fully masked row rule where sinks are given
    Violation(
        "fully masked row beside a -inf sink",
        FullyMaskedRowError,
        "attn_mask",
        _row_beside_a_minus_inf_sink,
        (
            E("row-beside-minus-inf-sink"),
            E("float-row-beside-minus-inf-sink", answers=(0, 0, 0, "float")),
        ),
        needs=(("sinks", True),),
    ),
)
del E
