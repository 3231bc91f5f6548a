"""FlashAttention's varlen ``cu_seqlens`` and this project's ``segment_ids``
(:func:`oracle.rules.segment_ids_from_cu_seqlens`, :func:`oracle.rules.cu_seqlens_from_segment_ids`):
the two forms of packed documents, converted both ways, and attention over either equals
each document attended alone."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnprops import oracle
from attnprops.oracle.rules import SegmentIdsError
from attnprops.oracle.rules import cu_seqlens_from_segment_ids
from attnprops.oracle.rules import segment_ids_from_cu_seqlens

lengths = st.lists(st.integers(0, 5), min_size=0, max_size=6)  # [] : cu_seqlens [0]


def test_documents_and_an_empty_one():
    cu = np.array([0, 2, 2, 5], np.int32)  # lengths 2, 0, 3: the middle sequence is empty
    ids = segment_ids_from_cu_seqlens(cu)
    assert ids.tolist() == [0, 0, 2, 2, 2] and ids.dtype == np.int64
    assert cu_seqlens_from_segment_ids(ids).tolist() == [0, 2, 2, 5]


@given(lengths)
def test_round_trip(lengths):
    """cu_seqlens -> ids -> cu_seqlens gives the lengths back, but for zero-length sequences
    after the last token (they have no token)."""
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    ids = segment_ids_from_cu_seqlens(cu)
    assert len(ids) == cu[-1] and (np.diff(ids) >= 0).all()
    for n, (start, stop) in enumerate(zip(cu[:-1], cu[1:])):
        assert (ids[start:stop] == n).all()  # sequence n's tokens carry id n
    back = cu_seqlens_from_segment_ids(ids)
    assert back.tolist() == cu[: len(back)].tolist() and (cu[len(back) - 1 :] == cu[-1]).all()


def test_packed_attention_from_cu_seqlens_equals_each_sequence_alone():
    """Causal self-attention over three packed sequences (lengths 2, 0, 3) with the ids of
    their cu_seqlens gives each sequence's own causal attention (the 50-digit oracle)."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((5, d)) for d in (4, 4, 2))
    ids = segment_ids_from_cu_seqlens([0, 2, 2, 5])
    packed = oracle.attention(q, k, v, is_causal=True, segment_ids=(ids, ids)).value
    for start, stop in ((0, 2), (2, 5)):
        alone = oracle.attention(q[start:stop], k[start:stop], v[start:stop], is_causal=True).value
        assert np.array_equal(packed[start:stop], alone)


@pytest.mark.parametrize(
    "cu, message",
    [
        ([1, 2, 3], "starting at 0"),
        ([0, 3, 2], "non-decreasing"),
        ([], "got shape (0,)"),
        ([[0, 1]], "got shape (1, 2)"),
        ([0.0, 1.0], "got dtype float64"),
        ([False, True], "got dtype bool"),
        # narrow and unsigned dtypes: np.diff would wrap around (3 - 5 = 254 in uint8)
        (np.array([0, 3, 1], np.uint8), "non-decreasing"),
        (np.array([0, 5, 3], np.uint64), "non-decreasing"),
        (np.array([0, 100, -100], np.int8), "non-decreasing"),
        ([0, 10**12], "past int32"),  # FlashAttention's cu_seqlens are int32
        (np.array([0, 2**64 - 1], np.uint64), "past int32"),
        (np.ma.array([0, 2, 4], mask=[0, 1, 0]), "masked array"),
        ([[0, 1], [0]], "cannot be read"),
        (np.array([0, 1, 3], "m8"), "got dtype timedelta64"),  # an integer subtype in NumPy
        (np.array([0, 1, 3], "m8[s]"), "got dtype timedelta64[s]"),
    ],
)
def test_bad_cu_seqlens_are_refused_naming_it(cu, message):
    before = None if isinstance(cu, list) else np.array(cu)
    with pytest.raises(SegmentIdsError, match=r"^cu_seqlens: ") as raised:
        segment_ids_from_cu_seqlens(cu)
    assert message in str(raised.value)
    assert before is None or np.array_equal(np.asarray(cu), before)  # nothing modified


@pytest.mark.parametrize(
    "ids",
    [
        [0, 1, 0],
        [1, -1],
        [[0, 0]],
        [0.0, 1.0],
        np.array([1, 0], np.uint8),  # wraps to [1, 255 + ...] through np.diff
        np.array([0, 127, -128], np.int8),
        [2**63 - 1],  # N + 1 would not fit int32 (nor int64)
        [0, 0, 0, 2**31],  # 4 tokens asking for 2**31 + 2 entries
        np.ma.array([0, 1], mask=[0, 1]),
        [[0, 1], [0]],
        np.array([0, 1], "m8"),
    ],
)
def test_ids_without_cu_seqlens_are_refused(ids):
    """A document in two runs, ids that decrease (in any integer dtype), 2-D, float, masked
    or ragged ids, and ids whose cu_seqlens would not fit int32 have no cu_seqlens."""
    with pytest.raises(SegmentIdsError, match=r"^segment_ids: as cu_seqlens"):
        cu_seqlens_from_segment_ids(ids)


@pytest.mark.parametrize("empty", [[], np.zeros(0, np.int32), np.zeros(0, np.uint8)])
def test_no_token_is_no_sequence_both_ways(empty):
    """No token gives ``cu_seqlens`` ``[0]`` (no sequence), and ``[0]`` gives no token."""
    cu = cu_seqlens_from_segment_ids(empty)
    assert cu.tolist() == [0] and cu.dtype == np.int32
    ids = segment_ids_from_cu_seqlens(cu)
    assert ids.shape == (0,) and ids.dtype == np.int64


def test_narrow_and_unsigned_dtypes_read_exactly():
    cu = np.array([0, 200, 200, 255], np.uint8)  # lengths 200, 0, 55
    ids = segment_ids_from_cu_seqlens(cu)
    assert np.bincount(ids).tolist() == [200, 0, 55]
    assert cu_seqlens_from_segment_ids(ids.astype(np.uint8)).tolist() == [0, 200, 200, 255]
