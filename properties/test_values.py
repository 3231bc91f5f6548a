"""Properties about values: agreement with the 50-digit oracle, weight rows, convexity.

Shape legend: query (B, Hq, Tq, D), key (B, Hkv, Tk, D), value (B, Hkv, Tk, Dv),
weights (B, Hq, Tq, Tk), output (B, Hq, Tq, Dv); 2-D inputs are one head of one batch.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import example
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attnprops.properties._support import LAB_CAUSAL
from attnprops.properties._support import LAB_DECODE
from attnprops.properties._support import QUICK_CAUSAL
from attnprops.properties._support import assert_output_matches_oracle
from attnprops.properties._support import assert_weights_match_oracle
from attnprops.properties._support import fit_to_subject
from attnprops.properties._support import four_d
from attnprops.properties._support import needs_a_variant
from attnprops.properties._support import oracle_with_bounds
from attnprops.properties._support import repeat_kv
from attnprops.properties._support import seed_batch_case
from attnprops.properties._support import subject_output
from attnprops.properties._support import subject_weights
from attnprops.properties._support import visibility
from attnprops.properties.checks import assert_equal
from attnprops.properties.checks import assert_shape_dtype
from attnprops.properties.checks import assert_within
from attnprops.properties.checks import call_subject
from attnprops.properties.checks import fail
from attnprops.properties.plugin import current_subject
from attnprops.properties.strategies import AttentionCase
from attnprops.properties.strategies import declared_variants
from attnprops.properties.strategies import subject_cases

SUBJECT = current_subject()


def _cases(**kwargs):
    two_d = st.booleans() if SUBJECT.capabilities.two_d_inputs else st.just(False)
    return two_d.flatmap(lambda t: subject_cases(SUBJECT, two_d=t, **kwargs))


@pytest.mark.oracle_backed
@given(case=_cases())
@example(case=LAB_CAUSAL)
@example(case=LAB_DECODE)
@example(case=QUICK_CAUSAL)
@example(case=seed_batch_case())
@example(case=LAB_CAUSAL._replace(block_size=1))  # blocked subjects: one key per block
@example(case=LAB_CAUSAL._replace(block_size=2))  # and a last block shorter than the rest
def test_output_matches_oracle(subject, case):
    """|output - oracle| <= the per-element forward error bound of properties.bounds.

    Law: o = softmax(scale q k^T + mask) v (Vaswani et al. 2017, eq. 1); bound from Higham
    ch. 3 and Blanchard, Higham & Higham 2021. The seed documents' examples run first.
    """
    case = fit_to_subject(case, subject)
    assert_output_matches_oracle(subject, case, what="output vs 50-digit oracle")


@st.composite
def _scale_showing_cases(draw):
    """Calls on which the default scale shows in every output row: ``D >= 2``, 2 or 3 query
    heads (on 1 K/V head or as many), no mask, and each query ``a e_0`` scores the keys
    ``a s j`` (``j = 0 .. Tk - 1``, ``a, s`` in ``[1/2, 2]``), distinct, against values whose
    first column is ``j``; the key and value columns past the first are drawn. Every number
    is a multiple of 1/8 below 2**5, exact in float16. A wrong default scale (1, 1/D,
    sqrt(D), the model width's ``1/sqrt(Hq D)``, ...) moves the softmax of every row by far
    more than the error bound, so every example is a killing one, whatever the draws."""
    dtype = draw(st.sampled_from(SUBJECT.capabilities.dtypes))
    d, dv = draw(st.integers(2, 8)), draw(st.integers(1, 4))
    tq, tk = draw(st.integers(1, 3)), draw(st.integers(2, 6))
    hq = draw(st.integers(2, 3))
    hkv = draw(st.sampled_from([1, hq]))
    a, s = draw(st.integers(4, 16)) / 8, draw(st.integers(4, 16)) / 8
    eighths = st.integers(-8, 8).map(lambda n: n / 8)
    query = np.zeros((1, hq, tq, d))
    query[..., 0] = a
    key = np.zeros((1, hkv, tk, d))
    key[..., 0] = s * np.arange(tk)
    key[..., 1:] = draw(hnp.arrays(np.float64, (hkv, tk, d - 1), elements=eighths))
    value = np.zeros((1, hkv, tk, dv))
    value[..., 0] = np.arange(tk)
    value[..., 1:] = draw(hnp.arrays(np.float64, (hkv, tk, dv - 1), elements=eighths))
    return AttentionCase.plain(query.astype(dtype), key.astype(dtype), value.astype(dtype), "unit")


@pytest.mark.oracle_backed
@given(case=_scale_showing_cases())
def test_default_scale_is_inverse_sqrt_head_dim(subject, case):
    """``scale=None`` means ``1/sqrt(D)`` (Vaswani et al. 2017, eq. 1; PyTorch, JAX and
    FlashAttention share the default), checked against the 50-digit oracle on calls built so
    that the scale shows (:func:`_scale_showing_cases`). test_output_matches_oracle checks the
    same law on general draws, where many (zeros, ties, a single visible key, D = 1) do not
    depend on the scale: in 20 seeded runs of its 50 examples, 6 runs had no call on which a
    default of 1 changed the output."""
    case = fit_to_subject(case, subject)
    assert_output_matches_oracle(subject, case, what="default scale: output vs 50-digit oracle")


@pytest.mark.requires("weights")
@pytest.mark.oracle_backed
@given(case=_cases())
@example(case=LAB_CAUSAL)
@example(case=QUICK_CAUSAL)
def test_weights_match_oracle(subject, case):
    """|weights - oracle| <= the per-element bound; law: softmax of the scaled scores along
    the key axis (Vaswani et al. 2017), bound from Blanchard, Higham & Higham 2021."""
    _weights_match_oracle(subject, case, "weights vs 50-digit oracle")


def _weights_match_oracle(subject, case, what: str) -> None:
    """The subject's weights for ``case`` (fitted to the subject) within the per-element
    bound of the oracle's."""
    __tracebackhide__ = True
    assert_weights_match_oracle(subject, fit_to_subject(case, subject), what)


@pytest.mark.requires("weights")
@pytest.mark.oracle_backed
@needs_a_variant(SUBJECT, covered_by="test_weights_match_oracle")
@given(case=subject_cases(SUBJECT, **declared_variants(SUBJECT)))
def test_weights_with_declared_variants_match_oracle(subject, case):
    """With every variant the subject declares drawn together (windows, documents and
    chunks, ALiBi, caps, sinks), |weights - oracle| <= the per-element bound, as
    test_weights_match_oracle: the weights are the softmax the output is made of, a sink
    one more key whose weight is not returned (a row then sums to less than 1). A weights
    path that rebuilds them from the lse without the sink, or builds its own mask without
    the window or the documents, moves them."""
    _weights_match_oracle(subject, case, "weights with the declared variants vs 50-digit oracle")


@pytest.mark.requires("weights")
@pytest.mark.oracle_backed
@given(case=_cases())
@example(case=LAB_CAUSAL)
def test_weight_rows_sum_to_one(subject, case):
    """Each weight row sums to 1 within the sum of its per-element bounds (softmax
    normalizes along keys; quick reference invariant 'softmax along Tk, rows sum to 1')."""
    case = fit_to_subject(case, subject)
    parts, bounds = oracle_with_bounds(case, subject)
    out = subject_weights(subject, case, parts)
    rows = out.astype(np.float64).sum(axis=-1)
    tk = out.shape[-1]
    slack = bounds.weights.sum(axis=-1) + 2.0**-53 * tk * np.abs(out.astype(np.float64)).sum(
        axis=-1
    )
    assert_within(
        out=rows, expected=np.ones_like(rows), bound=slack, what="weight row sums", case=case
    )


@pytest.mark.requires("weights")
@given(case=_cases())
@example(case=LAB_CAUSAL)
def test_hidden_keys_get_zero_weight(subject, case):
    """Keys hidden by the mask or by causality get weight exactly 0 (not 1e-30, not -0
    mixed with garbage): the softmax of -inf is 0."""
    case = fit_to_subject(case, subject)
    visible = visibility(case)
    out = call_subject(
        subject.attention_weights, case.query, case.key, **case.kwargs(), what="attention_weights"
    )
    out4 = four_d(np.asarray(out))
    if out4.shape != visible.shape:
        fail(f"weights: shape {np.shape(out)} does not match the scores' shape")
    hidden = out4[~visible]
    assert_equal(
        out=hidden, expected=np.zeros_like(hidden), what="weights of hidden keys", case=case
    )


@pytest.mark.oracle_backed
@given(case=_cases())
def test_output_within_visible_value_range(subject, case):
    """Each output lies within [min, max] of the visible values, per channel (a convex
    combination), widened only by the output's error bound."""
    parts, bounds = oracle_with_bounds(case, subject)
    visible = visibility(case)  # (B, Hq, Tq, Tk)
    out = four_d(subject_output(subject, case, parts)).astype(np.float64)
    low, high = _visible_value_range(case, visible, case.value)  # (B, Hq, Tq, Dv) each
    # Distance outside [low, high] against the bound; clip is exact (it returns out, low or
    # high), so no rounding of the test's own (a centre/half-width form rounds at |v| ~ 16).
    assert_within(
        out=out,
        expected=np.clip(out, low, high),
        bound=four_d(bounds.output),
        what="output inside the visible values' range",
        case=case,
    )


def _visible_value_range(case, visible: np.ndarray, value: np.ndarray):
    """Per output element, [min, max] of the values its row sees: ``(B, Hq, Tq, Dv)`` each."""
    group = visible.shape[1] // four_d(value).shape[1]
    v = repeat_kv(four_d(value).astype(np.float64), group)[:, :, None]  # (B,Hq,1,Tk,Dv)
    seen = visible[..., None]  # (B, Hq, Tq, Tk, 1)
    return np.where(seen, v, np.inf).min(axis=3), np.where(seen, v, -np.inf).max(axis=3)


# Fractions of the dtype's largest finite value for the value entries below.
_NEAR_MAX = (1.0, -1.0, 0.9375, -0.75, 0.5)


@st.composite
def _near_max_draws(draw):
    """A case and the fractions of the dtype's maximum its values take (float64, shaped
    like its value)."""
    case = draw(_cases())
    elements = st.sampled_from(_NEAR_MAX)
    return case, draw(hnp.arrays(np.float64, case.value.shape, elements=elements))


# F3's counterexample (docs/findings.md), always run: three equally weighted keys (zero
# queries and keys, D = 1) whose values are all the maximum; the drawn cases reach it only
# by chance.
_THREE_KEYS_AT_THE_MAXIMUM = (
    AttentionCase.plain(
        np.zeros((1, 1, 1, 1)), np.zeros((1, 1, 3, 1)), np.zeros((1, 1, 3, 1)), "large"
    ),
    np.ones((1, 1, 3, 1)),
)


@pytest.mark.robustness(
    "values near the dtype's maximum: PyTorch SDPA and JAX return inf "
    "here too (docs/findings.md F3)"
)
@given(drawn=_near_max_draws())
@example(drawn=_THREE_KEYS_AT_THE_MAXIMUM)
def test_values_near_the_dtype_maximum_give_a_finite_output(subject, drawn):
    """Values of magnitude up to the dtype's maximum still give a finite output inside the
    visible values' range: each output is a convex combination of values, so it always fits
    the dtype. An implementation that sums ``exp(s - m) * v`` before dividing (an online
    softmax's running output), or whose rounded weights sum past 1, overflows on the way
    and returns inf, or NaN from ``inf - inf`` (the project rule: never NaN). Slack: the
    range widened by ``(Tk + 2) * eps * max|v|`` (a dot product of Tk terms, Higham 2002,
    ch. 3, plus the final rounding)."""
    case, fractions = drawn  # the values: fractions of the dtype's maximum
    case = fit_to_subject(case, subject)
    big = float(ml_dtypes.finfo(case.dtype).max)
    value = (fractions * big).astype(case.dtype)
    case = case._replace(value=value)
    out = call_subject(
        subject.attention,
        case.query,
        case.key,
        case.value,
        **case.subject_kwargs(),
        what="attention",
    )
    out = four_d(np.asarray(out)).astype(np.float64)
    if not np.isfinite(out).all():
        fail(
            f"values near the dtype's maximum ({case.dtype}, max {big:.4g}): "
            f"{int((~np.isfinite(out)).sum())} of {out.size} output elements are inf or NaN"
            f"\n  call: {case.describe()}"
        )
    low, high = _visible_value_range(case, visibility(case), value)
    Tk = four_d(case.key).shape[2]
    slack = np.full(out.shape, (Tk + 2) * float(ml_dtypes.finfo(case.dtype).eps) * big)
    assert_within(
        out=out,
        expected=np.clip(out, low, high),
        bound=slack,
        what="output inside the visible values' range (values near the dtype max)",
        case=case,
    )


@given(case=_cases(masks_allowed=False), data=st.data())
def test_single_visible_key_returns_its_value(subject, case, data):
    """A query row that sees exactly one key returns exactly that key's value (its weight is
    exp(0)/exp(0) = 1, every other weight exp(-inf) = 0)."""
    q, k, v = four_d(case.query), four_d(case.key), four_d(case.value)
    B, Hq, Tq, _ = q.shape
    Tk = k.shape[2]
    chosen = data.draw(
        st.lists(st.integers(0, Tk - 1), min_size=B * Hq * Tq, max_size=B * Hq * Tq),
        label="visible key per row",
    )
    chosen = np.array(chosen).reshape(B, Hq, Tq)
    mask = np.arange(Tk) == chosen[..., None]  # (B, Hq, Tq, Tk) one True per row
    if case.query.ndim == 2:
        mask = mask[0, 0]
    out = call_subject(
        subject.attention,
        case.query,
        case.key,
        case.value,
        attn_mask=mask,
        scale=case.scale,
        **case.block_kwargs(),
        what="attention",
    )
    group = Hq // k.shape[1]
    expected = np.take_along_axis(repeat_kv(v, group), chosen[..., None], axis=2)  # (B,Hq,Tq,Dv)
    if case.query.ndim == 2:
        expected = expected[0, 0]
    out = assert_shape_dtype(out=out, shape=expected.shape, dtype=case.dtype, what="output")
    assert_equal(out=out, expected=expected, what="output with one visible key", case=case)
