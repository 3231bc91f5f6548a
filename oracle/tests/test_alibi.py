"""The ALiBi rule (:mod:`oracle.rules.alibi`): the bias the oracle adds, exactly, its
alignment, and what is rejected."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from attnprops import impl
from attnprops import oracle
from attnprops.oracle.rules import AlibiError
from attnprops.oracle.rules import ScoreOverflowError
from attnprops.oracle.rules import check_alibi_slopes


def test_the_bias_is_minus_slope_times_distance_bottom_right():
    """Zero query and keys: the scores are the bias alone, ``-slope |p - j|`` with
    ``p = query_start + i`` (``Tk - Tq`` by default, FlashAttention's alignment)."""
    q, k = np.zeros((1, 2, 2, 3)), np.zeros((1, 2, 4, 3))
    slopes = np.array([0.5, 0.25])
    scores = oracle.attention_scores(q, k, alibi_slopes=slopes).value
    np.testing.assert_array_equal(scores[0, 0], -0.5 * np.array([[2, 1, 0, 1], [3, 2, 1, 0]]))
    np.testing.assert_array_equal(scores[0, 1], -0.25 * np.array([[2, 1, 0, 1], [3, 2, 1, 0]]))
    at_zero = oracle.attention_scores(q, k, alibi_slopes=slopes, query_start=0).value
    np.testing.assert_array_equal(at_zero[0, 0], -0.5 * np.array([[0, 1, 2, 3], [1, 0, 1, 2]]))


def test_the_bias_is_exact_not_a_float64_rounding():
    """A slope whose product with a distance is not a float64 (53 bits times 3): the oracle
    keeps the exact product, a float64 explicit mask would not."""
    slope = 1 + 2.0**-52
    q, k, v = np.zeros((2, 1)), np.zeros((2, 1)), np.array([[1.0], [0.0]])
    parts = oracle.attention_parts(q, k, v, alibi_slopes=np.array([slope]), query_start=0)
    exact = -mpmath.mpf(slope) * 1  # query 0 to key 1
    assert parts.scores.exact[0, 1] == exact
    with mpmath.workdps(50):
        want = 1 / (1 + mpmath.exp(exact))  # softmax over scores 0 and exact
    assert abs(parts.output.exact[0, 0] - want) < mpmath.mpf(10) ** -45


@pytest.mark.parametrize("slopes", [np.ones((2, 2))])  # (B, Hq) with B = 2, not 1
def test_slopes_of_another_batch_raise_naming_the_argument(slopes):
    """The mistakes shared with ``sinks``: ``test_head_arrays.py``."""
    with pytest.raises(AlibiError, match=r"^alibi_slopes: "):
        check_alibi_slopes(slopes, batch=1, num_heads=2)


def test_slopes_per_batch_element_and_head():
    assert check_alibi_slopes(np.ones((3, 2), np.float32), batch=3, num_heads=2).shape == (3, 2)
    assert check_alibi_slopes(np.ones(2, np.float16), batch=3, num_heads=2).shape == (1, 2)


@pytest.mark.parametrize("attention", [oracle.attention, impl.attention], ids=["oracle", "impl"])
def test_an_overflow_from_alibi_names_alibi_slopes(attention):
    """q = k = 0: only ALiBi's ``-slope |p - j|`` can overflow, and the error names it."""
    q = np.zeros((1, 1, 3, 2), np.float32)
    with pytest.raises(ScoreOverflowError, match=r"^query/key/scale/alibi_slopes: ") as raised:
        attention(q, q, np.ones_like(q), alibi_slopes=np.array([3e38]))
    assert "smaller alibi_slopes" in str(raised.value)


@pytest.mark.parametrize("attention", [oracle.attention, impl.attention], ids=["oracle", "impl"])
def test_slopes_of_zero_are_not_named_in_an_overflow(attention):
    """q . k overflows float32 by itself; ALiBi slopes of 0 add nothing and are not named."""
    q = np.full((1, 1, 2, 1), 3e19, np.float32)
    with pytest.raises(ScoreOverflowError, match=r"^query/key/scale: ") as raised:
        attention(q, q, q, alibi_slopes=np.array([0.0]), scale=1.0)
    assert "alibi_slopes" not in str(raised.value)
