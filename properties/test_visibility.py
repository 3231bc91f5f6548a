"""Properties about what each query may see: causality, offsets, and mask algebra.

Conventions: bool ``attn_mask`` True = may attend; float ``attn_mask`` is added to the scaled
scores; with ``is_causal`` key ``j`` is visible to local query ``i`` iff
``j <= query_start + i`` (``None`` means ``Tk - Tq``), AND-ed with the mask.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume
from hypothesis import given
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attnprops.properties._support import LAB_CAUSAL
from attnprops.properties._support import assert_output_matches_oracle
from attnprops.properties._support import case_from
from attnprops.properties._support import fit_to_subject
from attnprops.properties._support import four_d
from attnprops.properties._support import oracle_with_bounds
from attnprops.properties._support import visibility
from attnprops.properties.bounds import two_computations
from attnprops.properties.checks import assert_equal
from attnprops.properties.checks import assert_shape_dtype
from attnprops.properties.checks import assert_within
from attnprops.properties.checks import call_subject
from attnprops.properties.checks import fail
from attnprops.properties.mask_draws import MASK_LAYOUTS
from attnprops.properties.plugin import current_subject
from attnprops.properties.strategies import subject_cases
from attnprops.properties.strategies import values

SUBJECT = current_subject()


def _attend(subject, case, what="attention"):
    out = call_subject(
        subject.attention, case.query, case.key, case.value, **case.subject_kwargs(), what=what
    )
    return assert_shape_dtype(out=out, shape=np.shape(out), dtype=case.dtype, what=what)


def _agree(subject, case_a, case_b, *, what):
    """Two calls with the same exact result agree within the sum of their error bounds."""
    _, bounds_a = oracle_with_bounds(case_a, subject)
    parts_b, bounds_b = oracle_with_bounds(case_b, subject)
    a = _attend(subject, case_a, what=f"{what} (first form)")
    b = _attend(subject, case_b, what=f"{what} (second form)")
    if np.shape(a) != np.shape(b):
        fail(f"{what}: shapes {np.shape(a)} and {np.shape(b)} differ")
    assert_within(
        out=a,
        expected=b,
        bound=two_computations(bounds_a.output, bounds_b.output),
        what=what,
        case=case_a,
    )


def test_lab_future_value_does_not_change_earlier_outputs(subject):
    """The source lab's exercise (seed 000 §7): changing the last position's V leaves the
    causal outputs of the earlier positions bitwise unchanged."""
    case = fit_to_subject(LAB_CAUSAL, subject)
    value = case.value.copy()
    value[..., -1, :] = -7.0
    before = _attend(subject, case)[..., :-1, :]
    after = _attend(subject, case._replace(value=value))[..., :-1, :]
    assert_equal(out=after, expected=before, what="outputs of earlier positions", case=case)


@given(case=subject_cases(SUBJECT, causal=True), data=st.data())
def test_hidden_keys_do_not_change_output(subject, case, data):
    """Changing K/V at positions that no query may see leaves every output bitwise
    unchanged (no reading of future tokens or masked keys; source lab section 5)."""
    case = fit_to_subject(case, subject)
    visible = visibility(case)  # (B, Hq, Tq, Tk)
    B, Hkv, Tk, _ = four_d(case.key).shape
    seen_by_any = visible.reshape(B, Hkv, -1, Tk).any(axis=2)  # (B, Hkv, Tk)
    assume(not seen_by_any.all())
    new_k = data.draw(
        values(four_d(case.key).shape, case.dtype.name, case.magnitude), label="new K"
    )
    new_v = data.draw(
        values(four_d(case.value).shape, case.dtype.name, case.magnitude), label="new V"
    )
    hidden = ~seen_by_any[..., None]  # (B, Hkv, Tk, 1)
    key = np.where(hidden, new_k, four_d(case.key)).reshape(case.key.shape)
    value = np.where(hidden, new_v, four_d(case.value)).reshape(case.value.shape)
    note(f"hidden K/V positions (b, kv_head, key): {np.argwhere(hidden[..., 0]).tolist()}")
    before = _attend(subject, case)
    after = _attend(subject, case._replace(key=key, value=value))
    assert_equal(out=after, expected=before, what="output after changing hidden K/V", case=case)


@given(case=subject_cases(SUBJECT, causal=True), data=st.data())
def test_hidden_keys_whose_scores_overflow_change_nothing(subject, case, data):
    """Keys that no query may see, with K and V near the dtype's maximum, leave every output
    bitwise unchanged (the rulebook's overflow rule is about visible scores only): a kernel
    that computes the hidden scores and then hides them (``inf - inf``, ``0 * inf``), or
    rescales by a maximum taken before the mask, gives NaN or a moved output (finding F4:
    PyTorch SDPA). ``q . k`` passes the compute dtype's range for float32, float64 and
    bfloat16 inputs (bfloat16's maximum is float32's, nearly); float16 inputs, computed in
    float32, only get large hidden K/V (``65504**2 * D`` is far inside float32)."""
    case = fit_to_subject(case, subject)
    visible = visibility(case)  # (B, Hq, Tq, Tk)
    B, Hkv, Tk, _ = four_d(case.key).shape
    seen_by_any = visible.reshape(B, Hkv, -1, Tk).any(axis=2)  # (B, Hkv, Tk)
    assume(not seen_by_any.all())
    hidden = ~seen_by_any[..., None]  # (B, Hkv, Tk, 1)
    near_max = ml_dtypes.finfo(case.dtype).max / data.draw(
        st.sampled_from([1, 2, 16]), label="max / n"
    )
    signs = data.draw(
        hnp.arrays(np.int8, four_d(case.key).shape, elements=st.sampled_from([-1, 1])),
        label="signs of the new K",
    )
    key = np.where(hidden, signs * near_max, four_d(case.key)).astype(case.dtype)
    value = np.where(hidden, -near_max, four_d(case.value)).astype(case.dtype)
    note(
        f"hidden K/V positions (b, kv_head, key): {np.argwhere(hidden[..., 0]).tolist()}; "
        f"their K set to +-{near_max:.6g} (the signs drawn), their V to {-near_max:.6g}"
    )
    before = _attend(subject, case)
    changed = case._replace(key=key.reshape(case.key.shape), value=value.reshape(case.value.shape))
    after = _attend(subject, changed, what="attention with hidden K/V near the dtype's maximum")
    assert_equal(out=after, expected=before, what="output after changing hidden K/V", case=case)


@pytest.mark.oracle_backed
@given(case=subject_cases(SUBJECT, causal=True, masks_allowed=False, two_d=False), data=st.data())
def test_query_chunk_equals_rows_of_full_causal(subject, case, data):
    """A chunk of queries at ``query_start = s`` equals rows ``[s, s + n)`` of the full
    causal result, both with all keys and with keys ``[0, s + n)`` and ``query_start=None``
    (chunked prefill and KV-cache decode; the source lab's offset trap)."""
    q, k, v = case.query, case.key, case.value
    Tk = k.shape[2]
    full_q = data.draw(
        values(q.shape[:2] + (Tk, q.shape[3]), case.dtype.name, case.magnitude), label="full query"
    )
    full = case._replace(query=full_q, query_start=None)
    parts, bounds = oracle_with_bounds(full, subject)
    expected = _attend(subject, full, what="full causal attention")
    s = data.draw(st.integers(0, Tk - 1), label="query_start")
    n = data.draw(st.integers(1, Tk - s), label="chunk length")
    rows = slice(s, s + n)
    tolerance = two_computations(bounds.output[:, :, rows])
    chunks = (  # (call, how it is called, what its output is compared with)
        (
            case._replace(query=full_q[:, :, rows], query_start=s),
            "chunk, all keys, explicit query_start",
            f"chunk at query_start={s}",
        ),
        (
            case._replace(
                query=full_q[:, :, rows],
                key=k[:, :, : s + n],
                value=v[:, :, : s + n],
                query_start=None,
            ),
            "chunk over a key prefix, query_start=None",
            f"chunk over keys [0, {s + n})",
        ),
    )
    for chunk, how, what in chunks:
        assert_within(
            out=_attend(subject, chunk, what=how),
            expected=expected[:, :, rows],
            bound=tolerance,
            what=f"{what} vs rows [{s}, {s + n}) of full causal",
            case=chunk,
        )


@pytest.mark.oracle_backed
@given(case=subject_cases(SUBJECT, masks_allowed=True))
def test_is_causal_equals_explicit_mask(subject, case):
    """``is_causal=True`` with ``query_start`` equals the explicit bool mask
    ``key <= query_start + query`` AND-ed with ``attn_mask`` (and ``is_causal=False``)."""
    assume(case.is_causal)
    q4 = four_d(case.query)
    Tq, Tk = q4.shape[2], four_d(case.key).shape[2]
    start = case.start
    causal = np.arange(Tk)[None, :] <= start + np.arange(Tq)[:, None]  # (Tq, Tk)
    mask = case.attn_mask
    if mask is None:
        explicit = causal
    elif mask.dtype == np.bool_:
        explicit = mask & causal
    else:
        explicit = np.where(causal, mask, -np.inf).astype(mask.dtype)
    other = case._replace(attn_mask=explicit, is_causal=False)
    _agree(subject, case, other, what="is_causal vs explicit lower-triangular mask")


@pytest.mark.requires("float_masks")
@pytest.mark.oracle_backed
@given(case=subject_cases(SUBJECT))
def test_bool_mask_equals_additive_mask(subject, case):
    """A bool mask equals the additive mask ``0`` where True and ``-inf`` where False."""
    assume(case.attn_mask is not None and case.attn_mask.dtype == np.bool_)
    additive = np.where(case.attn_mask, 0.0, -np.inf).astype(case.dtype)
    _agree(
        subject, case, case._replace(attn_mask=additive), what="bool mask vs additive 0/-inf mask"
    )


# every layout that broadcasts (the per-head layout is already expanded), (Tq, Tk) first
_BROADCAST_LAYOUTS = tuple(n for n in MASK_LAYOUTS if n not in ("none", "per-head (B, Hq, Tq, Tk)"))


@pytest.mark.parametrize("layout", _BROADCAST_LAYOUTS)
@pytest.mark.oracle_backed
@given(data=st.data())
def test_broadcast_mask_equals_expanded(subject, layout, data):
    """A mask of any broadcastable shape equals its fully expanded ``(B, Hq, Tq, Tk)`` copy
    (quick reference: align every mask axis with [B, Hq, Tq, Tk]). One test per layout, so
    each gets the profile's examples. A (Tq, Tk) mask when B == Tq, the shape of a (B, Tk)
    key-padding mask: test_two_d_mask_applies_to_every_batch_element."""
    case = data.draw(subject_cases(SUBJECT, two_d=False, mask_layouts=(layout,)), label="case")
    case = fit_to_subject(case, subject)
    B, Hq, Tq, _ = case.query.shape
    expanded = np.broadcast_to(case.attn_mask, (B, Hq, Tq, case.key.shape[2])).copy()
    assume(expanded.shape != case.attn_mask.shape)
    _agree(
        subject,
        case,
        case._replace(attn_mask=expanded),
        what=f"mask {case.attn_mask.shape} vs expanded {expanded.shape}",
    )


def _positions_then_eighths(draw, batch: int, tk: int, dv: int) -> np.ndarray:
    """Values ``(batch, 1, tk, dv)`` float64: column 0 each key's position, the others drawn
    multiples of 1/8 in [-1, 1]."""
    eighths = st.integers(-8, 8).map(lambda n: n / 8)
    value = np.zeros((batch, 1, tk, dv))
    value[..., 0] = np.arange(tk)
    value[..., 1:] = draw(hnp.arrays(np.float64, (batch, 1, tk, dv - 1), elements=eighths))
    return value


def _bool_or_float(draw, shown: np.ndarray, dtype) -> tuple[np.ndarray, str]:
    """``shown`` as a bool mask, or as 0/-inf in ``dtype`` when the subject takes float
    masks and the draw says so; and which."""
    kind = draw(
        st.sampled_from(["bool", "float"] if SUBJECT.capabilities.float_masks else ["bool"])
    )
    mask = shown.copy() if kind == "bool" else np.where(shown, 0.0, -np.inf).astype(dtype)
    return mask, kind


def _zero_scores(value: np.ndarray, mask: np.ndarray, layout: str, *, heads: int, tq: int, d: int):
    """The call of ``value`` ``(B, 1, Tk, Dv)`` (in the call's dtype) and ``mask`` whose
    queries ``(B, heads, tq, d)`` and keys are zero: every score is 0, so each row's weights
    are uniform over its visible keys."""
    dtype = value.dtype
    batch, _, tk, _ = value.shape
    return case_from(
        np.zeros((batch, heads, tq, d), dtype),
        np.zeros((batch, 1, tk, d), dtype),
        value,
        attn_mask=mask,
        layout=layout,
    )


@st.composite
def _padding_shaped_mask_cases(draw):
    """Calls whose 2-D ``(Tq, Tk)`` mask has the shape of a ``(B, Tk)`` key-padding mask:
    ``B == Tq`` in [2, 3], one head, zero queries and keys (uniform weights over the visible
    keys), value column 0 the key's position, the other entries drawn, row ``i`` of the mask
    showing keys ``0 .. i`` (bool, or 0/-inf when the subject takes float masks). Every two
    rows show different keys with different means, so reading row ``b`` for every query of
    batch element ``b`` moves the output of every other query by at least 1/6, far beyond the
    bound, whatever the draws."""
    dtype = draw(st.sampled_from(SUBJECT.capabilities.dtypes))
    batch = draw(st.integers(2, 3))
    tk, d, dv = draw(st.integers(2, 5)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    value = _positions_then_eighths(draw, batch, tk, dv).astype(dtype)
    rows = np.arange(tk)[None, :] <= np.arange(batch)[:, None]  # (Tq, Tk): keys 0 .. i
    mask, kind = _bool_or_float(draw, rows, dtype)
    return _zero_scores(value, mask, f"(Tq, Tk) with B == Tq ({kind})", heads=1, tq=batch, d=d)


@pytest.mark.oracle_backed
@given(case=_padding_shaped_mask_cases())
def test_two_d_mask_applies_to_every_batch_element(subject, case):
    """A 2-D ``(Tq, Tk)`` mask broadcasts to every batch element and head, row ``i`` for
    query ``i`` (NumPy broadcasting, the rulebook's rule; PyTorch SDPA and JAX agree), even
    when ``B == Tq`` gives it the shape of PyTorch ``nn.MultiheadAttention``'s ``(B, Tk)``
    key-padding mask: checked against the 50-digit oracle on calls where reading it as key
    padding shows (:func:`_padding_shaped_mask_cases`). test_broadcast_mask_equals_expanded
    checks the law on general draws, where ``B == Tq > 1`` with rows that differ is rare."""
    assert_output_matches_oracle(
        subject, case, what="(Tq, Tk) mask with B == Tq: output vs 50-digit oracle"
    )


@st.composite
def _head_axis_mask_cases(draw):
    """Calls with a 3-D ``(Hq, Tq, Tk)`` mask whose leading axis could be read as the batch:
    ``B == Hq`` in [2, 3] (one K/V head), zero queries and keys (uniform weights over the
    visible keys), value column 0 the key's position, head ``h``'s mask showing keys ``0 ..
    h`` to each of its 1-3 queries (bool, or 0/-inf when the subject takes float masks).
    Reading slice ``b`` for batch element ``b`` moves every output whose head differs from
    its batch element by at least 1/2, far beyond the bound."""
    dtype = draw(st.sampled_from(SUBJECT.capabilities.dtypes))
    n = draw(st.integers(2, 3))
    tq, tk = draw(st.integers(1, 3)), draw(st.integers(n, 5))
    d, dv = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    value = _positions_then_eighths(draw, n, tk, dv).astype(dtype)
    shown = np.arange(tk)[None, :] <= np.arange(n)[:, None]  # (Hq, Tk): keys 0 .. h
    mask, kind = _bool_or_float(draw, np.broadcast_to(shown[:, None, :], (n, tq, tk)), dtype)
    return _zero_scores(value, mask, f"(Hq, Tq, Tk) with B == Hq ({kind})", heads=n, tq=tq, d=d)


@pytest.mark.oracle_backed
@given(case=_head_axis_mask_cases())
def test_three_d_mask_leading_axis_is_the_heads(subject, case):
    """A 3-D ``(Hq, Tq, Tk)`` mask broadcasts as NumPy aligns it, to ``(1, Hq, Tq, Tk)``:
    its leading axis is the heads, for every batch element (the rulebook's rule; PyTorch
    SDPA and JAX agree), even when ``B == Hq`` lets code that expands it with ``mask[:,
    None]`` (Hugging Face's 3-D ``(B, Tq, Tk)`` masks) read it as per batch element:
    checked against the 50-digit oracle on calls where that reading shows
    (:func:`_head_axis_mask_cases`); general draws reach it rarely (3-D masks come only from
    the "other broadcastable" layout, with ``B == Hq > 1``)."""
    assert_output_matches_oracle(
        subject, case, what="(Hq, Tq, Tk) mask with B == Hq: output vs 50-digit oracle"
    )


@pytest.mark.requires("float_masks")
@pytest.mark.oracle_backed
@given(case=subject_cases(SUBJECT, two_d=False), data=st.data())
def test_row_constant_shift_invariance(subject, case, data):
    """Adding one finite constant to every score of a row changes nothing (softmax is
    shift invariant). Applied as a float mask ``0/-inf`` (the case's visibility) plus a
    per-(batch, head, query) constant up to about 600 (a missing max subtraction overflows)
    or about -20000 (a "-1e4 means minus infinity" mask stops hiding); the constant is the
    same number for the whole row, so the law is exact."""
    B, Hq, Tq, _ = case.query.shape
    shift = data.draw(values((B, Hq, Tq, 1), "float64", "unit"), label="row shift / 4")
    big = data.draw(st.sampled_from([0.0, 150.0, 600.0, -20000.0]), label="offset")
    dtype = np.float64 if case.dtype == np.float64 else np.float32
    shift = (shift * 4 + big).astype(dtype)
    base = np.where(visibility(case._replace(is_causal=False)), 0.0, -np.inf).astype(dtype)
    first = case._replace(attn_mask=base)
    second = case._replace(attn_mask=base + shift)  # (B, Hq, Tq, Tk)
    note(f"row shifts: {shift.ravel().tolist()}")
    _agree(subject, first, second, what="scores shifted by a per-row constant")


def _positions(row: np.ndarray) -> list[int]:
    return np.flatnonzero(row).tolist()


# What this subject declares of the rules by position and document, drawn by the probe below.
_LOCAL = dict(
    windows=True if SUBJECT.capabilities.window else None,
    packing=SUBJECT.capabilities.segment_ids and SUBJECT.capabilities.chunk_size,
    softcap=SUBJECT.capabilities.softcap,  # with every key zero the capped scores are 0
)


@given(case=subject_cases(SUBJECT, float_masks=False, magnitudes=("unit",), **_LOCAL))
def test_each_query_sees_exactly_its_keys(subject, case):
    """Each query sees exactly the keys the rulebook shows it: the mask AND causality AND, as
    the subject declares them, the window, the document and the chunk (and a soft cap, which
    must hide nothing and show nothing hidden). With every key zero
    all visible scores are equal, and with the values the identity over keys (``Dv = Tk``)
    the output row is the weight row, ``1/n`` on the ``n`` visible keys and exactly 0
    elsewhere. A window one key too wide or too narrow (FlashAttention's ``window_size=(W,
    0)`` sees ``W + 1`` keys, Hugging Face's ``sliding_window=W`` sees ``W``), a window or a
    document boundary dropped on some path, a causal diagonal off by one: each shows here as
    the wrong set of keys, named by position."""
    case = fit_to_subject(case, subject)
    Tk = case.key.shape[-2]
    value_shape = case.key.shape[:-1] + (Tk,)
    probe = case._replace(
        key=np.zeros_like(case.key),
        value=np.broadcast_to(np.eye(Tk, dtype=case.dtype), value_shape).copy(),
    )
    seen = four_d(_attend(subject, probe)) != 0  # (B, Hq, Tq, Tk)
    visible = visibility(probe)
    if np.array_equal(seen, visible):
        return
    b, h, i = (int(n) for n in np.argwhere((seen != visible).any(axis=-1))[0])
    fail(
        f"query (batch={b}, head={h}, query={i}) at position {case.start + i} sees keys "
        f"{_positions(seen[b, h, i])}; the rulebook shows it {_positions(visible[b, h, i])}\n"
        f"  call: {probe.describe()}"
    )
