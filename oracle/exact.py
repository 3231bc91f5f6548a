"""Exact arithmetic on binary floats, for the 50-digit oracle (:mod:`oracle.reference`).

A binary64 number is an integer over a power of two, so a vector of them is a list of
integers over one power of two (:class:`ExactVector`), and a dot product of two such vectors
is an exact integer (:func:`exact_dot_int`), rounded once to the working precision
(:func:`exact_dot`, the value ``mpmath.fdot`` gives: exact products, exact sum, one rounding).
:func:`to_float` is the one conversion back to binary64: round to nearest, in one rounding.
Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., ch. 2 (floating-point
numbers as scaled integers).
"""

from __future__ import annotations

import operator
from typing import NamedTuple

import mpmath

__all__ = [
    "DIGITS",
    "ExactVector",
    "dyadic",
    "exact_dot",
    "exact_dot_int",
    "exact_vector",
    "scaled",
    "to_float",
    "weighted_sum",
]

DIGITS = 50  # the oracle's significant digits


_SMALLEST_NORMAL = 2.0**-1022


def to_float(x: mpmath.mpf) -> float:
    """The one conversion from 50 digits to binary64: round to nearest (ties to even), in
    one rounding. ``float(mpf)`` rounds to 53 bits first, which rounds a subnormal result
    twice (``2.5 * 2**-1074 (1 + 1e-30)`` came out ``2 * 2**-1074``, not ``3 * 2**-1074``);
    below the normal range the value is divided out exactly instead (CPython's int / int
    true division is correctly rounded)."""
    value = float(x)
    if abs(value) <= _SMALLEST_NORMAL:  # <=: 2**-1022 may be a double rounding from below
        if not x:
            return 0.0
        sign, man, exp, _ = x._mpf_
        man = int(man)  # a gmpy2 mpz divides into an mpfr, which has no subnormals
        if man.bit_length() + exp <= -1075:  # at most 2**-1075, half the smallest subnormal
            value = 0.0
        else:
            value = man / (1 << -exp) if exp < 0 else float(man << exp)
        return -value if sign else value
    return value


def dyadic(x: float) -> tuple[int, int]:
    """``x == numerator / 2**shift`` exactly (binary floats are dyadic rationals)."""
    numerator, denominator = float(x).as_integer_ratio()
    return numerator, denominator.bit_length() - 1


class ExactVector(NamedTuple):
    """Finite numbers as integers over one power of two: ``x[d] == ints[d] / 2**shift``.

    ``span``: bits between the lowest set bits of the smallest and the largest non-zero entry;
    ``ints`` is None when the span exceeded the limit it was built with.
    """

    ints: list[int] | None
    shift: int
    span: int


def exact_vector(xs, max_span: int | None = None) -> ExactVector:
    """Binary64 floats or finite ``mpf`` values as an :class:`ExactVector` (exact)."""
    parts = []
    for x in xs:
        if isinstance(x, mpmath.mpf):
            mantissa, exponent = x.man_exp  # x == mantissa * 2**exponent, mantissa odd or 0
            parts.append((int(mantissa), -int(exponent)))
        else:
            parts.append(dyadic(x))
    shift = max(s for _, s in parts)
    shifts = [s for n, s in parts if n]
    span = max(shifts) - min(shifts) if shifts else 0
    if max_span is not None and span > max_span:
        return ExactVector(None, shift, span)
    return ExactVector([n << (shift - s) for n, s in parts], shift, span)


def exact_dot_int(a: ExactVector, b: ExactVector) -> int:
    """``sum_d a[d] * b[d] * 2**(a.shift + b.shift)``: the dot product as an exact integer."""
    return sum(map(operator.mul, a.ints, b.ints))


def scaled(integer: int, shift: int) -> mpmath.mpf:
    """``integer / 2**shift`` rounded once to the working precision."""
    return mpmath.ldexp(mpmath.mpf(integer), -shift)


def exact_dot(a: ExactVector, b: ExactVector) -> mpmath.mpf:
    """``sum_d a[d] * b[d]`` computed exactly, then rounded once to the working precision."""
    return scaled(exact_dot_int(a, b), a.shift + b.shift)


def weighted_sum(
    weights: list, weights_exact: ExactVector, values: list, values_exact: ExactVector
) -> mpmath.mpf:
    """``sum_j weights[j] * values[j]``: :func:`exact_dot`, or ``mpmath.fdot`` (the same
    value) when the terms span more than twice the precision (fdot then drops the far smaller
    ones rather than summing integers of that many bits). ``weights_exact`` is built with
    ``max_span=2 * prec``."""
    if weights_exact.ints is not None and (
        weights_exact.span + values_exact.span <= 2 * mpmath.mp.prec
    ):
        return exact_dot(weights_exact, values_exact)
    return mpmath.fdot(weights, values)
