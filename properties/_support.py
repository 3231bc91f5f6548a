"""Shared pieces of the property tests: the oracle call under the subject's convention,
the fixed cases of the source documents, and small array helpers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import note

from attnprops import oracle
from attnprops.oracle import lab
from attnprops.oracle.rules import check_attention_inputs
from attnprops.oracle.rules import takes_options
from attnprops.properties.bounds import attention_bounds
from attnprops.properties.checks import assert_equal
from attnprops.properties.checks import assert_shape_dtype
from attnprops.properties.checks import assert_within
from attnprops.properties.checks import call_subject
from attnprops.properties.checks import fail
from attnprops.properties.reference_rows import rows_of
from attnprops.properties.strategies import AttentionCase
from attnprops.properties.strategies import declared_variants


def widest_dtype(subject) -> np.dtype:
    """The widest dtype the subject declares (float64 when it does)."""
    return max((np.dtype(d) for d in subject.capabilities.dtypes), key=lambda d: d.itemsize)


def lab_dtype(subject) -> np.dtype:
    """float64, the dtype in which the source lab computed its printed figures, when the
    subject declares it; otherwise the test is skipped (``pytest.skip``, with this reason),
    never compared with a wider bound.

    Why float64 only: the figures are printed to 6 decimals (seed 003's to 4) and compared
    within half a unit of the last (:attr:`oracle.lab.Printed.tolerance`), and the exact
    results of the lab's inputs come close to those rounding boundaries: seed 000's weight
    ``0.2431094932`` (printed ``0.243109``) lies 6.8e-9 inside its 5e-7
    (:func:`oracle.attention_parts`), less than one float32 ulp there (1.5e-8). A float32
    result within its derived error bound, a few ulps, can lie past the figure: torch's
    SDPA in float32 gives ``0.2431095093``, one ulp above the correctly rounded float32.
    In float64 the inputs are exact and the computation's error, about 1e-15, is far inside
    every margin."""
    declared = [np.dtype(d) for d in subject.capabilities.dtypes]
    if np.dtype(np.float64) not in declared:
        pytest.skip(
            "the lab's figures are float64 results printed to 6 decimals, one within 7e-9 of a "
            "rounding boundary, less than a float32 ulp (1.5e-8) there; the subject declares "
            f"{', '.join(d.name for d in declared)}"
        )
    return np.dtype(np.float64)


def fit_to_subject(case, subject):
    """An explicit example (the seed documents' cases are float64) cast to the widest dtype
    the subject declares, when it does not declare the case's dtype; its ``block_size`` is
    dropped for a subject without a blocked path."""
    if case.block_size is not None and not subject.capabilities.block_size:
        case = case._replace(block_size=None)
    if subject.supports(case.dtype):
        return case
    dtype = widest_dtype(subject)
    return case._replace(
        query=case.query.astype(dtype), key=case.key.astype(dtype), value=case.value.astype(dtype)
    )


def oracle_parts(case, subject):
    """The oracle's scores, weights and output for ``case`` under the subject's convention."""
    return oracle.attention_parts(
        case.query,
        case.key,
        case.value,
        **case.kwargs(),
        fully_masked_rows=subject.capabilities.fully_masked_rows,
    )


def oracle_with_bounds(case, subject):
    note(f"case: {case.describe()}")
    parts = oracle_parts(case, subject)
    return parts, attention_bounds(case, parts, subject.arithmetic(case.dtype))


def assert_output_within(out, case, parts, bounds, *, what: str, shape_what: str) -> None:
    """``out`` is an ndarray of the oracle's output shape and ``case``'s dtype, without NaN
    (else a violation naming ``shape_what``), within ``bounds.output`` of
    ``parts.output.value`` element by element (else one naming ``what``)."""
    __tracebackhide__ = True
    out = assert_shape_dtype(out=out, shape=parts.output.shape, dtype=case.dtype, what=shape_what)
    assert_within(out=out, expected=parts.output.value, bound=bounds.output, what=what, case=case)


def subject_output(subject, case, parts, what: str = "attention") -> np.ndarray:
    """The subject's ``attention`` for ``case`` (a raise is a violation: the call is valid),
    required to be an ndarray of the oracle's output shape ``parts.output.shape`` and the
    case's dtype, without NaN (:func:`checks.assert_shape_dtype`)."""
    __tracebackhide__ = True
    out = call_subject(
        subject.attention, case.query, case.key, case.value, **case.subject_kwargs(), what=what
    )
    return assert_shape_dtype(out=out, shape=parts.output.shape, dtype=case.dtype, what="output")


def attend(subject, case, what: str = "attention") -> np.ndarray:
    """The subject's ``attention`` for ``case`` (a raise is a violation: the call is valid),
    required to be an ndarray of shape ``query.shape[:-1] + value.shape[-1:]`` and the case's
    dtype, without NaN: :func:`subject_output` without the oracle's parts."""
    __tracebackhide__ = True
    out = call_subject(
        subject.attention, case.query, case.key, case.value, **case.subject_kwargs(), what=what
    )
    shape = case.query.shape[:-1] + case.value.shape[-1:]
    return assert_shape_dtype(out=out, shape=shape, dtype=case.dtype, what=what)


def subject_weights(subject, case, parts) -> np.ndarray:
    """The subject's ``attention_weights`` for ``case``, of the oracle's weights' shape and
    the case's dtype, without NaN."""
    __tracebackhide__ = True
    out = call_subject(
        subject.attention_weights, case.query, case.key, **case.kwargs(), what="attention_weights"
    )
    return assert_shape_dtype(out=out, shape=parts.weights.shape, dtype=case.dtype, what="weights")


def assert_output_matches_oracle(subject, case, what: str) -> None:
    """The subject's output for ``case`` is within :func:`bounds.attention_bounds` of the
    50-digit oracle's, element by element (raises :class:`checks.PropertyViolation`)."""
    __tracebackhide__ = True
    _assert_part_matches_oracle(subject, case, what, "output", subject_output)


def assert_weights_match_oracle(subject, case, what: str) -> None:
    """The subject's ``attention_weights`` for ``case`` within the per-element bound of the
    50-digit oracle's weights (:func:`bounds.attention_bounds`)."""
    __tracebackhide__ = True
    _assert_part_matches_oracle(subject, case, what, "weights", subject_weights)


def _assert_part_matches_oracle(subject, case, what: str, part: str, read) -> None:
    """``read(subject, case, parts)`` within the bound of the oracle's ``part``."""
    __tracebackhide__ = True
    parts, bounds = oracle_with_bounds(case, subject)
    assert_within(
        out=read(subject, case, parts),
        expected=getattr(parts, part).value,
        bound=getattr(bounds, part),
        what=what,
        case=case,
    )


def assert_rows_match_oracle(subject, case, what: str) -> None:
    """The subject's ``attention_with_kvcache`` for ``case`` (a
    :class:`serving_cases.ServingCase`), row ``b`` within
    :func:`bounds.attention_bounds` of the 50-digit oracle over sequence ``b`` alone."""
    __tracebackhide__ = True
    note(f"serving case: {case.describe()}")
    out = call_subject(
        subject.attention_with_kvcache,
        case.query,
        case.key_cache,
        case.value_cache,
        case.cache_seqlens,
        **case.kwargs(),
        what="attention_with_kvcache",
    )
    shape = case.query.shape[:3] + case.value_cache.shape[3:]
    out = assert_shape_dtype(out=out, shape=shape, dtype=case.query.dtype, what="output")
    for b, sequence in enumerate(case.sequences):
        parts, bounds = oracle_with_bounds(sequence, subject)
        assert_within(
            out=out[b : b + 1],
            expected=parts.output.value,
            bound=bounds.output,
            what=f"{what}: sequence {b}, {sequence.key.shape[2]} cached positions",
            case=sequence,
        )


def visibility(case) -> np.ndarray:
    """Bool ``(B, Hq, Tq, Tk)``: which key each query may see, from the rulebook."""
    return check_attention_inputs(
        case.query, case.key, case.value, **case.kwargs(), fully_masked_rows="zeros"
    ).visible


def four_d(x):
    return None if x is None else (x[None, None] if x.ndim == 2 else x)


def repeat_kv(x: np.ndarray, group: int) -> np.ndarray:
    """K/V explicitly repeated to the query heads: head h gets K/V head h // group."""
    return np.repeat(x, group, axis=1)


def one_head(case, b: int, h: int):
    """``case`` cut to batch element ``b`` and query head ``h``: shapes ``(1, 1, Tq, D)``, its
    K/V head ``h // G`` and its slice of the mask (broadcast to ``(B, Hq, Tq, Tk)`` first,
    then copied)."""
    B, Hq, Tq, _ = case.query.shape
    Hkv, Tk = case.key.shape[1], case.key.shape[2]
    g = h // (Hq // Hkv)
    mask = case.attn_mask
    if mask is not None:
        mask = np.broadcast_to(mask, (B, Hq, Tq, Tk))[b : b + 1, h : h + 1].copy()
    return case._replace(
        query=case.query[b : b + 1, h : h + 1],
        key=case.key[b : b + 1, g : g + 1],
        value=case.value[b : b + 1, g : g + 1],
        attn_mask=mask,
    )


def unbatched_case(case):
    """A one-head case ``(1, 1, Tq, D)`` (:func:`one_head`'s) as the 2-D call of the same
    rows: query ``(Tq, D)``, key ``(Tk, D)``, value ``(Tk, Dv)``, its mask ``(Tq, Tk)`` (or
    its broadcast rows ``(1, Tk)``, ...), every other argument as it is."""
    mask = case.attn_mask
    if mask is not None:
        mask = mask.reshape(mask.shape[-2:]) if mask.ndim >= 2 else mask
    return case._replace(
        query=case.query[0, 0], key=case.key[0, 0], value=case.value[0, 0], attn_mask=mask
    )


def last_row_alone(case):
    """``case``'s last query row as a call of its own: one query at its own position
    (``query_start = start + Tq - 1``), with its row of the mask (:func:`rows_of`) and of
    the query documents (``segment_ids``); the keys and every other argument as they are."""
    Tq = case.query.shape[2]
    ids = case.segment_ids
    if ids is not None:
        ids = (ids[0][..., -1:], ids[1])
    return rows_of(case, [Tq - 1])._replace(query_start=case.start + Tq - 1, segment_ids=ids)


@takes_options
def case_from(query, key, value, *, layout="fixed", magnitude="fixed", **options) -> AttentionCase:
    """A fixed :class:`AttentionCase` (``@example``s, meta tests): the arrays and any keyword
    options of :mod:`oracle.rules.options`, its mask layout and value regime named."""
    return AttentionCase(query, key, value, mask_layout=layout, magnitude=magnitude, **options)


# The source lab's 3-token example (seed 000) and the quick reference's 2-token example
# (seed 003), as 4-D arrays (one batch, one head) and as cases for @example (oracle.lab).
LAB_QUERY, LAB_KEY, LAB_VALUE = (a[None, None] for a in (lab.QUERY, lab.KEY, lab.VALUE))
LAB_CAUSAL = case_from(
    LAB_QUERY, LAB_KEY, LAB_VALUE, is_causal=True, layout="seed 000: 3-token causal"
)
LAB_DECODE = case_from(
    LAB_QUERY[:, :, lab.DECODE_QUERY_START :],
    LAB_KEY,
    LAB_VALUE,
    is_causal=True,
    query_start=lab.DECODE_QUERY_START,
    layout="seed 000: cached decode",
)
QUICK_QUERY, QUICK_VALUE = lab.QUICK_QUERY[None, None], lab.QUICK_VALUE[None, None]
QUICK_CAUSAL = case_from(
    QUICK_QUERY, QUICK_QUERY, QUICK_VALUE, is_causal=True, layout="seed 003: 2-token causal"
)


def seed_batch_case() -> AttentionCase:
    """The lab's batch case (:func:`oracle.lab.batch_inputs`: B=2, H=3, L=7, dk=4, dv=5,
    ``default_rng(42)``), causal."""
    return case_from(*lab.batch_inputs(), is_causal=True, layout="seed 000: batch B=2 H=3 L=7")


SEED_CASES = (LAB_CAUSAL, LAB_DECODE, QUICK_CAUSAL)


def cache_state(cache) -> tuple:
    """Copies of what a failed call must leave as it was: ``len(cache)``, the keys and values
    it holds, for a rolling cache the held positions (an empty array for the others), and
    the ``capacity`` of a cache that shows one (impl's: the slots allocated; else None)."""
    positions = np.array(getattr(cache, "positions", ()))
    capacity = getattr(cache, "capacity", None)
    return len(cache), np.array(cache.keys), np.array(cache.values), positions, capacity


def assert_cache_unchanged(cache, before: tuple, what: str) -> None:
    """``cache`` is exactly as :func:`cache_state` found it ``before`` a failed ``what``."""
    __tracebackhide__ = True
    length, keys, values, positions, capacity = cache_state(cache)
    if length != before[0]:
        fail(f"{what} changed len(cache) from {before[0]} to {length}")
    assert_equal(out=keys, expected=before[1], what=f"keys after {what}")
    assert_equal(out=values, expected=before[2], what=f"values after {what}")
    assert_equal(out=positions, expected=before[3], what=f"held positions after {what}")
    if capacity != before[4]:
        fail(f"{what} changed the cache's capacity from {before[4]} to {capacity}")


def new_cache(subject, case, **options):
    """An empty cache of the subject's ``KVCache`` for ``case``'s K/V sizes and dtype, with
    any other constructor ``options`` (``capacity``, where it takes one)."""
    B, Hkv, _, D = case.key.shape
    return subject.module.KVCache(B, Hkv, D, case.value.shape[3], dtype=case.dtype, **options)


def decode_in_chunks(subject, case, chunks, cache=None, capacity=None):
    """Run the subject's ``cached_attention`` over ``case`` chunk by chunk (``chunks``: the
    positions per call, summing to at most ``Tk``) on ``cache`` (default: a new
    :func:`new_cache`), with the case's scale, window, sinks and mask (each only when the case
    has it); return the cache and the outputs concatenated along the query axis.

    A mask (broadcastable to ``(B, Hq, T, T)``, the whole sequence's) goes to each call cut
    to :func:`call_mask`: its queries' rows, and the columns of the positions the cache holds
    before the call, oldest first, then the appended ones (``impl.KVCache.cached_attention``'s
    rule): every earlier position, or for a rolling cache of ``capacity`` slots the last
    ``capacity`` of them."""
    cache = new_cache(subject, case) if cache is None else cache
    outputs, start = [], 0
    for n in chunks:
        rows = slice(start, start + n)
        extra = {
            name: getattr(case, name)
            for name in ("window", "sinks")
            if getattr(case, name) is not None
        }
        if case.attn_mask is not None:
            held = start if capacity is None else min(start, capacity)
            extra["attn_mask"] = call_mask(case.attn_mask, rows, np.arange(start - held, start + n))
        out = call_subject(
            subject.cached_attention,
            case.query[:, :, rows],
            case.key[:, :, rows],
            case.value[:, :, rows],
            cache,
            scale=case.scale,
            **extra,
            what=f"cached_attention of positions [{start}, {start + n})",
        )
        outputs.append(np.asarray(out))
        start += n
    return cache, np.concatenate(outputs, axis=2)


def call_mask(mask: np.ndarray, rows: slice, columns: np.ndarray) -> np.ndarray:
    """The part of a mask over a whole sequence (broadcastable to ``(B, Hq, T, T)``) that a
    call of the queries ``rows`` over the keys at positions ``columns`` reads: those rows and
    columns where the mask's axis is full, a broadcast (size-1) axis kept as it is."""
    mask = np.asarray(mask)
    if mask.ndim >= 2 and mask.shape[-2] != 1:
        mask = mask[..., rows, :]
    return mask if mask.shape[-1] == 1 else mask[..., columns]


def assert_decode_matches_oracle(subject, case, chunks, what: str):
    """Decode ``case`` through the subject's cache in ``chunks`` (:func:`decode_in_chunks`)
    and hold the outputs to the 50-digit oracle's attention over the whole case (causal,
    with its window and sinks), within :func:`bounds.attention_bounds`; returns the cache."""
    __tracebackhide__ = True
    parts, bounds = oracle_with_bounds(case, subject)
    cache, decoded = decode_in_chunks(subject, case, chunks)
    assert_output_within(decoded, case, parts, bounds, what=what, shape_what="decoded outputs")
    return cache


def needs_a_variant(subject, covered_by: str):
    """A skip marker for a property of the declared variants (:func:`declared_variants`):
    it skips, saying which property ``covered_by`` checks the same without variants, for a
    subject that declares none (window, packing, alibi, softcap, sinks)."""
    return pytest.mark.skipif(
        not any(declared_variants(subject).values()),
        reason=f"subject {subject.name} declares no variant (window, packing, alibi, softcap, "
        f"sinks): {covered_by} covers it",
    )
