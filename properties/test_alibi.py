"""Properties of ALiBi, ``alibi_slopes``: the query at absolute position ``p = query_start + i``
adds ``-slope * |p - j|`` to its scaled score for key ``j`` (:mod:`oracle.rules.alibi`;
FlashAttention's ``alibi_slopes``). A subject declares ``alibi``; without it these
properties skip.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from attnprops.oracle.rules import alibi_bias
from attnprops.oracle.rules import check_alibi_slopes
from attnprops.properties._support import assert_output_matches_oracle
from attnprops.properties._support import fit_to_subject
from attnprops.properties._support import four_d
from attnprops.properties._support import oracle_with_bounds
from attnprops.properties._support import subject_output
from attnprops.properties.checks import assert_within
from attnprops.properties.plugin import current_subject
from attnprops.properties.strategies import declared_variants
from attnprops.properties.strategies import subject_cases

SUBJECT = current_subject()
# ALiBi with what else the subject declares: windows, documents, chunks, caps, sinks
_WITH = declared_variants(SUBJECT, alibi=True)


@pytest.mark.requires("alibi")
@pytest.mark.oracle_backed
@given(case=subject_cases(SUBJECT, **_WITH))
def test_alibi_output_matches_oracle(subject, case):
    """With ALiBi slopes (Press et al.'s geometric ones, and any in [-2, 2], per head or per
    batch element and head; with masks, causality, offsets, GQA, windows, documents, caps
    and sinks as declared) the output is within the error bound of the 50-digit oracle's, which adds
    ``-slope |p - j|`` exactly: a sign inverted, a distance from the wrong origin or a slope
    read from the wrong head moves it."""
    assert_output_matches_oracle(
        subject, fit_to_subject(case, subject), what="output with ALiBi vs 50-digit oracle"
    )


def _explicit(case) -> np.ndarray:
    """``case``'s ALiBi and mask as one float64 mask ``(B or 1, Hq, Tq, Tk)``:
    ``-slope |p - j|`` rounded to float64, plus the float mask (a bool mask as 0 / ``-inf``)."""
    B, Hq, Tq, _ = case.query.shape
    slopes = check_alibi_slopes(case.alibi_slopes, B, Hq)
    bias = alibi_bias(slopes, case.start, slice(0, Tq), slice(0, case.key.shape[-2]))
    mask = case.attn_mask
    if mask is not None:
        mask = four_d(mask) if mask.ndim == 2 else mask
        extra = np.where(mask, 0.0, -np.inf) if mask.dtype == np.bool_ else mask.astype(np.float64)
        bias = bias + extra
    return bias


@pytest.mark.requires("alibi", "float_masks")
@pytest.mark.oracle_backed
@given(case=subject_cases(SUBJECT, alibi=True, two_d=False))
def test_alibi_equals_its_explicit_float_mask(subject, case):
    """ALiBi equals the same bias passed as a float mask (``-slope |p - j|`` in float64,
    added to the call's own mask): the two outputs agree within the sum of their error
    bounds plus the difference of their exact values (the float64 rounding of the explicit
    bias, computed by the oracle)."""
    case = fit_to_subject(case, subject)
    explicit = case._replace(attn_mask=_explicit(case), alibi_slopes=None, mask_layout="alibi")
    parts_a, bounds_a = oracle_with_bounds(case, subject)
    parts_b, bounds_b = oracle_with_bounds(explicit, subject)
    a = subject_output(subject, case, parts_a, what="attention with alibi_slopes")
    b = subject_output(subject, explicit, parts_b, what="attention with the explicit mask")
    exact_gap = np.abs(parts_a.output.value - parts_b.output.value)
    assert_within(
        out=a,
        expected=b,
        bound=bounds_a.output + bounds_b.output + exact_gap,
        what="alibi_slopes vs the explicit float mask",
        case=case,
    )
