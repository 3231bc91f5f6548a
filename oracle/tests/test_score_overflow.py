"""The score-overflow rule at its edge (:class:`oracle.rules.ScoreOverflowError`,
:func:`oracle.rules.overflow_threshold`): a score overflows exactly when round to nearest
gives ``inf``, ``|s| >= max + ulp(max) / 2``, and impl, the 50-digit oracle and the ball
reference draw the line in the same place. A Hugging Face mask of ``finfo(dtype).min`` is
no overflow."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from attnprops import impl
from attnprops import oracle
from attnprops.oracle import ball
from attnprops.oracle.rules import ScoreOverflowError
from attnprops.oracle.rules import overflow_threshold

ATTENTIONS = {
    "impl": impl.attention,
    "oracle": lambda *a, **k: oracle.attention(*a, **k).value,
    "ball": lambda *a, **k: np.asarray(ball.attention(*a, **k)),
}


def test_thresholds_are_the_rounding_to_infinity_points():
    assert overflow_threshold(np.float16) == 2**16 - 2**4 == 65520
    assert overflow_threshold(np.float32) == 2**128 - 2**103
    assert overflow_threshold(np.float64) == 2**1024 - 2**970
    assert overflow_threshold("bfloat16") == 2**128 - 2**119
    below = float(overflow_threshold(np.float32) - 2**80)  # exact in float64
    with np.errstate(over="ignore"):
        assert np.float32(below) == ml_dtypes.finfo(np.float32).max
        assert np.isinf(np.float32(float(overflow_threshold(np.float32))))


@pytest.mark.parametrize("name", ATTENTIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_finfo_min_mask_is_no_overflow(name, dtype):
    """Hugging Face's ``finfo(dtype).min`` hides a key; added to a negative score the exact
    sum is past ``-max`` but rounds to it: a valid call, the key's weight 0."""
    q = np.array([[1.0, 0.0], [0.5, 0.0]], dtype)
    k = np.array([[-1.0, 0.0], [1.0, 0.0]], dtype)
    v = np.array([[1.0, 2.0], [3.0, 4.0]], dtype)
    mask = np.array([[ml_dtypes.finfo(dtype).min, 0.0], [0.0, 0.0]], dtype)
    out = ATTENTIONS[name](q, k, v, attn_mask=mask)
    assert np.array_equal(out[0], v[1])  # row 0 sees key 1 only


@pytest.mark.parametrize("name", ATTENTIONS)
def test_the_line_is_the_tie_at_max_plus_half_an_ulp(name):
    """float32, D = 1, scale 1: the score ``-2**103`` plus a mask entry of ``-max`` is exactly
    ``-(max + ulp / 2)``, a tie that rounds to ``-inf``: overflow; the score ``-2**102`` plus
    ``-max`` rounds to ``-max``: none."""
    f32 = np.float32
    mask = np.array([[-ml_dtypes.finfo(f32).max, 0.0]], f32)
    v = np.array([[1.0], [2.0]], f32)
    q = np.array([[2.0**60]], f32)
    over = np.array([[-(2.0**43)], [0.0]], f32)  # scores -2**103 and 0
    under = np.array([[-(2.0**42)], [0.0]], f32)  # scores -2**102 and 0
    attention = ATTENTIONS[name]
    with pytest.raises(ScoreOverflowError, match=r"^query/key/scale/attn_mask: "):
        attention(q, over, v, attn_mask=mask, scale=1.0)
    assert attention(q, under, v, attn_mask=mask, scale=1.0)[0, 0] == 2.0
