"""Properties about heads and batch structure: GQA mapping, key order, independence.

Query head ``h`` reads K/V head ``h // (Hq // Hkv)`` (Ainslie et al. 2023, GQA; Shazeer 2019,
MQA). Batch elements and heads never interact.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume
from hypothesis import given
from hypothesis import note
from hypothesis import strategies as st

from attnprops.properties._support import one_head
from attnprops.properties._support import oracle_with_bounds
from attnprops.properties._support import repeat_kv
from attnprops.properties.bounds import two_computations
from attnprops.properties.checks import assert_shape_dtype
from attnprops.properties.checks import assert_within
from attnprops.properties.checks import call_subject
from attnprops.properties.plugin import current_subject
from attnprops.properties.strategies import subject_cases

SUBJECT = current_subject()


def _attend(subject, case, what):
    out = call_subject(
        subject.attention, case.query, case.key, case.value, **case.subject_kwargs(), what=what
    )
    return assert_shape_dtype(out=out, shape=np.shape(out), dtype=case.dtype, what=what)


@pytest.mark.oracle_backed
@given(case=subject_cases(SUBJECT, two_d=False, max_kv_heads=3))
def test_gqa_equals_repeated_kv(subject, case):
    """Grouped K/V equals attention with K/V explicitly repeated to Hq heads, query head
    ``h`` getting K/V head ``h // group`` (GQA, Ainslie et al. 2023)."""
    B, Hq, Tq, _ = case.query.shape
    Hkv = case.key.shape[1]
    assume(Hq > Hkv)
    group = Hq // Hkv
    repeated = case._replace(key=repeat_kv(case.key, group), value=repeat_kv(case.value, group))
    _, bounds = oracle_with_bounds(repeated, subject)
    grouped = _attend(subject, case, "grouped K/V")
    expanded = _attend(subject, repeated, "K/V repeated to Hq")
    assert_within(
        out=grouped,
        expected=expanded,
        bound=two_computations(bounds.output),
        what=f"GQA (Hq={Hq}, Hkv={Hkv}) vs K/V repeated by h // {group}",
        case=case,
    )


@pytest.mark.oracle_backed
@given(case=subject_cases(SUBJECT, causal=False), data=st.data())
def test_key_permutation_invariance(subject, case, data):
    """Without causality, permuting keys, values and the mask's key axis jointly changes
    nothing: attention is a set function of its (key, value) pairs."""
    Tk = case.key.shape[-2]
    order = np.array(data.draw(st.permutations(range(Tk)), label="key order"))
    assume((order != np.arange(Tk)).any())
    mask = case.attn_mask
    if mask is not None and mask.shape[-1] != 1:
        mask = mask[..., order]
    permuted = case._replace(
        key=case.key[..., order, :], value=case.value[..., order, :], attn_mask=mask
    )
    _, bounds = oracle_with_bounds(case, subject)
    assert_within(
        out=_attend(subject, permuted, "permuted keys"),
        expected=_attend(subject, case, "original order"),
        bound=two_computations(bounds.output),
        what="output after permuting keys and values",
        case=case,
    )


@pytest.mark.oracle_backed
@given(case=subject_cases(SUBJECT, two_d=False))
def test_batch_and_heads_independent(subject, case):
    """Each (batch element, query head) computed alone — one batch, one head, its own K/V
    head and its slice of the mask — equals the same slice of the batched result."""
    B, Hq = case.query.shape[:2]
    group = Hq // case.key.shape[1]
    _, bounds = oracle_with_bounds(case, subject)
    batched = _attend(subject, case, "batched")
    for b in range(B):
        for h in range(Hq):
            one = one_head(case, b, h)
            note(f"batch {b}, head {h} (K/V head {h // group})")
            assert_within(
                out=_attend(subject, one, f"batch {b} head {h} alone"),
                expected=batched[b : b + 1, h : h + 1],
                bound=two_computations(bounds.output[b : b + 1, h : h + 1]),
                what=f"batch {b}, head {h} alone vs batched",
                case=case,
            )
