"""The value checks of the kernel-sized properties (``properties/test_kernel_sizes.py``): two
computations of one exact output agreeing within twice the agreement bound (:func:`agree`),
every row against a float64 evaluation (:func:`matches_float64_evaluation`), and the rows at
tile boundaries against the exact result of the ball reference (:func:`matches_reference`).

Shape legend: query (B, Hq, Tq, D), key (B, Hkv, Tk, D), value (B, Hkv, Tk, Dv),
output (B, Hq, Tq, Dv).
"""

from __future__ import annotations

import numpy as np
from hypothesis import note

from attnprops.oracle import ball
from attnprops.oracle.rules import alibi_bias
from attnprops.oracle.rules import compute_dtype
from attnprops.properties._support import attend
from attnprops.properties._support import visibility
from attnprops.properties.agreement_bounds import agreement_bounds
from attnprops.properties.agreement_bounds import agreement_from
from attnprops.properties.agreement_bounds import row_maxima
from attnprops.properties.arithmetic import Arithmetic
from attnprops.properties.bounds import attention_bounds
from attnprops.properties.bounds import grouped_matmul
from attnprops.properties.bounds import two_computations
from attnprops.properties.checks import assert_shape_dtype
from attnprops.properties.checks import assert_within
from attnprops.properties.reference_rows import boundary_rows
from attnprops.properties.reference_rows import heads_of
from attnprops.properties.reference_rows import rows_of

__all__ = ["agree", "float64_evaluation", "matches_float64_evaluation", "matches_reference"]

# Exact multiply-adds per reference call, B * Hq * rows * Tk * (D + Dv) (the two arb_mat
# products, about 45 ns each at 256 bits): at most this many rows are checked exactly. The
# reference rows are the tight check; every row also gets the float64 check.
REFERENCE_WORK = 2_500_000


def agree(subject, case, a, b, *, what):
    """Two computations of one exact output by ``subject`` agree within twice the agreement
    bound of the subject's declared arithmetic."""
    with np.errstate(over="ignore"):  # a bound past the float64 range is no bound: inf
        bound = two_computations(
            agreement_bounds(case, visibility(case), subject.arithmetic(case.dtype))
        )
    assert_within(out=a, expected=b, bound=bound, what=what, case=case)


def sequence_alone(case, b: int, n: int, queries: slice = slice(None)):
    """Sequence ``b`` of a batched ``case`` alone: its queries (``queries`` of them) over
    its first ``n`` keys and values, with every other argument of ``case`` (ALiBi slopes
    ``(B, Hq)``: its row)."""
    slopes = case.alibi_slopes
    if slopes is not None and np.ndim(slopes) == 2:
        slopes = slopes[b : b + 1]
    return case._replace(
        query=case.query[b : b + 1, :, queries],
        key=case.key[b : b + 1, :, :n],
        value=case.value[b : b + 1, :, :n],
        alibi_slopes=slopes,
    )


def each_sequence_alone(subject, case, lengths, out, where: str) -> None:
    """Row ``b`` of ``out`` (a serving call's output, ``(B, Hq, Tq, Dv)``) is the attention
    of sequence ``b`` alone (:func:`sequence_alone`, its first ``lengths[b]`` keys): the law
    of ``cache_seqlens`` and ``block_table``, each row held to a float64 evaluation of that
    sequence (:func:`within_float64_evaluation`), not to the subject's own plain attention,
    so a serving path that computes in less precision than the subject declares fails too.
    ``where``: the storage, for the message."""
    for b, n in enumerate(lengths):
        alone = sequence_alone(case, b, n)
        what = f"sequence {b} ({n} positions, {where})"
        within_float64_evaluation(subject, alone, out[b : b + 1], what)


def decode_agrees_with_attention(subject, case, decoded, what: str) -> None:
    """Outputs decoded through a cache, ``(B, Hq, T, Dv)`` in the case's dtype, agree on
    every row with the subject's attention over the whole ``case`` (causal, with its window
    and sinks): the law of a cache, whatever it holds."""
    decoded = assert_shape_dtype(
        out=decoded,
        shape=case.query.shape[:3] + case.value.shape[3:],
        dtype=case.dtype,
        what="decoded outputs",
    )
    full = attend(subject, case, f"attention over the whole sequence, window {case.window}")
    agree(subject, case, decoded, full, what=what)


def float64_evaluation(case) -> np.ndarray:
    """The formula evaluated in float64, ``(B, Hq, Tq, Dv)``: max-subtracted softmax over the
    visible keys (the scores capped, masked and ALiBi-biased, and the sinks one more key
    each), then the weighted sum (the computation :mod:`properties.bounds` analyses,
    so :func:`~properties.agreement_bounds.agreement_bounds` at float64 bounds its error)."""
    q, k, v = (x.astype(np.float64) for x in (case.query, case.key, case.value))
    B, Hq, Tq, D = q.shape
    Tk = k.shape[2]
    scale = 1 / np.sqrt(D) if case.scale is None else case.scale
    s = grouped_matmul(q * scale, k.swapaxes(-1, -2))
    if case.softcap is not None:
        s = case.softcap * np.tanh(s / case.softcap)
    if case.attn_mask is not None and case.attn_mask.dtype != np.bool_:
        s = s + case.attn_mask.astype(np.float64)
    if case.alibi_slopes is not None:
        start = Tk - Tq if case.query_start is None else case.query_start
        slopes = case.alibi_slopes.reshape(-1, Hq)  # (B or 1, Hq)
        s = s + alibi_bias(slopes, start, slice(0, Tq), slice(0, Tk))
    s = np.where(visibility(case), s, -np.inf)
    if case.sinks is not None:  # one more key of score sigma_h and value 0, dropped after
        sink = np.broadcast_to(case.sinks.astype(np.float64)[:, None, None], (B, Hq, Tq, 1))
        s = np.concatenate([s, sink], axis=-1)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    w = w[..., : k.shape[2]]
    return grouped_matmul(w, v)


def matches_float64_evaluation(subject, case, what: str = "output", expected=None) -> np.ndarray:
    """The subject's output, every row within the agreement bound of the subject's declared
    arithmetic plus that of float64 of a float64 evaluation (so within the sum of both of
    the exact result's bounds); returns the output. ``expected``: the float64 evaluation of
    ``case`` when the caller has it already."""
    __tracebackhide__ = True
    out = attend(subject, case)
    within_float64_evaluation(subject, case, out, what, expected)
    return out


def within_float64_evaluation(subject, case, out, what: str, expected=None) -> None:
    """``out`` (the subject's output for ``case``, however computed), every row within the
    bound of :func:`matches_float64_evaluation`. ``expected``: the float64 evaluation of
    ``case`` when the caller has it already."""
    __tracebackhide__ = True
    visible = visibility(case)
    with np.errstate(over="ignore"):
        maxima = row_maxima(case, visible)  # the float64 evaluation reads the same values
        loose = two_computations(
            agreement_from(maxima, subject.arithmetic(case.dtype)),
            agreement_from(maxima, Arithmetic.of(np.float64)),
        )
    assert_within(
        out=out,
        expected=float64_evaluation(case) if expected is None else expected,
        bound=loose,
        what=f"{what} vs a float64 evaluation (every row, agreement bounds)",
        case=case,
    )


def exactly_in(case, dtype: str):
    """``case`` with its query, key, value and sinks cast to ``dtype``, every entry unchanged (a
    value of a coarser grid, bfloat16's in float16's range and precision); its exact
    result is then the same, and the rulebook's rules read the same (the dtypes share their
    compute dtype, so one overflow threshold).

    Raises:
        ValueError: an entry that ``dtype`` does not hold exactly, or another compute dtype
            (a caller's mistake: the shared reference would not be this call's).
    """
    if compute_dtype(dtype) != compute_dtype(case.dtype):
        raise ValueError(f"dtype: {dtype} computes in another dtype than {case.dtype}")
    arrays = {}
    for name in ("query", "key", "value", "sinks"):
        x = getattr(case, name)
        if x is None:  # no sinks
            continue
        cast = x.astype(dtype)
        if not np.array_equal(cast.astype(np.float64), x.astype(np.float64)):
            raise ValueError(f"dtype: {dtype} does not hold every {name} entry of {case.dtype}")
        arrays[name] = cast
    return case._replace(**arrays)


def matches_reference(subject, spec, *, heads: list[int] | None = None, also_in=()):
    """At kernel sizes the output is the exact result: every row within the agreement bound of
    a float64 evaluation (whose own error is bounded the same way), and every row at a tile
    boundary (first and last rows, query-tile edges, rows whose visible keys end at a key-tile
    edge) within the per-element bound of the exact result (ball arithmetic, correctly
    rounded). A dropped last key block, a split-KV merge without its ``exp(m_i - m)``
    rescale, a wrong causal tile or a lost head dim chunk all move these rows. ``heads``: the
    query heads whose rows are checked exactly (default every head; the float64 check covers
    every head either way). ``also_in``: dtypes the same call then runs in too, its values
    cast exactly (:func:`exactly_in`), against the same float64 evaluation and exact result
    (computed once) with each dtype's bounds. Law and bound as test_output_matches_oracle.
    Returns the subject's output ``(B, Hq, Tq, Dv)`` (in the spec's dtype)."""
    __tracebackhide__ = True
    first = spec.build()
    calls = [first] + [exactly_in(first, dtype) for dtype in also_in]
    evaluated = float64_evaluation(first)
    parts = None
    for case in calls:
        note(f"case: {case.describe()}")
        out = matches_float64_evaluation(subject, case, expected=evaluated)
        if case is first:
            whole = out
        if heads is not None:
            note(f"reference heads: {heads}")
            case, out = heads_of(case, heads), out[:, heads]
        B, Hq, Tq, _ = case.query.shape
        Tk = case.key.shape[2]
        work = B * Hq * Tk * (case.query.shape[3] + case.value.shape[3])
        rows = boundary_rows(case, limit=max(2, min(24, REFERENCE_WORK // work)))
        note(f"reference rows: {rows}")
        if parts is None:
            parts = ball.attention_parts(
                case.query,
                case.key,
                case.value,
                **case.kwargs(),
                fully_masked_rows=subject.capabilities.fully_masked_rows,
                rows=rows,
            )
        bounds = attention_bounds(rows_of(case, rows), parts, subject.arithmetic(case.dtype))
        assert_within(
            out=out[:, :, rows],
            expected=parts.output.value,
            bound=bounds.output,
            what=f"output rows {rows} vs the exact result",
            case=case,
        )
    return whole
