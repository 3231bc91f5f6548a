"""Properties of the log-sum-exp output, ``return_lse=True``: ``attention`` returns
``(output, lse)`` with ``lse = log sum_j exp(s_j)`` over each row's visible keys (natural
log, the sink not counted, ``-inf`` for a row that sees no key), as FlashAttention's
``softmax_lse`` and FlexAttention's ``return_lse`` (:meth:`impl.Attention.attention`). A
subject declares ``lse``; without it these properties skip.

The laws: ``lse`` is within its error bound of the 50-digit oracle's (:func:`bounds.lse_bounds`);
and two disjoint key sets, each attended with its ``lse``, merge into the attention over their
union (``L = log(e^{l_A} + e^{l_B})``, ``o = e^{l_A - L} o_A + e^{l_B - L} o_B``), what
split-KV, cascade and context-parallel kernels rely on; a part that sees no key has ``lse =
-inf`` and drops out of the merge.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume
from hypothesis import given
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attnprops.properties._support import fit_to_subject
from attnprops.properties._support import four_d
from attnprops.properties._support import oracle_parts
from attnprops.properties._support import visibility
from attnprops.properties.bounds import attention_bounds
from attnprops.properties.bounds import lse_bounds
from attnprops.properties.checks import assert_within
from attnprops.properties.lse import assert_lse_within
from attnprops.properties.lse import every_part_sees_a_key
from attnprops.properties.lse import exact_merge
from attnprops.properties.lse import merge_bounds
from attnprops.properties.lse import output_and_lse
from attnprops.properties.plugin import current_subject
from attnprops.properties.strategies import declared_variants
from attnprops.properties.strategies import subject_cases
from attnprops.properties.variant_draws import with_keys_hidden

SUBJECT = current_subject()
_ALL = declared_variants(SUBJECT)
_NO_SINKS = declared_variants(SUBJECT, sinks=False)


@pytest.mark.requires("lse")
@pytest.mark.oracle_backed
@given(case=st.one_of(subject_cases(SUBJECT), subject_cases(SUBJECT, **_ALL)))
def test_lse_matches_oracle(subject, case):
    """The ``lse`` returned with the output is within its error bound of the 50-digit
    oracle's (the sink not counted; ``-inf`` exactly for a row that sees no key), with masks,
    causality, offsets, GQA, blocks and, half the time, every declared variant."""
    _lse_matches_oracle(subject, case)


@pytest.mark.requires("lse", "sinks")
@pytest.mark.oracle_backed
@given(case=subject_cases(SUBJECT, sinks=True))
def test_lse_with_sinks_counts_only_the_keys(subject, case):
    """With sinks (and no other variant) the ``lse`` is still the keys' alone, within its
    bound of the oracle's: a sink joins the softmax's denominator, never ``lse``; a partial
    ``lse`` that carries it counts it once per split in a split-KV merge
    (rocm-libraries#12227)."""
    _lse_matches_oracle(subject, case)


@pytest.mark.requires("lse")
@pytest.mark.oracle_backed
@given(case=subject_cases(SUBJECT, two_d=True, **_ALL))
def test_two_d_lse_matches_oracle(subject, case):
    """2-D inputs ``(T, D)`` with ``return_lse=True`` give an output ``(Tq, Dv)`` and an
    ``lse`` ``(Tq,)``, within its bound of the oracle's (every declared variant drawn): an
    unbatched path that squeezes the output but not the ``lse`` (``(1, Tq)``), or computes the
    ``lse`` of another row layout, fails here."""
    _lse_matches_oracle(subject, case)


def _lse_matches_oracle(subject, case) -> None:
    case = fit_to_subject(case, subject)
    note(f"case: {case.describe()}")
    parts = oracle_parts(case, subject)
    _, lse = output_and_lse(subject, case, "attention(return_lse=True)")
    bound = lse_bounds(case, parts, subject.arithmetic(case.dtype))
    assert_lse_within(lse, parts.lse.value, bound, "lse vs 50-digit oracle", case)


@st.composite
def key_splits(draw, case, each_part_sees_a_key: bool):
    """Bool ``(B, Hq, Tq, Tk)``: the keys of part A (the rest are part B), drawn per row;
    with ``each_part_sees_a_key`` each row's first visible key goes to A and its last to B
    (rows with fewer than two visible keys are rejected)."""
    visible = visibility(case)
    in_a = draw(hnp.arrays(np.bool_, visible.shape))
    if each_part_sees_a_key:
        assume((visible.sum(axis=-1) >= 2).all())
        every_part_sees_a_key(in_a, visible)
    return in_a


@pytest.mark.requires("lse")
@pytest.mark.oracle_backed
@given(case=st.one_of(subject_cases(SUBJECT), subject_cases(SUBJECT, **_NO_SINKS)), data=st.data())
def test_two_key_sets_merge_into_their_union(subject, case, data):
    """Attention over each of two disjoint sets of the visible keys (drawn per row), each
    with its ``lse``, merged exactly (``L = log(e^{l_A} + e^{l_B})``, ``o = e^{l_A - L} o_A +
    e^{l_B - L} o_B``) gives the 50-digit oracle's output and ``lse`` over all the keys,
    within the bound carried from each part's (:func:`properties.lse.merge_bounds`). Under
    ``fully_masked_rows="zeros"`` a part may see no key of a row: its ``lse`` is ``-inf`` and
    it drops out; under ``"raise"`` each part sees a key of every row."""
    case = fit_to_subject(case, subject)
    zeros = subject.capabilities.fully_masked_rows == "zeros"
    in_a = data.draw(key_splits(case, not zeros), label="keys of part A")
    visible = visibility(case)
    part_a = with_keys_hidden(case, ~(visible & in_a), "split of the keys")
    part_b = with_keys_hidden(case, ~(visible & ~in_a), "split of the keys")
    note(f"case: {case.describe()}")
    arithmetic = subject.arithmetic(case.dtype)
    results = []
    for name, part in (("A", part_a), ("B", part_b)):
        out, lse = output_and_lse(subject, part, f"part {name}")
        parts = oracle_parts(part, subject)
        beta = four_d(attention_bounds(part, parts, arithmetic).output)
        lam = lse_bounds(part, parts, arithmetic)
        results.append((four_d(out).astype(np.float64), lse.reshape(beta.shape[:3]), beta, lam))
    (out_a, lse_a, beta_a, lam_a), (out_b, lse_b, beta_b, lam_b) = results
    lam_a, lam_b = lam_a.reshape(lse_a.shape), lam_b.reshape(lse_b.shape)
    L, a, b, merged = exact_merge(out_a, lse_a, out_b, lse_b)
    whole = oracle_parts(case, subject)
    bound, lse_bound = merge_bounds(
        ((a, out_a, beta_a, lam_a), (b, out_b, beta_b, lam_b)),
        merged,
        L,
        four_d(whole.output.value),
    )
    assert_within(
        out=merged,
        expected=four_d(whole.output.value),
        bound=bound,
        what="merge of two key sets vs 50-digit oracle over their union",
        case=case,
    )
    expected_lse = whole.lse.value[None, None] if case.query.ndim == 2 else whole.lse.value
    assert_lse_within(L, expected_lse, lse_bound, "merged lse vs 50-digit oracle", case)
