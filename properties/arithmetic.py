"""The floating-point model the error bounds are written in (Higham, *Accuracy and Stability
of Numerical Algorithms*, 2nd ed., ch. 3): unit roundoffs, Higham's ``gamma_n``, and the
:class:`Arithmetic` a subject declares for each input dtype (:mod:`properties.subject`), which
:mod:`properties.bounds` turns into per-element bounds (its docstring derives them, item by
item; the items named here are its)."""

from __future__ import annotations

from typing import NamedTuple

import ml_dtypes
import numpy as np

__all__ = ["U64", "Arithmetic", "gamma", "unit_roundoff"]

U64 = 2.0**-53  # float64's unit roundoff: the oracle's one rounding of each result


def unit_roundoff(dtype) -> float:
    """``u = eps / 2`` of ``dtype`` under round to nearest: ``2**-53`` float64, ``2**-24``
    float32, ``2**-11`` float16, ``2**-8`` bfloat16 (Higham, eq. 2.4)."""
    return float(ml_dtypes.finfo(dtype).eps) / 2


class Arithmetic(NamedTuple):
    """How a subject computes one input dtype (the model of :mod:`properties.bounds`'s
    docstring, whose items the fields and terms below name).

    ``storage``: the inputs' and the result's dtype; ``compute``: the dtype its products,
    sums, ``exp`` and divisions round in (never less precise than ``storage``);
    ``rounds_weights``: the unnormalised weights are rounded to ``storage`` before the
    weighted sum (FlashAttention's ``P``); ``accumulate``: the dtype the weighted sum ``P
    V`` accumulates in (None: ``compute``); ``parameters``: the dtype the scale (and its
    square root) and the soft cap are rounded to, where less precise than ``compute``
    (None: ``compute``; item 1). Output rounding to ``storage`` is always part of the model
    (item 3)."""

    storage: np.dtype
    compute: np.dtype
    rounds_weights: bool = False
    accumulate: np.dtype | None = None
    parameters: np.dtype | None = None

    @classmethod
    def of(cls, dtype) -> "Arithmetic":
        """One dtype throughout: the conservative default for an undeclared subject."""
        return cls(np.dtype(dtype), np.dtype(dtype), False)

    def terms(self, Tk: int):
        """``(u, us, rho, tw, tp, to, tn)`` of the bounds' docstring for ``Tk`` keys (``tn``:
        the normaliser's relative flush term ``Tk tinys'``)."""
        u, us = unit_roundoff(self.compute), unit_roundoff(self.storage)
        tiny = float(ml_dtypes.finfo(self.compute).smallest_subnormal)
        tinys = float(ml_dtypes.finfo(self.storage).smallest_subnormal)
        tinya = max(tiny, float(ml_dtypes.finfo(self.accumulation).smallest_subnormal))
        mixed = tinys if self.compute != self.storage else 0.0
        flush = tinys if self.rounds_weights else 0.0
        rho = us / (1 - us) if self.rounds_weights else 0.0
        tp = (Tk + 2) * tiny + flush
        return u, us, rho, tp + mixed, tp, (Tk + 2) * tinya + mixed, Tk * flush

    @property
    def accumulation(self) -> np.dtype:
        """The dtype ``P V`` accumulates in: ``accumulate``, or ``compute`` when None."""
        return self.compute if self.accumulate is None else np.dtype(self.accumulate)

    def parameter_roundoff(self) -> float:
        """``uc`` of item 1: the unit roundoff of ``parameters`` (0 when None)."""
        return 0.0 if self.parameters is None else unit_roundoff(self.parameters)

    def scale_error(self) -> float:
        """``gamma_c(4)`` of item 1: the relative error of a scale rounded to, and its
        square root taken in, ``parameters`` (0 when None)."""
        return gamma(4, self.parameter_roundoff())

    def weighted_sum_roundoff(self) -> float:
        """``max(u, ua)``: the unit roundoff of item 3's ``gamma_a``."""
        return max(unit_roundoff(self.compute), unit_roundoff(self.accumulation))


def gamma(n: int, u: float) -> float:
    """Higham's ``gamma_n = n u / (1 - n u)``, defined for ``n u < 1``; ``inf`` beyond (no
    accuracy can be demanded of ``n`` roundings: float16's ``u = 2**-11`` at ``n >= 2048``)."""
    return n * u / (1 - n * u) if n * u < 1 else np.inf
