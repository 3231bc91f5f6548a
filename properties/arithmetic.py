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
    (None: ``compute``; item 1); ``exp2``: the softmax's exponentials are ``exp2`` of the
    scores times one constant ``scale * log2 e`` (or ``log2 e``) rounded to ``compute``, and the
    running-max rescales likewise (FlashAttention's ``softmax_scale_log2``, xFormers'
    memory-efficient kernel), ``exp2`` within 2 ulps (item 2; :meth:`exponent_rounding`).
    Output rounding to ``storage`` is always part of the model (item 3)."""

    storage: np.dtype
    compute: np.dtype
    rounds_weights: bool = False
    accumulate: np.dtype | None = None
    parameters: np.dtype | None = None
    exp2: bool = False

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

    def exp_roundoff(self) -> float:
        """What one evaluation of ``exp`` (or a rescale's) may move its exponent by, item 2:
        ``2u`` for ``exp`` within 1 ulp (an ulp is at most ``2u`` relative), ``4u`` for
        ``exp2`` within 2 ulps (the maximum the CUDA C++ Programming Guide documents for
        ``exp2f``; a kernel whose approximate ``exp2`` is worse fails, as it should)."""
        u = unit_roundoff(self.compute)
        return 4 * u if self.exp2 else 2 * u

    def exponent_rounding(self, shifted, score, largest):
        """Item 2's ``xi_j``: what forming the exponent ``x_j = s_j - m`` and the running-max
        rescales that reach key ``j`` round, in the exponent (natural units), given upper
        bounds of the subject's own ``|x_j|`` (``shifted``), ``|s_j|`` (``score``) and
        ``max_k |s_k|`` (``largest``), arrays that broadcast.

        ``exp``: ``u |x_j|`` for the subtraction, and ``u |x_j|`` for the rescales (their
        exponents ``m_k - m_{k+1}`` telescope to at most ``|x_j|``): ``2u |x_j|``.

        ``exp2``: the constant is ``c' = c (1 + t1)``, ``|t1| <= gamma(2)`` (``log2 e``
        and the product rounded, in ``compute`` or finer). The exponent is ``fl(fl(t_j c') -
        fl(t_m c'))`` (``t`` the scores before the folded factor; an FMA rounds once less),
        which in natural units is ``(s_j (1 + d4) - s_m (1 + d2)) (1 + t1) (1 + d3)``: at most
        ``gamma(3) |x_j| + (1 + gamma(3)) u (|s_j| + |s_m|)`` off (Higham lemma 3.3). A
        rescale ``exp2(fl(fl(m_k - m_{k+1}) c'))`` is ``gamma(4)`` relative off in its
        exponent, and the rescales telescope as for ``exp``: ``gamma(4) |x_j|``. So::

            xi_j = (gamma(3) + gamma(4)) |x_j| + (1 + gamma(3)) u (|s_j| + max_k |s_k|)

        The ``u |s_m|`` term is absolute: a large maximum (a sink of 85, finding F15) moves
        every small weight of its row by ``u |s_m|`` relative, which ``exp``'s
        ``u |x_j|`` does not charge."""
        u = unit_roundoff(self.compute)
        if not self.exp2:
            return 2 * u * shifted
        g3 = gamma(3, u)
        return (g3 + gamma(4, u)) * shifted + (1 + g3) * u * (score + largest)

    def weighted_sum_roundoff(self) -> float:
        """``max(u, ua)``: the unit roundoff of item 3's ``gamma_a``."""
        return max(unit_roundoff(self.compute), unit_roundoff(self.accumulation))


def gamma(n: int, u: float) -> float:
    """Higham's ``gamma_n = n u / (1 - n u)``, defined for ``n u < 1``; ``inf`` beyond (no
    accuracy can be demanded of ``n`` roundings: float16's ``u = 2**-11`` at ``n >= 2048``)."""
    return n * u / (1 - n * u) if n * u < 1 else np.inf
