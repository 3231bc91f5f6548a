"""The local-window rule (:func:`oracle.rules.check_window`): which keys each query sees, the
other libraries' conventions written in it, and what is rejected."""

from __future__ import annotations

import numpy as np
import pytest

from attnprops import oracle
from attnprops.oracle.rules import WindowError
from attnprops.oracle.rules import check_attention_call
from attnprops.oracle.rules import check_attention_inputs
from attnprops.oracle.rules import check_window
from attnprops.oracle.rules import window_visible


def _seen(window, Tq, Tk, query_start=None, is_causal=False):
    q, k = np.zeros((Tq, 2)), np.zeros((Tk, 2))
    problem = check_attention_inputs(
        q,
        k,
        needs_value=False,
        window=window,
        is_causal=is_causal,
        query_start=query_start,
        fully_masked_rows="zeros",
    )
    return [np.flatnonzero(row).tolist() for row in problem.visible[0, 0]]


def test_jax_docstring_example():
    """JAX's ``local_window_size=(3, 2)``: token ``c`` at position 6 of 10 attends to 3..8;
    the same pair here."""
    assert _seen((3, 2), 10, 10)[6] == [3, 4, 5, 6, 7, 8]


def test_flash_attention_and_hugging_face_counts():
    """FlashAttention's causal ``window_size=(W, 0)`` sees ``W + 1`` keys (``(W, 0)`` here);
    Hugging Face's ``sliding_window=W`` sees ``W`` (``(W - 1, 0)`` here): the two differ by
    one key, the off-by-one that mixing them makes."""
    W = 3
    assert [len(r) for r in _seen((W, 0), 8, 8, is_causal=True)] == [1, 2, 3, 4, 4, 4, 4, 4]
    assert [len(r) for r in _seen((W - 1, 0), 8, 8, is_causal=True)] == [1, 2, 3, 3, 3, 3, 3, 3]


def test_bottom_right_alignment_follows_query_start():
    """The window is over absolute positions: query ``i`` is at ``query_start + i``
    (``None``: ``Tk - Tq``, FlashAttention's and xFormers' bottom-right alignment)."""
    assert _seen((1, 0), 2, 5) == [[2, 3], [3, 4]]
    assert _seen((1, 0), 2, 5, query_start=0) == [[0], [0, 1]]
    assert _seen((0, 1), 2, 5, query_start=1) == [[1, 2], [2, 3]]


def test_window_and_causality_and_mask_are_anded():
    mask = np.array([[True, False, True, True]] * 4)
    problem = check_attention_inputs(
        np.zeros((4, 1)),
        np.zeros((4, 1)),
        needs_value=False,
        attn_mask=mask,
        is_causal=True,
        window=(2, 5),
        fully_masked_rows="zeros",
    )
    assert [np.flatnonzero(r).tolist() for r in problem.visible[0, 0]] == [
        [0],
        [0],
        [0, 2],
        [2, 3],
    ]


def test_sides_past_the_sequence_are_unbounded():
    """A side reaching every key is written None (``2**63`` included), so no arithmetic on
    positions sees a huge int; ``(None, None)`` and covering windows are no window."""
    q, k = np.zeros((3, 2)), np.zeros((5, 2))
    assert check_attention_call(q, k, None, needs_value=False, window=(2**63, 0)).window == (
        None,
        0,
    )
    for window in [(None, None), (4, 2), (2**63, 2**31), (10, None)]:
        assert check_attention_call(q, k, None, needs_value=False, window=window).window is None
    assert check_attention_call(q, k, None, needs_value=False, window=(3, 1)).window == (3, 1)


@pytest.mark.parametrize(
    "window",
    [3, "1, 0", (1,), (1, 2, 3), (-1, 0), (0, -2), (1.5, 0), (True, 0), (0, "2"), np.array(3)],
)
def test_bad_windows_raise_naming_the_argument(window):
    with pytest.raises(WindowError, match=r"^window: "):
        check_window(window)


def test_window_visible_is_the_rule_in_positions():
    assert window_visible(None, 0, 2, 2) is None
    np.testing.assert_array_equal(
        window_visible((1, 0), 2, 2, 5),
        [[False, True, True, False, False], [False, False, True, True, False]],
    )


def test_oracle_row_without_a_key_raises():
    """A window can leave a row with no key (``Tq > Tk``, ``query_start=None``: the first
    query is at a negative position): the fully-masked-row rule, named for the window too."""
    q, k, v = np.zeros((3, 1)), np.zeros((1, 1)), np.ones((1, 1))
    with pytest.raises(oracle.rules.FullyMaskedRowError, match="window"):
        oracle.attention(q, k, v, window=(0, 0))
    out = oracle.attention(q, k, v, window=(0, 0), fully_masked_rows="zeros").value
    np.testing.assert_array_equal(out, [[0.0], [0.0], [1.0]])
