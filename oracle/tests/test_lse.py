"""The oracle's log-sum-exp (:class:`oracle.OracleParts` ``lse``) and the merge law it
obeys at 50 digits: two disjoint key sets merge into their union."""

from __future__ import annotations

import mpmath
import numpy as np
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attnprops import oracle

_UNIT = st.floats(-4, 4)


@st.composite
def split_calls(draw):
    """``(query, key, value, kwargs, in_a)``: a small 4-D call (GQA, a float mask, causality
    or not, sinks or not, ``fully_masked_rows="zeros"``) and a per-row split of its keys."""
    Hkv, G = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    Tq, Tk, D = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    q = draw(hnp.arrays(np.float64, (1, Hkv * G, Tq, D), elements=_UNIT))
    k = draw(hnp.arrays(np.float64, (1, Hkv, Tk, D), elements=_UNIT))
    v = draw(hnp.arrays(np.float64, (1, Hkv, Tk, 2), elements=_UNIT))
    kwargs = dict(
        is_causal=draw(st.booleans()) and Tq <= Tk,
        fully_masked_rows="zeros",
        attn_mask=draw(
            hnp.arrays(np.float64, (1, Hkv * G, Tq, Tk), elements=st.just(-np.inf) | _UNIT)
        ),
    )
    if draw(st.booleans()):
        kwargs["sinks"] = draw(hnp.arrays(np.float64, (Hkv * G,), elements=st.floats(-5, 5)))
    return q, k, v, kwargs, draw(hnp.arrays(np.bool_, (1, Hkv * G, Tq, Tk)))


@settings(max_examples=40, deadline=None)
@given(call=split_calls())
def test_lse_is_the_log_of_the_sum_of_the_exponentials(call):
    """``lse = log sum_j exp(s_j)`` over the visible keys, the sink not counted; ``-inf``
    for a row that sees no key."""
    q, k, v, kwargs, _ = call
    parts = oracle.attention_parts(q, k, v, **kwargs)
    with mpmath.workdps(60):
        for index in np.ndindex(parts.lse.shape):
            scores = [s for s in parts.scores.exact[index] if s != mpmath.mpf("-inf")]
            got = parts.lse.exact[index]
            if not scores:
                assert got == mpmath.mpf("-inf")
                continue
            want = mpmath.log(mpmath.fsum(mpmath.exp(s) for s in scores))
            assert abs(got - want) <= mpmath.mpf(10) ** -45 * (1 + abs(want)), index


@settings(max_examples=40, deadline=None)
@given(call=split_calls())
def test_two_key_sets_merge_into_their_union(call):
    """Each part (the keys in ``in_a``, the rest) with its ``lse``: ``L = log(e^{l_A} +
    e^{l_B})`` is the whole's ``lse`` and ``e^{l_A - L} o_A + e^{l_B - L} o_B`` its output
    without sinks (to 45 digits); a part that sees no key has ``lse = -inf`` and drops out.
    With sinks, the merged output times ``sigmoid(L - sigma_h)`` is the output with them."""
    q, k, v, kwargs, in_a = call
    sinks = kwargs.pop("sinks", None)
    mask = kwargs.pop("attn_mask")
    whole = oracle.attention_parts(q, k, v, attn_mask=mask, sinks=sinks, **kwargs)
    a = oracle.attention_parts(q, k, v, attn_mask=np.where(in_a, mask, -np.inf), **kwargs)
    b = oracle.attention_parts(q, k, v, attn_mask=np.where(in_a, -np.inf, mask), **kwargs)
    tol = mpmath.mpf(10) ** -45
    with mpmath.workdps(60):
        for index in np.ndindex(whole.lse.shape):
            la, lb = a.lse.exact[index], b.lse.exact[index]
            if la == lb == mpmath.mpf("-inf"):
                assert whole.lse.exact[index] == mpmath.mpf("-inf")
                assert all(x == 0 for x in whole.output.exact[index])
                continue
            total = mpmath.log(mpmath.exp(la) + mpmath.exp(lb))
            assert abs(total - whole.lse.exact[index]) <= tol * (1 + abs(total))
            factor = 1
            if sinks is not None:
                factor = 1 / (1 + mpmath.exp(mpmath.mpf(float(sinks[index[1]])) - total))
            for c in range(whole.output.shape[-1]):
                merged = (
                    mpmath.exp(la - total) * a.output.exact[index + (c,)]
                    + mpmath.exp(lb - total) * b.output.exact[index + (c,)]
                ) * factor
                assert abs(merged - whole.output.exact[index + (c,)]) <= tol, (index, c)
