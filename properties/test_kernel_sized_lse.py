"""The log-sum-exp output and the split-KV merge law at kernel sizes.

A split-KV (flash-decoding) kernel splits each row's keys into contiguous ranges, attends each
with its ``lse`` and merges them (``L = log(e^{l_A} + e^{l_B})``, ``o = e^{l_A - L} o_A +
e^{l_B - L} o_B``); cascade and context-parallel kernels do the same across devices. Its
faults live past a split or tile size: the ``lse`` of a long row, the rescale of a part whose
maximum is another's. Here the subject's ``lse`` is checked against the ball reference on the
rows at tile boundaries, and its outputs and ``lse`` of the two parts of a split at a drawn
key position (mostly a tile multiple, :func:`properties.sizes.boundary_sizes`) must merge
into the exact output and ``lse`` over all the keys, within :func:`properties.lse.merge_bounds`
(the law and bound of ``properties/test_lse.py``, on the rows at tile boundaries).

Shape legend: query (B, Hq, Tq, D), key (B, Hkv, Tk, D), value (B, Hkv, Tk, Dv).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume
from hypothesis import given
from hypothesis import note
from hypothesis import strategies as st

from attnprops.oracle import ball
from attnprops.properties._support import visibility
from attnprops.properties.bounds import attention_bounds
from attnprops.properties.bounds import lse_bounds
from attnprops.properties.checks import assert_within
from attnprops.properties.kernel_cases import subject_kernel_specs
from attnprops.properties.lse import assert_lse_within
from attnprops.properties.lse import every_part_sees_a_key
from attnprops.properties.lse import exact_merge
from attnprops.properties.lse import merge_bounds
from attnprops.properties.lse import output_and_lse
from attnprops.properties.plugin import current_subject
from attnprops.properties.reference_rows import boundary_rows
from attnprops.properties.reference_rows import rows_of
from attnprops.properties.sizes import boundary_sizes
from attnprops.properties.variant_draws import with_keys_hidden

SUBJECT = current_subject()
# Exact multiply-adds of the three reference calls (the whole call and its two parts) and
# the exact merge's output elements (mpmath, about 5 us each): at most this many rows.
REFERENCE_WORK = 1_000_000
MERGE_ELEMENTS = 20_000


def split_at(visible: np.ndarray, split: int, each_part_sees_a_key: bool) -> np.ndarray:
    """Bool like ``visible`` ``(B, Hq, Tq, Tk)``: the keys of part A, ``[0, split)`` (part B:
    the rest). With ``each_part_sees_a_key`` a row whose visible keys all fall on one side
    gives its first visible key to A or its last to B (rows need two visible keys)."""
    in_a = np.broadcast_to(np.arange(visible.shape[-1]) < split, visible.shape).copy()
    return every_part_sees_a_key(in_a, visible) if each_part_sees_a_key else in_a


def _reference(subject, case, rows):
    """The ball reference's parts (with ``lse``) of ``case`` on ``rows``."""
    return ball.attention_parts(
        case.query,
        case.key,
        case.value,
        **case.kwargs(),
        fully_masked_rows=subject.capabilities.fully_masked_rows,
        rows=rows,
        lse=True,
    )


@pytest.mark.requires("lse")
@pytest.mark.kernel_sized
@given(spec=subject_kernel_specs(SUBJECT, shapes=("decode", "chunk", "prefill")), data=st.data())
def test_kernel_sized_lse_and_split_kv_merge(subject, spec, data):
    """At kernel sizes: the ``lse`` of the rows at tile boundaries is within its bound of the
    exact one (``-inf`` exactly where a row sees no key); and the keys split at a drawn
    position into ``[0, split)`` and ``[split, Tk)``, each part attended with its ``lse``,
    merge exactly into the exact output and ``lse`` over all the keys within the bound
    carried from each part's. Under ``fully_masked_rows="zeros"`` a part may see no key of a
    row (``lse = -inf``: it drops out); under ``"raise"`` a row whose keys all fall on one
    side lends one to the other part. A merge without its ``exp(m_i - m)`` rescale, an
    ``lse`` that forgets the maximum it subtracted, or one that counts a split twice fails."""
    case = spec.build()
    visible = visibility(case)
    Tk = case.key.shape[2]
    zeros = subject.capabilities.fully_masked_rows == "zeros"
    assume(Tk >= 2 and (zeros or (visible.sum(axis=-1) >= 2).all()))
    split = data.draw(boundary_sizes(Tk - 1), label="split: part B's first key")
    in_a = split_at(visible, split, not zeros)
    B, Hq, Tq, D = case.query.shape
    Dv = case.value.shape[3]
    limit = min(6, REFERENCE_WORK // (3 * B * Hq * Tk * (D + Dv)), MERGE_ELEMENTS // (B * Hq * Dv))
    rows = boundary_rows(case, limit=max(2, limit))
    note(f"case: {case.describe()}; split at key {split}; reference rows: {rows}")
    arithmetic = subject.arithmetic(case.dtype)

    _, lse = output_and_lse(subject, case, "attention(return_lse=True)")
    whole = _reference(subject, case, rows)
    lam = lse_bounds(rows_of(case, rows), whole, arithmetic)
    lse_rows = lse[:, :, rows].astype(np.float64)
    assert_lse_within(lse_rows, whole.lse.value, lam, f"lse rows {rows} vs the exact", case)

    results = []
    for name, keys in (("A", in_a), ("B", ~in_a)):
        part = with_keys_hidden(case, ~(visible & keys), "split of the keys")
        out_p, lse_p = output_and_lse(subject, part, f"part {name} (split at key {split})")
        exact = _reference(subject, part, rows)
        beta = attention_bounds(rows_of(part, rows), exact, arithmetic).output
        lam_p = lse_bounds(rows_of(part, rows), exact, arithmetic)
        results.append(
            (
                out_p[:, :, rows].astype(np.float64),
                lse_p[:, :, rows].astype(np.float64),
                beta,
                lam_p,
            )
        )
    (out_a, lse_a, beta_a, lam_a), (out_b, lse_b, beta_b, lam_b) = results
    L, a, b, merged = exact_merge(out_a, lse_a, out_b, lse_b)
    bound, lse_bound = merge_bounds(
        ((a, out_a, beta_a, lam_a), (b, out_b, beta_b, lam_b)), merged, L, whole.output.value
    )
    what = f"merge of keys [0, {split}) and [{split}, {Tk}), rows {rows}"
    assert_within(out=merged, expected=whole.output.value, bound=bound, what=what, case=case)
    assert_lse_within(L, whole.lse.value, lse_bound, f"{what}: lse", case)
