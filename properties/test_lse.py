"""Properties of the log-sum-exp output, ``return_lse=True``: ``attention`` returns
``(output, lse)`` with ``lse = log sum_j exp(s_j)`` over each row's visible keys (natural
log, the sink not counted, ``-inf`` for a row that sees no key), as FlashAttention's
``softmax_lse`` and FlexAttention's ``return_lse`` (:meth:`impl.Attention.attention`). A
subject declares ``lse``; without it these properties skip.

The laws: ``lse`` is within its error bound of the 50-digit oracle's (:func:`bounds.lse_bounds`);
and two disjoint key sets, each attended with its ``lse``, merge into the attention over their
union (``L = log(e^{l_A} + e^{l_B})``, ``o = e^{l_A - L} o_A + e^{l_B - L} o_B``), what
split-KV, cascade and context-parallel kernels rely on; a part that sees no key has ``lse =
-inf`` and drops out of the merge.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import assume, given, note
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from attnprops.properties._support import fit_to_subject, four_d, oracle_parts, visibility
from attnprops.properties.bounds import U64, attention_bounds, lse_bounds
from attnprops.properties.checks import assert_shape_dtype, assert_within, call_subject, fail
from attnprops.properties.plugin import current_subject
from attnprops.properties.strategies import declared_variants, subject_cases, with_keys_hidden

SUBJECT = current_subject()
_ALL = declared_variants(SUBJECT)
_NO_SINKS = declared_variants(SUBJECT, sinks=False)


def output_and_lse(subject, case, what: str):
    """The subject's ``attention(..., return_lse=True)`` for ``case``: the output (the
    case's shape and dtype, no NaN) and ``lse`` (``query.shape[:-1]``, a float dtype, no NaN),
    the latter as float64."""
    __tracebackhide__ = True
    got = call_subject(
        subject.attention,
        case.query,
        case.key,
        case.value,
        **case.subject_kwargs(),
        return_lse=True,
        what=what,
    )
    if not (isinstance(got, tuple) and len(got) == 2):
        fail(f"{what}: return_lse=True must return (output, lse); got {type(got).__name__}")
    out, lse = got
    shape = case.query.shape[:-1]
    out = assert_shape_dtype(
        out=out, shape=shape + case.value.shape[-1:], dtype=case.dtype, what=f"{what} output"
    )
    if not isinstance(lse, np.ndarray) or lse.dtype.kind != "f":
        fail(f"{what}: lse must be a float numpy.ndarray; got {type(lse).__name__}")
    return out, assert_shape_dtype(out=lse, shape=shape, dtype=lse.dtype, what=f"{what} lse")


def assert_lse_within(lse, expected, bound, what: str, case) -> None:
    """``lse`` is ``-inf`` exactly where ``expected`` is, and within ``bound`` elsewhere."""
    __tracebackhide__ = True
    lse, expected = np.asarray(lse, np.float64), np.asarray(expected, np.float64)
    empty = np.isneginf(expected)
    if (np.isneginf(lse) != empty).any():
        where = np.argwhere(np.isneginf(lse) != empty)[0].tolist()
        fail(
            f"{what}: at row {where} lse is {lse[tuple(where)]!r}, expected "
            f"{expected[tuple(where)]!r} (-inf exactly where a row sees no key); "
            f"call: {case.describe()}"
        )
    assert_within(
        out=np.where(empty, 0.0, lse),
        expected=np.where(empty, 0.0, expected),
        bound=bound,
        what=what,
        case=case,
    )


@pytest.mark.requires("lse")
@pytest.mark.oracle_backed
@given(case=st.one_of(subject_cases(SUBJECT), subject_cases(SUBJECT, **_ALL)))
def test_lse_matches_oracle(subject, case):
    """The ``lse`` returned with the output is within its error bound of the 50-digit
    oracle's (the sink not counted; ``-inf`` exactly for a row that sees no key), with masks,
    causality, offsets, GQA, blocks and, half the time, every declared variant."""
    case = fit_to_subject(case, subject)
    note(f"case: {case.describe()}")
    parts = oracle_parts(case, subject)
    _, lse = output_and_lse(subject, case, "attention(return_lse=True)")
    bound = lse_bounds(case, parts, subject.arithmetic(case.dtype))
    assert_lse_within(lse, parts.lse.value, bound, "lse vs 50-digit oracle", case)


@st.composite
def key_splits(draw, case, every_part_sees_a_key: bool):
    """Bool ``(B, Hq, Tq, Tk)``: the keys of part A (the rest are part B), drawn per row;
    with ``every_part_sees_a_key`` each row's first visible key goes to A and its last to B
    (rows with fewer than two visible keys are rejected)."""
    visible = visibility(case)
    in_a = draw(hnp.arrays(np.bool_, visible.shape))
    if every_part_sees_a_key:
        assume((visible.sum(axis=-1) >= 2).all())
        Tk = visible.shape[-1]
        first = visible.argmax(axis=-1)[..., None]
        last = (Tk - 1 - visible[..., ::-1].argmax(axis=-1))[..., None]
        np.put_along_axis(in_a, first, True, axis=-1)
        np.put_along_axis(in_a, last, False, axis=-1)
    return in_a


def _merge(out_a, lse_a, out_b, lse_b):
    """The exact merge of two parts (at 60 digits, rounded to float64): ``L``, the weights
    ``e^{l_A - L}``, ``e^{l_B - L}`` and the output, each row (``(B, Hq, Tq)``, ``(B, Hq, Tq,
    Dv)``); a part with ``lse = -inf`` has weight 0 (both: ``L = -inf``, output 0)."""
    L = np.full(lse_a.shape, -np.inf)
    a, b = np.zeros(lse_a.shape), np.zeros(lse_a.shape)
    out = np.zeros(out_a.shape)
    with mpmath.workdps(60):
        for index in np.ndindex(lse_a.shape):
            la, lb = (mpmath.mpf(float(x[index])) for x in (lse_a, lse_b))
            if la == -mpmath.inf and lb == -mpmath.inf:
                continue
            total = mpmath.log(mpmath.exp(la) + mpmath.exp(lb))
            wa, wb = mpmath.exp(la - total), mpmath.exp(lb - total)
            L[index], a[index], b[index] = float(total), float(wa), float(wb)
            for c in range(out_a.shape[-1]):
                o = wa * mpmath.mpf(float(out_a[index + (c,)])) + wb * float(out_b[index + (c,)])
                out[index + (c,)] = float(o)
    return L, a, b, out


@pytest.mark.requires("lse")
@pytest.mark.oracle_backed
@given(case=st.one_of(subject_cases(SUBJECT), subject_cases(SUBJECT, **_NO_SINKS)), data=st.data())
def test_two_key_sets_merge_into_their_union(subject, case, data):
    """Attention over each of two disjoint sets of the visible keys (drawn per row), each
    with its ``lse``, merged exactly (``L = log(e^{l_A} + e^{l_B})``, ``o = e^{l_A - L} o_A +
    e^{l_B - L} o_B``) gives the 50-digit oracle's output and ``lse`` over all the keys,
    within the bound carried from each part's (``beta`` for the outputs, ``lambda`` for the
    ``lse``; with ``kappa_A = lambda_A + max(lambda_A, lambda_B)`` the merged weight is within
    a factor ``e^{kappa_A}`` of the exact one, so the output errs by at most ``sum_P a_P
    (beta_P + e^{kappa_P} (e^{kappa_P} - 1) (|o_P| + beta_P))``). Under
    ``fully_masked_rows="zeros"`` a part may see no key of a row: its ``lse`` is ``-inf`` and
    it drops out; under ``"raise"`` each part sees a key of every row."""
    case = fit_to_subject(case, subject)
    zeros = subject.capabilities.fully_masked_rows == "zeros"
    in_a = data.draw(key_splits(case, not zeros), label="keys of part A")
    visible = visibility(case)
    part_a = with_keys_hidden(case, ~(visible & in_a), "split of the keys")
    part_b = with_keys_hidden(case, ~(visible & ~in_a), "split of the keys")
    note(f"case: {case.describe()}")
    arithmetic = subject.arithmetic(case.dtype)
    results = []
    for name, part in (("A", part_a), ("B", part_b)):
        out, lse = output_and_lse(subject, part, f"part {name}")
        parts = oracle_parts(part, subject)
        beta = four_d(attention_bounds(part, parts, arithmetic).output)
        lam = lse_bounds(part, parts, arithmetic)
        results.append((four_d(out).astype(np.float64), lse.reshape(beta.shape[:3]), beta, lam))
    (out_a, lse_a, beta_a, lam_a), (out_b, lse_b, beta_b, lam_b) = results
    lam_a, lam_b = lam_a.reshape(lse_a.shape), lam_b.reshape(lse_b.shape)
    L, a, b, merged = _merge(out_a, lse_a, out_b, lse_b)
    whole = oracle_parts(case, subject)
    with np.errstate(over="ignore", invalid="ignore"):
        worst = np.maximum(lam_a, lam_b)
        bound = U64 * np.abs(merged)
        for w, lam, out, beta in ((a, lam_a, out_a, beta_a), (b, lam_b, out_b, beta_b)):
            kappa = (lam + worst)[..., None]
            carried = beta + np.exp(kappa) * np.expm1(kappa) * (np.abs(out) + beta)
            bound = bound + np.where(w[..., None] > 0, w[..., None] * carried, 0.0)
        bound = (bound + U64 * np.abs(four_d(whole.output.value))) * (1 + 2.0**-40)
        lse_bound = (worst + U64 * np.abs(np.where(np.isfinite(L), L, 0.0))) * (1 + 2.0**-40)
    assert_within(
        out=merged,
        expected=four_d(whole.output.value),
        bound=np.where(np.isnan(bound), np.inf, bound),
        what="merge of two key sets vs 50-digit oracle over their union",
        case=case,
    )
    expected_lse = whole.lse.value[None, None] if case.query.ndim == 2 else whole.lse.value
    assert_lse_within(L, expected_lse, lse_bound, "merged lse vs 50-digit oracle", case)
