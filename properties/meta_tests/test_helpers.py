"""Meta-tests of the suite's own helpers: assertions that cannot fail, bounds that are too loose
or unsound, and subject declarations that are silently accepted are all defects.

This module needs only ``oracle`` and ``properties`` (not ``impl``), so it also runs in a test
tree that vendored those two folders (see docs/use-in-your-codebase.md).
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from attnprops import oracle
from attnprops.oracle import lab
from attnprops.properties._support import LAB_CAUSAL
from attnprops.properties._support import LAB_KEY
from attnprops.properties._support import LAB_QUERY
from attnprops.properties._support import LAB_VALUE
from attnprops.properties._support import case_from
from attnprops.properties._support import lab_dtype
from attnprops.properties.bounds import attention_bounds
from attnprops.properties.checks import PropertyViolation
from attnprops.properties.checks import assert_equal
from attnprops.properties.checks import assert_shape_dtype
from attnprops.properties.checks import assert_within
from attnprops.properties.checks import describe_result
from attnprops.properties.subject import SubjectError
from attnprops.properties.subject import load_subject


def test_assert_within_fails_outside_the_bound_and_on_nan():
    """assert_within passes inside the bound and raises PropertyViolation outside or on NaN."""
    assert_within(out=[1.0, 2.0], expected=[1.0, 2.0 + 1e-9], bound=1e-8, what="inside")
    with pytest.raises(PropertyViolation, match="1 of 2 elements outside the bound"):
        assert_within(out=[1.0, 2.0], expected=[1.0, 2.1], bound=1e-8, what="outside")
    with pytest.raises(PropertyViolation):
        assert_within(out=[np.nan], expected=[0.0], bound=1.0, what="nan")


def test_assert_equal_is_exact():
    """assert_equal rejects a one-ulp difference and a shape difference."""
    assert_equal(out=np.array([1.0]), expected=np.array([1.0]), what="same")
    with pytest.raises(PropertyViolation):
        assert_equal(out=np.array([1.0]), expected=np.array([np.nextafter(1.0, 2.0)]), what="ulp")
    with pytest.raises(PropertyViolation, match="shape"):
        assert_equal(out=np.zeros(2), expected=np.zeros(3), what="shape")


def _float64_attention(query, key, value, *, is_causal=False, **_ignored):
    """A plain float64 NumPy attention (max subtraction, causal mask), standing in for a real
    implementation in these meta-tests. query (B, H, Tq, D), key (B, H, Tk, D), value
    (B, H, Tk, Dv) -> (B, H, Tq, Dv); bottom-right causal alignment."""
    scores = query @ key.swapaxes(-1, -2) / np.sqrt(query.shape[-1])  # (B, H, Tq, Tk)
    if is_causal:
        tq, tk = scores.shape[-2:]
        scores = np.where(np.arange(tk) <= np.arange(tq)[:, None] + tk - tq, scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ value


def _lab_bounds():
    parts = oracle.attention_parts(
        LAB_CAUSAL.query, LAB_CAUSAL.key, LAB_CAUSAL.value, **LAB_CAUSAL.kwargs()
    )
    return parts, attention_bounds(LAB_CAUSAL, parts)


def test_bound_is_tight_enough_for_a_1e_10_perturbation():
    """On the lab example the float64 output bound is far below a relative error of 1e-10,
    so an output scaled by 1 + 1e-10 fails; the oracle's correctly rounded float64 output and
    a plain float64 NumPy computation pass."""
    parts, bounds = _lab_bounds()
    out = _float64_attention(LAB_CAUSAL.query, LAB_CAUSAL.key, LAB_CAUSAL.value, is_causal=True)
    assert_within(out=out, expected=parts.output.value, bound=bounds.output, what="numpy")
    assert_within(
        out=parts.output.value,
        expected=parts.output.value,
        bound=bounds.output,
        what="oracle float64",
    )
    with pytest.raises(PropertyViolation):
        assert_within(
            out=out * (1 + 1e-10), expected=parts.output.value, bound=bounds.output, what="scaled"
        )
    nonzero = parts.output.value != 0
    assert (bounds.output[nonzero] / np.abs(parts.output.value[nonzero])).max() < 1e-13


def test_bound_covers_the_oracle_float_rounding_and_hidden_keys():
    """The bound is >= the oracle's own rounding (2**-53 |exact|) and exactly 0 on hidden keys."""
    parts, bounds = _lab_bounds()
    assert (bounds.output >= 2.0**-53 * np.abs(parts.output.value)).all()
    hidden = ~np.isfinite(parts.scores.value)
    assert (bounds.weights[hidden] == 0).all()
    assert (bounds.weights[~hidden] > 0).all()


def test_float16_bound_is_wider_than_float64():
    """The bound scales with the dtype's unit roundoff."""
    case16 = case_from(
        LAB_CAUSAL.query.astype(np.float16),
        LAB_CAUSAL.key.astype(np.float16),
        LAB_CAUSAL.value.astype(np.float16),
        is_causal=True,
    )
    parts = oracle.attention_parts(case16.query, case16.key, case16.value, is_causal=True)
    wide = attention_bounds(case16, parts).output
    _, narrow = _lab_bounds()
    assert (wide > 1e9 * narrow.output).all()


def test_unknown_capability_is_an_error(monkeypatch):
    """A typo in ATTNPROPS_CAPABILITIES is rejected, not silently ignored."""
    module = types.ModuleType("typo_subject")
    module.attention = _float64_attention
    module.ATTNPROPS_CAPABILITIES = {"fully_masked_row": "zeros"}
    monkeypatch.setitem(sys.modules, "typo_subject", module)
    with pytest.raises(SubjectError, match="unknown keys"):
        load_subject("typo_subject")


def test_missing_subject_says_how_to_fix():
    """An unimportable subject names the option and the environment variable."""
    with pytest.raises(SubjectError, match="--attn-impl MODULE or ATTN_IMPL"):
        load_subject("no_such_attention_module_xyz")


@pytest.mark.parametrize(
    "out, kind",
    [([[1.0]], "builtins.list"), (None, "builtins.NoneType"), (np.float64(1.0), "numpy.float64")],
)
def test_a_subject_must_return_an_ndarray(out, kind):
    """A list (even of the right values), None or a NumPy scalar breaks the subject contract
    ("return a NumPy array"): it is named, not converted."""
    with pytest.raises(
        PropertyViolation,
        match=rf"output: the subject returned {kind}, "
        r"expected a numpy\.ndarray",
    ):
        assert_shape_dtype(out=out, shape=(1, 1), dtype=np.float64, what="output")
    assert_shape_dtype(out=np.ones((1, 1)), shape=(1, 1), dtype=np.float64, what="output")


@pytest.mark.parametrize(
    "out, words",
    [
        (None, "None"),
        ([1.0], "a builtins.list"),
        (np.array([1.0, np.nan, np.nan]), "an array of shape (3,) with 2 NaN"),
        (np.zeros((1, 2), dtype=np.int64), "an array of shape (1, 2)"),
    ],
)
def test_a_result_that_should_have_raised_is_described_as_it_is(out, words):
    """``None`` is not called a NaN (``numpy.asarray(None, float)`` is one)."""
    assert describe_result(out) == words


def test_a_warning_made_an_error_is_reported_as_a_warning():
    """A RuntimeWarning that a warnings filter turned into an error reads as a warning, not as
    something the subject raised."""
    import warnings

    import pytest

    from attnprops.properties.checks import PropertyViolation
    from attnprops.properties.checks import call_subject

    def warns():
        warnings.warn("divide by zero encountered in divide", RuntimeWarning, stacklevel=1)

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(PropertyViolation, match="the subject warned RuntimeWarning: divide"):
            call_subject(warns, what="attention")


def test_lab_figures_are_checked_in_float64_only():
    """The lab's figures are checked in float64; a subject without it is skipped with the
    reason, not compared with a wider bound. The reason's numbers are checked here: the exact
    weight of seed 000 lies within 7e-9 inside its printed figure's tolerance, less than one
    float32 ulp of that weight."""
    dtypes = lambda *names: types.SimpleNamespace(  # noqa: E731
        capabilities=types.SimpleNamespace(dtypes=names)
    )
    for declared in [("bfloat16", "float16"), ("float16", "float32"), ("float32",)]:
        with pytest.raises(pytest.skip.Exception, match=r"float64 results .* within 7e-9"):
            lab_dtype(dtypes(*declared))
    assert lab_dtype(dtypes("float32", "float64")) == np.float64
    parts = oracle.attention_parts(LAB_QUERY, LAB_KEY, LAB_VALUE, is_causal=True)
    exact = parts.weights.value[0, 0]
    distance = np.abs(exact - lab.WEIGHTS.array())
    closest = np.unravel_index(np.nanargmax(distance), distance.shape)
    margin = lab.WEIGHTS.tolerance - distance[closest]
    assert 0 < margin < 7e-9
    assert margin < np.spacing(np.float32(exact[closest])) < 1.5e-8
