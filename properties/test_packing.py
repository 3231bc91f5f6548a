"""Properties of packed documents (``segment_ids``) and chunked attention (``chunk_size``).

Conventions (:mod:`oracle.rules.packing`): query ``i`` of batch element ``b`` sees key ``j``
only when ``query_segments[b, i] == key_segments[b, j]``, and, with ``chunk_size=C``, only
when ``p // C == j // C`` for its absolute position ``p = query_start + i``; both AND-ed with
the mask, causality and the window. A subject declares ``segment_ids`` / ``chunk_size``;
without them these properties skip. The check that each query sees exactly its keys is
``test_each_query_sees_exactly_its_keys`` (``test_windows.py``).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attnprops.properties._support import assert_output_matches_oracle
from attnprops.properties._support import attend
from attnprops.properties._support import case_from
from attnprops.properties._support import fit_to_subject
from attnprops.properties._support import four_d
from attnprops.properties._support import visibility
from attnprops.properties.agreement_bounds import agreement_bounds
from attnprops.properties.bounds import two_computations
from attnprops.properties.checks import assert_within
from attnprops.properties.plugin import current_subject
from attnprops.properties.strategies import dims
from attnprops.properties.strategies import subject_cases
from attnprops.properties.strategies import values
from attnprops.properties.variant_draws import window_sides

SUBJECT = current_subject()
CAPS = SUBJECT.capabilities
# Document ids past int32 (int64 ids, as a packing loader numbers them): equal to 0, 1 and -1
# modulo 2**32, so ids narrowed to int32 on the way to a kernel join other documents.
WIDE_IDS = (2**32, 2**32 + 1, 2**63 - 1)


@pytest.mark.requires("segment_ids", "chunk_size")
@pytest.mark.oracle_backed
@given(case=subject_cases(SUBJECT, packing=True, windows=True if CAPS.window else None))
def test_packed_output_matches_oracle(subject, case):
    """With packed documents and chunks (combined with windows when declared, masks,
    causality, offsets, GQA and every dtype) the output is within the error bound of the
    50-digit oracle's."""
    assert_output_matches_oracle(
        subject, fit_to_subject(case, subject), what="packed output vs 50-digit oracle"
    )


@st.composite
def cross_packed(draw):
    """A non-causal call whose queries and keys are packed apart (cross-attention;
    FlashAttention's varlen with ``cu_seqlens_q != cu_seqlens_k``): key ids per batch
    element (small, or past int32: :data:`WIDE_IDS`; documents interleaved or not), each
    query's id one of its batch element's key ids (so every query sees a key of its
    document), drawn apart from the key at its position; no mask, window or chunk. ``Tq ==
    Tk`` half the time (where code that takes the call for packed self-attention goes
    wrong)."""
    d = draw(dims(causal_ok=False))
    if draw(st.booleans(), label="as many queries as keys"):
        d = d._replace(query_len=d.key_len)
    case = draw(subject_cases(SUBJECT, causal=False, masks_allowed=False, d=d))
    B, Tq, Tk = case.query.shape[0], case.query.shape[2], case.key.shape[2]
    ids = st.one_of(st.integers(0, 3), st.sampled_from(WIDE_IDS))
    key_ids = draw(hnp.arrays(np.int64, (B, Tk), elements=ids), label="key ids")
    query_ids = np.stack(
        [
            draw(st.lists(st.sampled_from(sorted(set(row.tolist()))), min_size=Tq, max_size=Tq))
            for row in key_ids
        ]
    )
    return case._replace(segment_ids=(query_ids, key_ids), mask_layout="cross-packed")


@pytest.mark.requires("segment_ids")
@pytest.mark.oracle_backed
@given(case=cross_packed())
def test_cross_packed_documents_match_oracle(subject, case):
    """Queries and keys packed apart (their ids unrelated to positions, ``Tq == Tk`` among
    them): query ``i`` sees exactly the keys of its own id, within the error bound of the
    50-digit oracle: code that reuses the keys' ids (or their ``cu_seqlens``) for the queries
    when the lengths match (transformers' ``_upad_input``) fails here."""
    assert_output_matches_oracle(
        subject, fit_to_subject(case, subject), what="cross-packed output vs 50-digit oracle"
    )


@st.composite
def packed_rows(draw):
    """Self-attention over a row that packs documents end to end: sizes (``Tq = Tk = T``),
    causal or not, the lengths of the documents (a zero-length one among them sometimes;
    one list for the whole batch), and a window when the subject has one."""
    d = draw(dims(max_len=8, causal_ok=True))
    T = d.key_len
    cuts = sorted(draw(st.lists(st.integers(0, T), max_size=4)))  # equal cuts: empty docs
    lengths = np.diff([0, *cuts, T]).tolist()
    dtype = draw(st.sampled_from(tuple(reversed(CAPS.dtypes))))
    q = draw(values((d.batch, d.num_heads, T, d.head_dim), dtype, "unit"))
    k = draw(values((d.batch, d.num_kv_heads, T, d.head_dim), dtype, "unit"))
    v = draw(values((d.batch, d.num_kv_heads, T, d.value_dim), dtype, "unit"))
    causal = draw(st.booleans())
    window = None
    if CAPS.window == "offsets":
        window = draw(st.one_of(st.none(), window_sides(T + 1)))
    return q, k, v, lengths, causal, window


@pytest.mark.requires("segment_ids")
@given(row=packed_rows())
def test_packed_documents_equal_each_document_alone(subject, row):
    """A row packing documents end to end (``segment_ids`` the document of each position,
    a zero-length document allowed) gives, on each document's positions, the attention of
    that document alone (causal from its own first position: positions restart per
    document), within twice the agreement bound of the subject's arithmetic."""
    q, k, v, lengths, causal, window = row
    ids = np.repeat(np.arange(len(lengths)), lengths)
    note(f"lengths {lengths}, segment ids {ids.tolist()}, causal {causal}, window {window}")
    row_case = case_from(q, k, v, is_causal=causal)._replace(window=window)
    packed = attend(subject, row_case._replace(segment_ids=(ids, ids)), "packed row")
    for doc, (start, n) in enumerate(zip(np.cumsum([0] + lengths[:-1]), lengths)):
        if n == 0:
            continue
        part = slice(int(start), int(start + n))
        case = row_case._replace(query=q[:, :, part], key=k[:, :, part], value=v[:, :, part])
        alone = attend(subject, case, f"document {doc}")
        with np.errstate(over="ignore"):
            bound = two_computations(
                agreement_bounds(case, visibility(case), subject.arithmetic(q.dtype))
            )
        assert_within(
            out=four_d(packed)[:, :, part],
            expected=alone,
            bound=bound,
            what=f"document {doc} (positions {part.start}..{part.stop - 1}) packed vs alone",
            case=case,
        )
