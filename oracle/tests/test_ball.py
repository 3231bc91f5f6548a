"""The ball-arithmetic reference (oracle.ball) against the 50-digit oracle: bit for bit.

Both round the exact result to nearest, so they must return the same float64 scores, weights
and output, and raise the same errors; but for values whose 50-digit approximation sits on a
rounding boundary, which only the ball reference can resolve (it refines until it can).
"""

from __future__ import annotations

from contextlib import contextmanager

import ml_dtypes
import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy.testing import assert_array_equal

from attnprops import oracle
from attnprops.oracle import ball
from attnprops.oracle import ball_tiles
from attnprops.oracle import exact_scores
from attnprops.oracle import reference
from attnprops.oracle.rules import AttentionInputError
from attnprops.oracle.rules import ScoreOverflowError
from attnprops.oracle.rules import compute_dtype

# Value regimes. "spread" mixes exponents from subnormal to 1e4: dot products whose terms
# span thousands of bits. Not much larger: the 50-digit oracle rounds each score to 50 digits
# before subtracting the row maximum, so scores of 1e30 leave its weights only about 20
# correct digits, and a float64 result near a rounding boundary may then differ from the
# correctly rounded one (the ball reference subtracts exact dot products instead).
ELEMENTS = {
    "unit": lambda width: st.floats(-4, 4, width=width),
    "ties": lambda width: st.sampled_from([0.0, 0.5, -0.5, 1.0, -1.0, 2.0]),
    "spread": lambda width: st.floats(-1e4, 1e4, width=width),
}


@st.composite
def calls(draw):
    """``(query, key, value, kwargs)``: small calls of every kind, 4-D or 2-D, with sinks,
    windows, ALiBi and caps or without each."""
    B, Hkv, G = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 3))
    Tq, Tk, D, Dv = (draw(st.integers(1, 5)) for _ in range(4))
    dtype = draw(st.sampled_from([np.float64, np.float32, np.float16]))
    regime = draw(st.sampled_from(sorted(ELEMENTS)))
    elements = ELEMENTS[regime](np.dtype(dtype).itemsize * 8)
    q = draw(hnp.arrays(dtype, (B, Hkv * G, Tq, D), elements=elements))
    k = draw(hnp.arrays(dtype, (B, Hkv, Tk, D), elements=elements))
    v = draw(hnp.arrays(dtype, (B, Hkv, Tk, Dv), elements=elements))
    is_causal = draw(st.booleans()) and Tq <= Tk
    kwargs = dict(
        is_causal=is_causal,
        scale=draw(st.one_of(st.none(), st.floats(0.05, 4))),
        query_start=draw(st.one_of(st.none(), st.integers(0, max(0, Tk - Tq))))
        if Tq <= Tk
        else None,
        fully_masked_rows=draw(st.sampled_from(["raise", "zeros"])),
    )
    mask_kind = draw(st.sampled_from(["none", "bool", "float"]))
    if mask_kind == "bool":
        kwargs["attn_mask"] = draw(hnp.arrays(np.bool_, (B, 1, Tq, Tk)))
    elif mask_kind == "float":
        bias = st.one_of(st.just(-np.inf), st.floats(-8, 8))
        kwargs["attn_mask"] = draw(hnp.arrays(np.float64, (Tq, Tk), elements=bias))
    Hq = Hkv * G
    logit = st.one_of(st.just(-np.inf), st.floats(-8, 8), st.floats(-300, 300))
    # The variants, each drawn or not; sinks and caps not with "spread" values: a saturated
    # tanh, or a sink 1e8 below the scores, moves a tied row's rational output (a float64
    # midpoint) by less than 2**-8192, which the ball reference refuses to guess
    # (ReferenceUnresolvedError, its documented limit; the oracle rounds it to the midpoint).
    features = {
        "sinks": hnp.arrays(np.float64, (Hq,), elements=logit),
        "window": st.tuples(st.none() | st.integers(0, 5), st.none() | st.integers(0, 5)),
        "alibi_slopes": hnp.arrays(np.float64, (Hq,), elements=st.floats(-2, 2)),
        "softcap": st.floats(0.25, 64),
    }
    for name, strategy in features.items():
        if name in ("sinks", "softcap") and regime == "spread":
            continue
        if draw(st.booleans()):
            kwargs[name] = draw(strategy)
    if draw(st.booleans()) and B == Hkv == G == 1:
        q, k, v = q[0, 0], k[0, 0], v[0, 0]
        if mask_kind == "bool":
            kwargs["attn_mask"] = kwargs["attn_mask"][0, 0]
    return q, k, v, kwargs


# (KEY_TILE, ROW_BLOCK, PAD_FROM): the module's own, or tiles and blocks smaller than the
# calls, padded with zero rows or not
TILINGS = st.sampled_from(
    [
        (ball_tiles.KEY_TILE, ball_tiles.ROW_BLOCK, ball_tiles.PAD_FROM),
        (1, 1, ball_tiles.PAD_FROM),
        (2, 3, (1, 1)),
        (3, 2, (1, 1)),
        (2, 4, (2, 2)),
    ]
)


@contextmanager
def tiled(tiling):
    """``oracle.ball_tiles`` with ``tiling`` = (keys per tile, rows per block, when to pad),
    restored after."""
    saved = ball_tiles.KEY_TILE, ball_tiles.ROW_BLOCK, ball_tiles.PAD_FROM
    ball_tiles.KEY_TILE, ball_tiles.ROW_BLOCK, ball_tiles.PAD_FROM = tiling
    try:
        yield
    finally:
        ball_tiles.KEY_TILE, ball_tiles.ROW_BLOCK, ball_tiles.PAD_FROM = saved


def _outcome(function, *args, **kwargs):
    try:
        return function(*args, **kwargs), None
    except AttentionInputError as exc:
        return None, (type(exc), str(exc))


@settings(max_examples=150)
@given(call=calls())
def test_ball_reference_equals_the_50_digit_oracle_bit_for_bit(call):
    """Scores, weights, output and lse are the 50-digit oracle's float64s, bit for bit (both are
    the exact values correctly rounded), or both raise the same error with the same message;
    where 50 digits are too few (:func:`_assert_the_oracle_lacked_digits`), the oracle's at
    :data:`MANY_DIGITS`."""
    q, k, v, kwargs = call
    expected, expected_error = _outcome(oracle.attention_parts, q, k, v, **kwargs)
    got, got_error = _outcome(ball.attention_parts, q, k, v, lse=True, **kwargs)
    assert got_error == expected_error
    if expected is None:
        return
    for part in ("scores", "weights", "output", "lse"):
        want, have = getattr(expected, part).value, getattr(got, part).value
        assert have.dtype == np.float64 and have.shape == want.shape, part
        differ = ~((have == want) | (np.isnan(have) & np.isnan(want)))
        if differ.any():
            _assert_the_oracle_lacked_digits(call, part, have, differ)
        nonzero = want != 0  # a zero's sign: see oracle.ball_rounding.to_float
        assert (np.signbit(have) == np.signbit(want))[nonzero].all(), part


MANY_DIGITS = 1000  # enough for every value calls() draws: its smallest float is 2**-1074


@contextmanager
def oracle_digits(digits: int):
    """The 50-digit oracle computing at ``digits`` significant digits, restored after."""
    saved = reference.DIGITS, exact_scores.DIGITS
    reference.DIGITS = exact_scores.DIGITS = digits
    try:
        yield
    finally:
        reference.DIGITS, exact_scores.DIGITS = saved


def _assert_the_oracle_lacked_digits(call, part: str, have: np.ndarray, differ) -> None:
    """Where the ball reference and the 50-digit oracle differ, the 50 digits must be too
    few: the oracle at :data:`MANY_DIGITS` returns the ball's value (an ALiBi slope of
    ``2.5e-57`` moves two tied weights by less than ``1e-50``, and an output whose values
    cancel, ``0.5`` and ``-0.5``, is ``6.3e-58``, not the 50-digit ``0``), or its value lies
    within ``1e-40`` (relative) of the midpoint of two adjacent float64s, one of them the
    ball's (a score of ``0.75 * scale - 1.3e-59``, whose exact value lies just below a
    midpoint, rounds up even then). Anything else is a bug."""
    q, k, v, kwargs = call
    with oracle_digits(MANY_DIGITS):
        precise = getattr(oracle.attention_parts(q, k, v, **kwargs), part)
    for index in zip(*np.nonzero(differ)):
        want = precise.value[index]
        if have[index] == want:
            continue
        assert np.nextafter(want, have[index]) == have[index], (part, have[index], want)
        with mpmath.workdps(60):  # the midpoint of two float64s is exact in 60 digits
            midpoint = (mpmath.mpf(have[index]) + mpmath.mpf(want)) / 2
            close = abs(precise.exact[index] - midpoint) <= mpmath.mpf("1e-40") * abs(midpoint)
        assert close, (part, have[index], want, precise.exact[index])


@settings(max_examples=40)
@given(call=calls(), tiling=TILINGS)
def test_tiles_and_blocks_change_nothing(call, tiling):
    """Key tiles and row blocks that cut the call (down to one key, one row) give the same
    parts bit for bit as the module's own (each value is the exact one correctly rounded),
    and the same errors."""
    q, k, v, kwargs = call
    whole, error = _outcome(ball.attention_parts, q, k, v, lse=True, **kwargs)
    with tiled(tiling):
        cut, cut_error = _outcome(ball.attention_parts, q, k, v, lse=True, **kwargs)
    assert cut_error == error
    if error is not None:
        return
    for part in ("scores", "weights", "output", "lse"):
        assert_array_equal(getattr(cut, part).value, getattr(whole, part).value, err_msg=part)


def test_kept_tiles_are_exact_conversions_and_bounded(monkeypatch):
    """A tile converted by an earlier call is reused only for the same shape and the same
    values (bytes of ``(2, 4)`` and ``(4, 2)`` zeros are equal, their matrices are not), the
    kept entries stay within :data:`~oracle.ball_tiles.KEPT_ENTRIES`, and calls that reuse
    tiles return what fresh conversions give."""
    monkeypatch.setattr(ball_tiles, "KEPT_ENTRIES", 3 * ball_tiles.KEY_TILE * 4)
    monkeypatch.setattr(ball_tiles, "_kept", type(ball_tiles._kept)())
    monkeypatch.setattr(ball_tiles, "_kept_entries", 0)
    wide, tall = np.zeros((2, 4)), np.zeros((4, 2))
    assert (ball_tiles._tile(wide).nrows(), ball_tiles._tile(tall).nrows()) == (2, 4)
    x = np.random.default_rng(5).standard_normal((3, 7)) * 1e-3
    first = ball_tiles._tile(x)
    assert ball_tiles._tile(x.copy()) is first
    assert first.entries() == ball_tiles.matrix(x).entries()
    assert ball_tiles._tile(x + 2.0**-60) is not first  # a different value is not reused
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal((1, 2, n, 4)) for n in (3, 300, 300))
    fresh = ball.attention_parts(q, k, v, lse=True, is_causal=False)
    assert ball_tiles._kept_entries <= ball_tiles.KEPT_ENTRIES  # 12 tiles made, 3 kept
    assert len(ball_tiles._kept) == 3
    again = ball.attention_parts(q, k, v, lse=True, is_causal=False)
    for part in ("scores", "weights", "output", "lse"):
        assert_array_equal(getattr(again, part).value, getattr(fresh, part).value, err_msg=part)


@settings(max_examples=40)
@given(call=calls(), data=st.data(), tiling=TILINGS)
def test_rows_are_the_same_rows_of_the_whole_call(call, data, tiling):
    """``rows=`` returns exactly those rows of the whole call, sorted, repeats dropped (the
    rows' blocks cut by ``tiling`` or not)."""
    q, k, v, kwargs = call
    whole, error = _outcome(ball.attention_parts, q, k, v, **kwargs)
    if error is not None:
        return
    Tq = q.shape[-2]
    rows = data.draw(st.lists(st.integers(0, Tq - 1), min_size=1, max_size=4), label="rows")
    with tiled(tiling):
        some = ball.attention_parts(q, k, v, rows=rows, **kwargs)
    kept = sorted(set(rows))
    assert some.rows == tuple(kept)
    for part in ("scores", "weights", "output"):
        np.testing.assert_array_equal(
            getattr(some, part).value, getattr(whole, part).value[..., kept, :], err_msg=part
        )


@settings(max_examples=40)
@given(call=calls())
def test_output_alone_is_the_whole_call_s_output(call):
    """``scores_and_weights=False`` (what ``ball.attention`` and the oracle_float64 subject
    use) returns the same output and lse bit for bit and the same errors, without the
    scores and weights."""
    q, k, v, kwargs = call
    whole, error = _outcome(ball.attention_parts, q, k, v, lse=True, **kwargs)
    alone, alone_error = _outcome(
        ball.attention_parts, q, k, v, lse=True, scores_and_weights=False, **kwargs
    )
    assert alone_error == error
    if error is not None:
        return
    assert alone.scores is None and alone.weights is None
    assert_array_equal(alone.output.value, whole.output.value)
    assert_array_equal(alone.lse.value, whole.lse.value)
    assert_array_equal(ball.attention(q, k, v, **kwargs), whole.output.value)


def test_scores_and_weights_is_a_bool_and_needs_a_value_to_be_false():
    q = np.random.default_rng(0).standard_normal((3, 2))
    with pytest.raises(AttentionInputError, match="scores_and_weights: 'no' must be True or False"):
        ball.attention_parts(q, q, q, scores_and_weights="no")
    with pytest.raises(ValueError, match="nothing to return without a value"):
        ball.attention_parts(q, q, scores_and_weights=False)
    for function, args in ((ball.attention, (q, q, q)), (ball.attention_weights, (q, q))):
        with pytest.raises(TypeError, match="unexpected keyword argument 'scores_and_weights'"):
            function(*args, scores_and_weights=True)
        with pytest.raises(
            TypeError, match=rf"^{function.__name__}\(\) got an unexpected .*'is_casual'"
        ):
            function(*args, is_casual=True)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("factor", [1e-3, 0.999999, 1.0, 1.000001, 1e3])
def test_overflow_rule_agrees_with_the_50_digit_oracle(dtype, factor):
    """Scores just below, at and past the compute dtype's maximum raise (or not) as in the
    50-digit oracle, with the same error and message."""
    limit = float(ml_dtypes.finfo(compute_dtype(np.dtype(dtype))).max)
    big = min(np.sqrt(limit) * factor, float(ml_dtypes.finfo(dtype).max))
    q = np.array([[big, 1.0], [1.0, -big]], dtype=dtype)
    k = np.array([[big, 2.0], [0.5, big]], dtype=dtype)
    with np.errstate(over="ignore"):
        expected = _outcome(oracle.attention_parts, q, k, k, scale=1.0)
    got = _outcome(ball.attention_parts, q, k, k, scale=1.0)
    assert got[1] == expected[1]
    if expected[0] is not None:
        np.testing.assert_array_equal(got[0].output.value, expected[0].output.value)


def test_overflow_rule_applies_to_rows_not_asked_for():
    """A score overflowing float64 in row 1 raises even when only row 0 is asked for (the
    rule is on the whole call, as in the 50-digit oracle)."""
    q = np.array([[1.0, 0.0], [1e300, 0.0]])
    k = np.array([[1e300, 0.0], [1.0, 1.0]])
    with pytest.raises(ScoreOverflowError):
        ball.attention_parts(q, k, k, rows=[0])


@pytest.mark.parametrize(
    "rows, message",
    [
        ([3], r"rows: every row must lie in \[0, Tq=3\); got 3"),
        ([-1], r"must lie in \[0, Tq=3\); got -1"),
        ([0.5], r"must be an int in \[0, Tq=3\); got 0.5"),
        ([True], r"must be an int in \[0, Tq=3\); got True"),
        ("0", r"rows: a sequence of row indices"),
        (0, r"rows: a sequence of row indices"),
        ([[0, 1]], r"rows: a sequence of row indices"),
        ([], r"rows: empty; pass None for every row"),
    ],
)
def test_bad_rows_raise(rows, message):
    """rows= takes a non-empty sequence of ints in range, nothing else (a float would have
    been truncated to a row, a string read as its characters)."""
    q = np.ones((3, 2))
    with pytest.raises(ValueError, match=message):
        ball.attention_parts(q, q, q, rows=rows)
    assert ball.attention_parts(q, q, q, rows=np.array([2, 0, 2])).rows == (0, 2)


def test_ties_are_exact():
    """Two identical keys under an irrational scale (D=3) get weights exactly 1/2 each, and
    the output is exactly the mean of their values, which here is the midpoint between two
    adjacent floats no rounded weight could produce: 1 + 2**-53 rounds (ties to even) to 1."""
    q = np.array([[0.3, 0.7, 0.1]])
    k = np.array([[0.2, 0.5, 0.9], [0.2, 0.5, 0.9]])
    v = np.array([[1.0], [1.0 + 2.0**-52]])
    parts = ball.attention_parts(q, k, v)
    assert parts.weights.value.tolist() == [[0.5, 0.5]]
    assert parts.output.value.tolist() == [[1.0]]
    assert oracle.attention(q, k, v).value.tolist() == [[1.0]]


def test_inputs_not_modified():
    rng = np.random.default_rng(3)
    q, k, v = (
        rng.standard_normal((1, 2, 4, 3)),
        rng.standard_normal((1, 1, 6, 3)),
        rng.standard_normal((1, 1, 6, 2)),
    )
    mask = rng.random((4, 6)) < 0.7
    mask[:, 0] = True
    copies = [x.copy() for x in (q, k, v, mask)]
    ball.attention_parts(q, k, v, attn_mask=mask, is_causal=True, rows=[1, 3])
    for before, after in zip(copies, (q, k, v, mask)):
        np.testing.assert_array_equal(before, after)


@pytest.mark.parametrize("bias", [-1e308, 1e300, -3.5e200, 1e35])
def test_a_huge_mask_shared_by_every_key_changes_nothing(bias):
    """A finite mask adding the same huge constant to every key leaves the weights (softmax
    is shift-invariant): both references give the unmasked result, bit for bit. The 50-digit
    oracle once rounded ``q . k + b`` to 50 digits before subtracting the row maximum, which
    left nothing of the dot products: uniform weights (docs/findings.md, S1)."""
    rng = np.random.default_rng(7)
    q, k, v = rng.standard_normal((3, 4)), rng.standard_normal((5, 4)), rng.standard_normal((5, 2))
    mask = np.full((3, 5), bias)
    plain = oracle.attention(q, k, v).value
    assert_array_equal(oracle.attention(q, k, v, attn_mask=mask).value, plain)
    assert_array_equal(ball.attention(q, k, v, attn_mask=mask), plain)


def test_score_estimates_are_the_scores_in_float64():
    """The estimates that pick each row's subtracted key are the scores themselves, scaled,
    capped and biased (in float64), so the key picked is a largest one: with a small scale
    and a mask bias the unscaled dot products would order the keys otherwise."""
    from attnprops.oracle.ball_estimates import score_estimates
    from attnprops.oracle.rules import check_attention_inputs

    q = np.array([[1.0, 0.0]])
    k = np.array([[8.0, 0.0], [0.0, 0.0]])
    bias = np.array([[0.0, 1.0]])
    problem = check_attention_inputs(q, k, np.ones((2, 1)), attn_mask=bias, scale=0.1, softcap=5.0)
    want = 5.0 * np.tanh(np.array([0.8, 0.0]) / 5.0) + np.array([0.0, 1.0])
    np.testing.assert_allclose(score_estimates(problem)[0, 0, 0], want, rtol=1e-15)
    assert score_estimates(problem)[0, 0, 0].argmax() == 1
