"""The fp8 round trip of a quantized cache (:mod:`oracle.rules.quantization`): item 7 of the
derivations of :mod:`properties.bounds`. Rounding to nearest in a format with unit roundoff
``u`` and smallest subnormal ``eta`` gives
``|fl(y) - y| <= u |y| + eta / 2`` everywhere in its range (Higham, ch. 2, thm. 2.2 with
the subnormal term). With ``uc``/``etac`` of the compute dtype of the cache's dtype (the
quotient and the product round in it), ``u8``/``eta8`` of the fp8 dtype (``2**-4``,
``2**-9`` for e4m3fn; ``2**-3``, ``2**-16`` for e5m2) and ``y = x / s``: the quotient
``y1 = fl_c(y)`` is within ``uc |y| + etac / 2`` of ``y``, the code ``c = fl8(y1)``
within ``u8 |y1| + eta8 / 2`` of ``y1``, so::

    |c s - x| <= E1 = s (uc |y| + etac / 2 + u8 ((1 + uc) |y| + etac / 2) + eta8 / 2)

Dequantizing rounds the product ``c s`` in the compute dtype and, for the 16-bit dtypes,
once more to the cache's dtype (``ud``, ``etad``; 0 when they are one dtype)::

    |x~ - c s| <= Q(|c s|) = uc |c s| + etac / 2 + ud ((1 + uc) |c s| + etac / 2) + etad / 2

and ``|c s| <= |x| + E1``, so ``|x~ - x| <= E1 + Q(|x| + E1)``; both evaluated in
float64 times ``1 + 2**-40`` (:func:`quantization_bounds`). At e4m3fn that is about 6 %
of ``|x|``: attention over the dequantized K/V (which the properties hold to items 1-3 of
:mod:`properties.bounds`) is the law, not attention over ``x``.
"""

from __future__ import annotations

from typing import NamedTuple

import ml_dtypes
import numpy as np

from attnprops.oracle.rules import compute_dtype
from attnprops.properties.arithmetic import unit_roundoff

__all__ = ["QuantizationBounds", "quantization_bounds"]


class QuantizationBounds(NamedTuple):
    """Per-element bounds of item 7, shaped like the keys (values) they bound."""

    round_trip: np.ndarray  # on |x~ - x|: the dequantized entry against the appended one
    dequantized: np.ndarray  # on |x~ - c s|: the dequantized entry against its code's value


def _fp8_terms(dtype) -> tuple[float, float]:
    info = ml_dtypes.finfo(dtype)
    return float(info.eps) / 2, float(info.smallest_subnormal)


def quantization_bounds(x, codes, scales, storage, dtype) -> QuantizationBounds:
    """Item 7's bounds for the appended ``x`` ``(B, Hkv, T, D)`` of ``dtype``, stored as fp8
    ``codes`` (of ``storage``) with per-head float32 ``scales`` ``(Hkv,)``: ``round_trip``
    on ``|x~ - x|`` from ``x`` alone, ``dequantized`` on ``|x~ - c s|`` from the codes."""
    dtype = np.dtype(dtype)
    compute = compute_dtype(dtype)
    uc, etac = unit_roundoff(compute), float(ml_dtypes.finfo(compute).smallest_subnormal)
    if compute == dtype:
        ud, etad = 0.0, 0.0
    else:
        ud, etad = unit_roundoff(dtype), float(ml_dtypes.finfo(dtype).smallest_subnormal)
    u8, eta8 = _fp8_terms(storage)
    s = scales.astype(np.float64)[None, :, None, None]
    magnitude = np.abs(x.astype(np.float64))
    y = magnitude / s

    def q(magnitude):
        return uc * magnitude + etac / 2 + ud * ((1 + uc) * magnitude + etac / 2) + etad / 2

    e1 = s * (uc * y + etac / 2 + u8 * ((1 + uc) * y + etac / 2) + eta8 / 2)
    round_trip = (e1 + q(magnitude + e1)) * (1 + 2.0**-40)
    exact = np.abs(codes.astype(np.float64) * s)  # c s: exact in float64 (4 + 24 bits)
    return QuantizationBounds(round_trip, q(exact) * (1 + 2.0**-40))
