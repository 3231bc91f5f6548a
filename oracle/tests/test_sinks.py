"""The sinks rule (:mod:`oracle.rules.sinks`): the laws of the 50-digit oracle's sinks, and
what is rejected."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attnprops import oracle
from attnprops.oracle.rules import FullyMaskedRowError
from attnprops.oracle.rules import SinksError
from attnprops.oracle.rules import check_sinks

_UNIT = st.floats(-4, 4)


@st.composite
def sunk_calls(draw):
    """``(query, key, value, sinks, kwargs)``: small 4-D calls, GQA, masks, causality, and
    one sink per query head (``-inf`` among them)."""
    Hkv, G = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    Tq, Tk, D = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    q = draw(hnp.arrays(np.float64, (1, Hkv * G, Tq, D), elements=_UNIT))
    k = draw(hnp.arrays(np.float64, (1, Hkv, Tk, D), elements=_UNIT))
    v = draw(hnp.arrays(np.float64, (1, Hkv, Tk, 2), elements=_UNIT))
    logit = st.one_of(st.just(-np.inf), st.floats(-30, 30))
    sinks = draw(hnp.arrays(np.float64, (Hkv * G,), elements=logit))
    kwargs = dict(
        is_causal=draw(st.booleans()) and Tq <= Tk,
        scale=draw(st.one_of(st.none(), st.floats(0.1, 2))),
        attn_mask=draw(st.one_of(st.none(), hnp.arrays(np.float64, (Tq, Tk), elements=_UNIT))),
        fully_masked_rows="zeros",
    )
    return q, k, v, sinks, kwargs


@settings(max_examples=60, deadline=None)
@given(call=sunk_calls())
def test_output_is_plain_attention_times_sigmoid_of_lse_minus_sink(call):
    """``o_sink = o_plain * sigmoid(lse - sigma_h)`` with ``lse = log sum_j exp(s_j)`` over the
    visible keys, to 45 digits: the sink joins the denominator once and carries no value."""
    q, k, v, sinks, kwargs = call
    plain = oracle.attention_parts(q, k, v, **kwargs)
    sunk = oracle.attention_parts(q, k, v, sinks=sinks, **kwargs)
    with mpmath.workdps(60):
        for index in np.ndindex(plain.output.shape[:-1]):
            scores = [s for s in plain.scores.exact[index] if s != mpmath.mpf("-inf")]
            sink = sinks[index[1]]
            if not scores or sink == -np.inf:
                factor = mpmath.mpf(1)
            else:
                lse = mpmath.log(mpmath.fsum(mpmath.exp(s) for s in scores))
                factor = 1 / (1 + mpmath.exp(mpmath.mpf(float(sink)) - lse))
            for c in range(plain.output.shape[-1]):
                want = plain.output.exact[index + (c,)] * factor
                got = sunk.output.exact[index + (c,)]
                assert abs(got - want) <= mpmath.mpf(10) ** -45 * (1 + abs(want)), index


@settings(max_examples=40, deadline=None)
@given(call=sunk_calls())
def test_sinks_of_minus_inf_are_no_sinks(call):
    """All-``-inf`` sinks give exactly the 50-digit values of no sinks."""
    q, k, v, sinks, kwargs = call
    plain = oracle.attention_parts(q, k, v, **kwargs)
    none = oracle.attention_parts(q, k, v, sinks=np.full_like(sinks, -np.inf), **kwargs)
    assert (none.output.exact == plain.output.exact).all()
    assert (none.weights.exact == plain.weights.exact).all()


def test_a_row_without_keys_goes_to_a_finite_sink_and_gives_zero():
    """Under the project's rule (``"raise"``) a row that sees no key is allowed when its
    head's sink is finite (weights and output 0), and raises when it is ``-inf``."""
    q, k, v = np.ones((1, 2, 2, 2)), np.ones((1, 1, 3, 2)), np.ones((1, 1, 3, 2))
    mask = np.ones((1, 2, 2, 3), dtype=bool)
    mask[0, :, 1] = False  # query 1 of both heads sees nothing
    parts = oracle.attention_parts(q, k, v, attn_mask=mask, sinks=np.array([0.5, 3.0]))
    assert (parts.output.value[0, :, 1] == 0).all() and (parts.weights.value[0, :, 1] == 0).all()
    with mpmath.workdps(50):  # query 0 of head 0: three tied keys and the sink
        want = 3 * mpmath.exp(mpmath.mpf(2) / mpmath.sqrt(2))
        want = want / (want + mpmath.exp(0.5))
    assert abs(parts.output.exact[0, 0, 0, 0] - want) < mpmath.mpf(10) ** -45
    with pytest.raises(FullyMaskedRowError, match="finite sink"):
        oracle.attention(q, k, v, attn_mask=mask, sinks=np.array([0.5, -np.inf]))


def test_a_sink_next_to_huge_scores_keeps_its_digits():
    """A sink 1 below scores of ``1e300`` (a mask shared by both keys): the shift ``sigma -
    s_m`` is taken at more digits than the scores' 50, so the weights are exact."""
    q, k = np.array([[1.0, 0.0]]), np.array([[1.0, 0.0], [0.0, 1.0]])
    v = np.array([[1.0], [3.0]])
    bias = np.full((1, 2), 1e300)
    parts = oracle.attention_parts(q, k, v, attn_mask=bias, scale=1.0, sinks=np.array([1e300]))
    with mpmath.workdps(50):  # scores 1e300 + 1 and 1e300, sink 1e300: shifts 0, -1, -1
        e = mpmath.exp(-1)
        want = (1 + 3 * e) / (1 + 2 * e)
    assert abs(parts.output.exact[0, 0] - want) < mpmath.mpf(10) ** -45


@pytest.mark.parametrize("sinks", [np.ones((1, 2)), np.array([np.inf, 0.0])])
def test_sinks_of_two_axes_or_plus_inf_raise_naming_the_argument(sinks):
    """The mistakes shared with ``alibi_slopes``: ``test_head_arrays.py``."""
    with pytest.raises(SinksError, match=r"^sinks: "):
        check_sinks(sinks, num_heads=2)


def test_sinks_are_read_exactly_in_float64():
    got = check_sinks(np.array([-np.inf, 0.1], np.float32), num_heads=2)
    assert got.dtype == np.float64 and got[1] == float(np.float32(0.1)) and got[0] == -np.inf
