"""The ball-arithmetic reference (oracle.ball) on values the 50-digit oracle cannot round: hand-built
rows whose exact output, weight, score or lse lies on (or within 1e-50 of) a midpoint of two
float64s, tied groups, saturated soft caps, sinks and scores at the overflow point. Each is
rounded from the side of the exact value, as a correct rounding must; most were found by
attacks on the reference and stay as regression cases. The generated comparison with the
50-digit oracle: ``test_ball.py``.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from numpy.testing import assert_array_equal

from attnprops import oracle
from attnprops.oracle import ball
from attnprops.oracle.rules import ScoreOverflowError
from attnprops.oracle.tests.test_ball import MANY_DIGITS
from attnprops.oracle.tests.test_ball import oracle_digits


def test_a_rational_result_on_a_rounding_midpoint_is_rounded_exactly():
    """Found by CI on torch_sdpa (decode, 3584 keys, head_dim 36): a ball around an exact
    float64 midpoint straddles it at every precision. The rational results are rounded from
    their exact values, ties to even: the mean of a row whose scores all tie, and a score
    under a rational scale (here 1/sqrt(36) = 1/6)."""
    half_ulp = 2.0**-53
    value = np.array([1 - half_ulp, 1 + 2 * half_ulp, 1 + 2 * half_ulp]).reshape(3, 1)
    out = ball.attention(np.zeros((1, 1)), np.zeros((3, 1)), value)  # mean 1 + 2**-53
    assert out[0, 0] == 1.0  # the midpoint of 1 and 1 + 2**-52, to the even one
    query, key = np.zeros((1, 36)), np.zeros((1, 36))
    query[0, :2], key[0, :2] = (1.0, 1.5), (6.0, 2.0**-51)  # dot = 6 + 3 * 2**-52
    scores = ball.attention_parts(query, key, np.ones((1, 1))).scores.value
    assert scores[0, 0] == 1.0  # (6 + 3 * 2**-52) / 6 = 1 + 2**-53, to the even one
    odd = value + np.array([[0.0], [0.0], [2 * half_ulp]])  # a mean that is no midpoint
    exact = sum(Fraction(float(v)) for v in odd[:, 0]) / 3
    assert ball.attention(np.zeros((1, 1)), np.zeros((3, 1)), odd)[0, 0] == float(exact)


def test_a_saturated_capped_score_beside_a_midpoint_is_rounded_from_its_side():
    """Found by a thorough run (kernel-sized ALiBi + softcap, scores of 1e4 capped at 5):
    ``c tanh(t) + b`` lies within ``2c e^{-2|t|}`` of ``c sign(t) + b``, closer than any
    precision resolves, and that limit may be a float64 midpoint. ``|tanh t| < 1`` says
    which side the score is on: here ``tanh(1e6) + 2**-53`` is just below the midpoint of 1
    and 1 + 2**-52 (so 1.0) and ``tanh(-1e6) + 2**-54`` just above the midpoint of -1 and
    -1 + 2**-53 (so -1 + 2**-53, where ties-to-even of the limit would give -1.0)."""
    query, key = np.array([[1e3]]), np.array([[1e3], [-1e3]])
    mask = np.array([[2.0**-53, 2.0**-54]])
    for scale in (None, 1.0):  # an irrational scale (1/sqrt(1) is rational: both paths)
        parts = ball.attention_parts(
            query, key, np.ones((2, 1)), attn_mask=mask, softcap=1.0, scale=scale
        )
        assert parts.scores.value.tolist() == [[1.0, -1 + 2.0**-53]]
    slopes = np.array([2.0**-54])  # ALiBi's -2**-54 |0 - 1|: just below 1 - 2**-54, a midpoint
    capped = ball.attention_parts(
        np.array([[[[1e3]]]]),
        np.array([[[[1e3], [1e3]]]]),
        np.ones((1, 1, 2, 1)),
        softcap=1.0,
        alibi_slopes=slopes,
        query_start=0,
    ).scores.value
    assert capped[0, 0, 0].tolist() == [1.0, 1.0 - 2.0**-53]  # ties-to-even: 1.0


def test_a_row_tied_but_for_saturated_caps_leans_to_its_stronger_key():
    """Found by a thorough run (float64 prefill, scores of 1e4 capped at 5): when every
    visible score saturates the cap, the weights differ from ``1/n`` by about
    ``e^{-2|t|}``, below any working precision, and the output lies that close to the
    values' mean, which may be a float64 midpoint. The side is the sign of ``sum_j (e^{x_j}
    - 1)(v_j - mean)``, computed to relative accuracy (``tanh a - tanh b = sinh(a - b) /
    (cosh a cosh b)``). Here key 1 (``t = 6000``) beats key 0 (``t = 3000``) by about
    ``e^{-6000}``, so the output is just above the midpoint of 1 and 1 + 2**-52 (ties to even
    would give 1.0); checked against mpmath at 3,000 digits."""
    query, key = np.array([[1e3]]), np.array([[15.0], [30.0]])
    value = np.array([[1.0], [1 + 2.0**-52]])
    out = ball.attention(query, key, value, softcap=5.0, scale=1.0)
    with mpmath.workdps(3000):
        s = [5 * mpmath.tanh(mpmath.mpf(1e3) * float(k) / 5) for k in key[:, 0]]
        e = [mpmath.exp(x - max(s)) for x in s]
        exact = sum(w * float(v) for w, v in zip(e, value[:, 0])) / sum(e)
        assert exact > 1 + mpmath.mpf(2) ** -53  # above the midpoint, by about e^{-6000}
    assert out[0, 0] == 1 + 2.0**-52
    flipped = ball.attention(query, key, value[::-1].copy(), softcap=5.0, scale=1.0)
    assert flipped[0, 0] == 1.0  # the stronger key's value is 1 now: just below, so 1.0


def test_the_lse_of_a_dominant_score_on_a_midpoint_is_rounded_from_above():
    """Found by the kernel-sized lse property (torch_sdpa, float32 ``large`` inputs, two
    keys): ``lse = s_m + log(1 + e^{-gap})`` lies within ``e^{-gap}`` above the dominant score
    ``s_m``; with ``s_m = 1 + 2**-53``, the midpoint of 1 and 1 + 2**-52, and a gap of 10001
    (``e^{-10001}``, past 8192 bits), it rounds up, where ties-to-even of ``s_m`` gives 1.0."""
    query, key = np.array([[1.0, 2.0**-53]]), np.array([[1.0, 1.0], [-1e4, 0.0]])
    parts = ball.attention_parts(query, key, np.ones((2, 1)), scale=1.0, lse=True)
    assert parts.scores.value.tolist() == [[1.0, -1e4]]  # 1 + 2**-53 to the even one
    assert parts.lse.value.tolist() == [1 + 2.0**-52]


@pytest.mark.parametrize("bias", [0.5, -(2.0**-53), 2.0**-54])
def test_a_mask_shared_by_saturated_capped_keys_still_leans(bias):
    """Found by a fresh attack: the row above with a float mask that is the same for both
    keys (it changes no weight) raised ReferenceUnresolvedError; the mask's difference is
    now taken first (exactly 0), so the tiny difference of the capped scores survives."""
    query, key = np.array([[1e3]]), np.array([[15.0], [30.0]])
    value = np.array([[1.0], [1 + 2.0**-52]])
    mask = np.full((1, 2), bias)
    assert ball.attention(query, key, value, softcap=5.0, scale=1.0, attn_mask=mask)[0, 0] == (
        1 + 2.0**-52
    )


def test_groups_of_tied_keys_with_one_mean_give_that_mean_exactly():
    """Found by a fresh attack: keys in two tied groups (dots 0, 0 and 1, 1) whose values
    have the same mean give exactly that mean whatever the groups' weights, here ``0.5 +
    2**-54``, a midpoint (ties to even: 0.5); it raised ReferenceUnresolvedError. Also
    float32 inputs, and the capped (saturated) version."""
    query, key = np.array([[1.0]]), np.array([[0.0], [0.0], [1.0], [1.0]])
    value = np.array([[1.0], [2.0**-53], [1.0], [2.0**-53]])
    assert (
        ball.attention(query, key, value)[0, 0]
        == 0.5
        == oracle.attention(query, key, value).value[0, 0]
    )
    as32 = (x.astype(np.float32) for x in (query, key, value))
    assert ball.attention(*as32)[0, 0] == 0.5
    capped = ball.attention(np.array([[1e3]]), 15.0 * (1 + key), value, softcap=5.0, scale=1.0)
    assert capped[0, 0] == 0.5


def _sides_of_midpoint(mean: Fraction) -> tuple[float, float]:
    """The two float64s next to ``mean``, which must be their midpoint."""
    near = float(mean)
    low, high = sorted((near, math.nextafter(near, math.inf if near < mean else -math.inf)))
    assert Fraction(low) + Fraction(high) == 2 * mean
    return low, high


@pytest.mark.parametrize("weak", [85.0, -85.0, "sink"])
@pytest.mark.parametrize("order", [[0, 1, 2, 3, 4], [0, 1, 2, 4, 3], [4, 3, 2, 1, 0]])
def test_a_tied_group_on_a_midpoint_leans_to_the_side_of_a_negligible_key(order, weak):
    """Found running the suite against oracle_float64 (key permutation invariance): query 76,
    keys 0, 75, 75, 75, 75; the four tied keys' values have a float64 midpoint for mean, and
    key 0's weight ``e^{-5700}`` moves the output off it by less than 8192 bits resolve; it
    raised ReferenceUnresolvedError. Key 0's value, above or below the mean, decides the side;
    a sink of logit 0 in its place (a key of value 0) pulls the output below. Checked against
    mpmath at 3000 digits, in every key order."""
    odd = (2 * round(1.03070533 * 2**44) + 1) * 2.0**-45  # (odd + 255) / 4: a midpoint
    weak_value = 0.0 if weak == "sink" else weak
    key = np.array([[0.0], [75.0], [75.0], [75.0], [75.0]])
    value = np.array([[weak_value], [odd], [85.0], [85.0], [85.0]])
    mean = (Fraction(odd) + 255) / 4
    low, high = _sides_of_midpoint(mean)
    want = high if weak_value > mean else low
    with mpmath.workdps(3000):
        tiny = mpmath.exp(-76 * 75)  # key 0's (or the sink's) weight against a tied key's
        exact = (weak_value * tiny + odd + 255) / (tiny + 4)
        assert min((low, high), key=lambda f: abs(mpmath.mpf(f) - exact)) == want
    if weak == "sink":
        order = [j - 1 for j in order if j]  # the four tied keys alone, and the sink
        key, value, sinks = key[1:], value[1:], np.array([0.0])
    else:
        sinks = None
    out = ball.attention(np.array([[76.0]]), key[order], value[order], sinks=sinks)
    assert out[0, 0] == want


@pytest.mark.parametrize("weak_value", [85.0, -85.0])
def test_a_second_group_with_the_same_mean_leaves_the_lean_to_the_negligible_key(weak_value):
    """As above, plus two keys at 74.75 (weight ``e^{-19}`` each, not negligible) whose
    values ``odd / 2`` and ``127.5`` have the same mean: their pulls cancel exactly, which
    the reference sees by summing a tied group's values before multiplying by its ``e^x``
    (term by term, the cancellation leaves a ball wider than ``e^{-5700}`` at 8192 bits)."""
    odd = (2 * round(1.03070533 * 2**44) + 1) * 2.0**-45
    key = np.array([[0.0], [75.0], [75.0], [75.0], [75.0], [74.75], [74.75]])
    value = np.array([[weak_value], [odd], [85.0], [85.0], [85.0], [odd / 2], [127.5]])
    mean = (Fraction(odd) + 255) / 4
    assert (Fraction(odd / 2) + Fraction(127.5)) / 2 == mean
    low, high = _sides_of_midpoint(mean)
    want = high if weak_value > mean else low
    with mpmath.workdps(3000):
        tiny, second = mpmath.exp(-76 * 75), mpmath.exp(-19)
        pair = mpmath.mpf(odd / 2) + mpmath.mpf(127.5)
        exact = (weak_value * tiny + odd + 255 + second * pair) / (tiny + 4 + 2 * second)
        assert min((low, high), key=lambda f: abs(mpmath.mpf(f) - exact)) == want
    assert ball.attention(np.array([[76.0]]), key, value)[0, 0] == want


_ONE_UP, _TWO_UP = 1 + 2.0**-52, 1 + 2.0**-51
_TINIEST = 2.0**-1074
NEAR_GROUP_MEANS = {  # found by a fresh attack (2026-12-06): each raised ReferenceUnresolvedError
    "cap, a tied pair on a midpoint, a key of weight e^-8000": (
        [[1.0]], [[1e6], [1e6], [-1e6]], [[1.0], [_ONE_UP], [2.0]], dict(softcap=4000.0)
    ),
    "cap doing nothing, a mask of -1e4": (
        [[0.0]], [[0.0]] * 3, [[1.0], [_ONE_UP], [2.0]],
        dict(softcap=1.0, attn_mask=np.array([[0.0, 0.0, -1e4]])),
    ),
    "cap, a sink of weight e^-10000": (
        [[0.0]], [[0.0]] * 2, [[_ONE_UP], [_TWO_UP]], dict(softcap=1.0, sinks=np.array([-1e4]))
    ),
    "a sink tied with the top key, a subnormal midpoint": (
        [[-1.0]], [[0.0], [1e4]], [[_TINIEST], [1.0]], dict(sinks=np.array([0.0]))
    ),
    "a mask that ties two keys of different dot products": (
        [[1.0]], [[1.0], [0.0], [-1e4]], [[1.0], [_ONE_UP], [0.0]],
        dict(attn_mask=np.array([[0.0, 1.0, 0.0]])),
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", NEAR_GROUP_MEANS, ids=list(NEAR_GROUP_MEANS))
def test_outputs_beside_the_mean_of_tied_groups_are_rounded_from_their_side(case):
    """Outputs closer to a float64 midpoint (the mean of a group of tied scores, a sink
    counting as a key of value 0) than 8192 bits resolve, equal to the oracle's at 5000
    digits (scale 1)."""
    q, k, v, options = NEAR_GROUP_MEANS[case]
    q, k, v = np.array(q), np.array(k), np.array(v)
    with oracle_digits(5000):
        want = oracle.attention(q, k, v, scale=1.0, **options).value
    assert_array_equal(ball.attention(q, k, v, scale=1.0, **options), want)


def test_a_sink_tied_with_one_group_of_the_same_mean_as_another_gives_that_mean():
    """Found by a fresh attack: keys 1, 1 (values 3 and 1.5 * 2**-52) tie with a sink of
    logit 1 (a key of value 0), keys 0, 0 (values 1 and 1 + 2**-52) have the same mean, 1 +
    2**-53: the output is that midpoint exactly, whatever the weights, so ties to even give
    1.0. It raised ReferenceUnresolvedError."""
    query, key = np.array([[1.0]]), np.array([[1.0], [1.0], [0.0], [0.0]])
    value = np.array([[3.0], [1.5 * 2.0**-52], [1.0], [_ONE_UP]])
    assert (Fraction(3.0) + Fraction(1.5 * 2.0**-52)) / 3 == 1 + Fraction(1, 2**53)
    out = ball.attention(query, key, value, scale=1.0, sinks=np.array([1.0]))
    assert out[0, 0] == 1.0


def test_a_dominant_score_of_dot_product_zero_is_rational_whatever_the_scale():
    """Found by a fresh attack: D = 2 (scale 1/sqrt(2)), the dominant key's dot product is 0,
    so its score is its mask entry minus ALiBi's, ``1 + 2**-53``, a midpoint, and ``lse`` lies
    just above it (the other key's term is ``e^-7071``): the correctly rounded ``1 +
    2**-52``. It raised ReferenceUnresolvedError (an irrational scale made no score exact)."""
    query, key = np.array([[1.0, 0.0]]), np.array([[-1e4, 0.0], [0.0, 1.0]])
    options = dict(
        attn_mask=np.array([[0.0, _ONE_UP]]), alibi_slopes=np.array([2.0**-53]), query_start=0
    )
    with oracle_digits(5000):
        want = oracle.attention_parts(query, key, np.zeros((2, 1)), **options).lse.value
    lse = ball.attention_parts(query, key, None, lse=True, **options).lse.value
    assert lse[0] == want[0] == _ONE_UP


def test_a_largest_score_its_float64_estimate_misses_is_still_the_one_subtracted():
    """Found by a fresh attack: the float64 estimates that pick each row's subtracted key
    overflow (``q k = 2**1100``) or cancel (``2**127 + 6000 - 2**127``), so key 0 was taken
    although keys 1 and 2 tie above it (by ``2**48`` and 6000); their values' mean is a float64
    midpoint and key 0's value lies above it, so the output is just above: rounded up. The
    ``lse`` of two keys whose larger score is the midpoint ``2**100 + 2**47`` lies just above
    it. Each raised ReferenceUnresolvedError; in another key order each was right."""
    up = 1 + 2.0**-52
    query, key = np.array([[2.0**1000]]), np.array([[2.0**100], [2.0**100 * up], [2.0**100 * up]])
    out = ball.attention(query, key, np.array([[2.0], [1.0], [up]]), scale=2.0**-1000)
    assert out[0, 0] == up
    query = np.array([[2.0**100, 1.0, -(2.0**100)]], np.float32)
    key = np.array([[0, 0, 0], [2.0**27, 6000, 2.0**27], [2.0**27, 6000, 2.0**27]], np.float32)
    value = np.array([[2.0], [1.0], [2.0**-53]], np.float32)
    assert ball.attention(query, key, value, scale=1.0)[0, 0] == 0.5 + 2.0**-53
    key = np.array([[2.0**98], [(2**53 + 1) // 3 * 2.0**47]])  # times 3: 2**100 + 2**47
    parts = ball.attention_parts(np.array([[3 * 2.0**1000]]), key, None, lse=True, scale=2.0**-1000)
    assert parts.lse.value[0] == 2.0**100 + 2.0**48


@pytest.mark.parametrize(
    "options",
    [
        dict(attn_mask=np.array([[-sys.float_info.max]]), sinks=np.array([0.0])),
        dict(sinks=np.array([1e100])),
    ],
    ids=["a finfo.min mask", "a sink of 1e100"],
)
def test_a_sink_that_outweighs_every_key_beyond_the_exponent_range_gives_zero(options):
    """Found by a fresh attack: the sink's term ``e^(1e100)`` (or ``e^(1.8e308)`` against a
    key masked with ``finfo.min``) is no finite ball at the starting precision; rounding
    the output asked for the exact value of an infinite end and flint raised a plain
    ValueError. A ball that is not finite now refines; the weight ``e^(-1e100)`` rounds to
    0. The 4-D form: Hugging Face's ``finfo.min`` mask on every key, zero sinks, GQA."""
    one = np.array([[1.0]])
    assert ball.attention(one, one, one, **options)[0, 0] == 0.0
    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((2, 4, 3, 2)), *rng.standard_normal((2, 2, 2, 3, 2))
    mask = np.full((2, 1, 3, 3), -sys.float_info.max)
    assert_array_equal(ball.attention(q, k, v, attn_mask=mask, sinks=np.zeros(4)), 0.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("added", ["none", "mask", "alibi"])
def test_a_score_exactly_at_the_rounding_to_inf_point_under_scale_one_third_overflows(dtype, added):
    """Found by a fresh attack: D = 9 (scale 1/3, rational, but no ball of it is exact) and a
    dot product of ``3 (L - 2**(e - 25))`` (float32: ``L = 2**128``, e = 128; float64: ``2**1024
    - 2**970``) put the score exactly at the rounding-to-inf point: the ball straddled it at
    every precision and raised ReferenceUnresolvedError; the rule decides it exactly now
    (the score, or the score less ``2**(e - 25)`` brought back by a mask or an ALiBi slope,
    reaches the point: ScoreOverflowError). A score ``2**-200`` below it passes."""
    top = 128 if dtype == np.float32 else 1024
    drop = 25 if dtype == np.float32 else 54  # the point: 2**top - 2**(top - drop)
    q, k = np.zeros((1, 1, 1, 9), dtype), np.zeros((1, 1, 2, 9), dtype)
    q[..., 0, :2] = 2.0 ** (top // 2)
    k[..., 0, 0], k[..., 1, 0] = 3 * 2.0 ** (top // 2), 1.0
    options = {}
    if added == "none":
        k[..., 0, 1] = -3 * 2.0 ** (top // 2 - drop)
    else:  # one more 2**(top - drop) below, which the mask or ALiBi adds back
        k[..., 0, 1] = -3 * 2.0 ** (top // 2 - drop + 1)
        if added == "mask":
            options["attn_mask"] = np.array([[2.0 ** (top - drop), 0.0]], dtype)
        else:  # query_start 1: key 0 at distance 1
            options["alibi_slopes"] = np.array([-(2.0 ** (top - drop))], dtype)
    v = np.ones((1, 1, 2, 1), dtype)
    with pytest.raises(ScoreOverflowError):
        ball.attention(q, k, v, **options)
    if added == "none":
        q[..., 0, 2], k[..., 0, 0, 2] = 2.0**-100, -(2.0**-100)  # 2**-200 below the point
        assert ball.attention(q, k, v)[0, 0, 0, 0] == 1.0


@pytest.mark.parametrize(
    "key, cap, mask, digits",
    [
        ([[1e300], [-1e300]], 4000.0, [2.0**-42, 0.0], 5000),
        ([[20000.0], [0.0]], 1.0, [2.0**53, 2.0**53 - 20000], 18000),
    ],
    ids=["c + b a midpoint, the other key e^-8000 below", "the cap's gap e^-40000, e^-20001"],
)
def test_the_lse_of_a_capped_dominant_key_beside_a_midpoint_takes_the_side_of_the_larger_gap(
    key, cap, mask, digits
):
    """Found by two fresh attacks: a capped dominant score ``c tanh(a) + b`` lies ``c (1 -
    tanh a)`` below its limit ``c + b``, a float64 midpoint, and the other keys lift ``lse``
    by ``log1p(their terms)``: whichever is larger (here the other keys') names the side. It
    raised ReferenceUnresolvedError; equal to the oracle at ``digits`` digits (the 50-digit
    oracle rounds the second to even, ``2**53``)."""
    query, key, mask = np.array([[1.0]]), np.array(key), np.array([mask])
    options = dict(scale=1.0, softcap=cap, attn_mask=mask)
    with oracle_digits(digits):
        want = oracle.attention_parts(query, key, np.zeros((2, 1)), **options).lse.value
    assert ball.attention_parts(query, key, None, lse=True, **options).lse.value[0] == want[0]


def test_the_lse_of_a_dominant_key_keeps_the_digits_of_the_other_terms():
    """``lse = s_m + log1p(sum of the other terms)``: ``log(1 + e**-83)`` at 50 digits kept
    only 13 of them (the oracle returned ``8.985825944049378e-37``); both references now
    round ``e**-83 - e**-166 / 2`` correctly."""
    q = np.full((1, 1, 1, 1), -83.0)
    k = np.array([[[[0.0], [1.0]]]])
    v = np.zeros((1, 1, 2, 1))
    expected = 8.985825944049381e-37
    assert oracle.attention_parts(q, k, v).lse.value.item() == expected
    assert ball.attention_parts(q, k, v, lse=True).lse.value.item() == expected


def test_a_dot_product_inexact_at_the_starting_precision_is_refined_not_a_crash():
    """A score's dot product whose terms lie thousands of bits apart is no exact ball at
    :data:`oracle.ball.PRECISION`: the ``lse`` rounding asks for the score's exact value and
    must get None (refine), not a ValueError from ``fmpq`` (a draw found it)."""
    q = np.full((1, 1, 1, 4), -278.0)
    tiny = 1.7153705760119593e-66
    k = np.array([[[[1.0, tiny, tiny, tiny], [3.058277514569583e-293, tiny, tiny, tiny]]]])
    v = np.zeros((1, 1, 2, 1))
    with oracle_digits(MANY_DIGITS):
        expected = oracle.attention_parts(q, k, v).lse.value
    assert_array_equal(ball.attention_parts(q, k, v, lse=True).lse.value, expected)


def test_weights_tied_to_fifty_digits_still_weigh_their_values():
    """An ALiBi slope of ``2.5e-57`` moves two keys' weights apart by about ``1e-57``; values
    ``0.5`` and ``-0.5`` then give ``0.5 tanh(slope / 2)``, which the ball reference rounds
    correctly and the 50-digit oracle rounds to 0 (its digits end first)."""
    q, k = np.zeros((1, 1, 1, 1)), np.zeros((1, 1, 2, 1))
    v = np.array([[[[0.5], [-0.5]]]])
    slopes = np.array([2.5163065744672856e-57])  # p = Tk - Tq = 1: scores -slope, 0
    got = ball.attention(q, k, v, alibi_slopes=slopes).item()
    with oracle_digits(MANY_DIGITS):
        expected = oracle.attention(q, k, v, alibi_slopes=slopes).value.item()
    assert got == expected == -6.290766436168214e-58
    assert oracle.attention(q, k, v, alibi_slopes=slopes).value.item() == 0.0
