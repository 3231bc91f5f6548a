"""oracle.exact.to_float: one correct rounding from 50 digits to binary64, subnormals
included (float(mpf) rounds those twice)."""

from fractions import Fraction

import mpmath
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnprops.oracle.exact import to_float

TINY = Fraction(1, 2**1074)  # the smallest subnormal


@pytest.mark.parametrize(
    "multiple, expected",
    [
        (Fraction(5, 2) * (1 + Fraction(1, 10**30)), 3),  # just past a midpoint: up (float(): 2)
        (Fraction(5, 2), 2),  # a tie: to even
        (Fraction(3, 2), 2),
        (Fraction(1, 3), 0),
        (Fraction(2**52) - Fraction(1, 10**40), 2**52),  # just below the smallest normal
        (Fraction(2**52) - Fraction(1, 2) - Fraction(1, 2**76), 2**52 - 1),  # float(): 2**52
    ],
)
def test_subnormal_results_are_rounded_once(multiple, expected):
    with mpmath.workdps(50):
        x = mpmath.mpf(multiple.numerator) / multiple.denominator * mpmath.mpf(2) ** -1074
        assert to_float(x) == float(expected * TINY)
        assert to_float(-x) == -float(expected * TINY)


@given(st.fractions(min_value=-(2**-1000), max_value=2**-1000))
def test_agrees_with_exact_rational_rounding(value):
    """to_float of a 50-digit value equals Python's Fraction -> float of that same value's
    exact binary expansion (correctly rounded), from subnormals up to 2**-1000."""
    with mpmath.workdps(50):
        x = mpmath.mpf(value.numerator) / value.denominator
        sign, man, exp, _ = x._mpf_
        exact = (
            Fraction((-1) ** sign * int(man) * 2**exp)
            if exp >= 0
            else Fraction((-1) ** sign * int(man), 2**-exp)
        )
        assert to_float(x) == float(exact)
