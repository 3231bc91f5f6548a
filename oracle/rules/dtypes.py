"""The dtypes of the rulebook (:mod:`oracle.rules`): which an attention call takes, which it
computes in, and which only a cache stores.

Float inputs (queries, keys, values, float masks, ALiBi slopes, sinks, cache contents) are
``float16``, ``bfloat16``, ``float32`` or ``float64`` (:data:`FLOAT_DTYPES`). ``bfloat16`` is
``ml_dtypes``'s NumPy dtype, the one JAX uses (importing this module registers it, so
``np.dtype("bfloat16")`` works; PyTorch's ``torch.bfloat16`` has the same bits: 1 sign, 8
exponent, 7 fraction bits, Google Brain's format; unit roundoff ``2**-8``, largest value
``3.39e38``, float32's range).

The two 16-bit dtypes are computed in float32 (:func:`compute_dtype`): products, sums,
``exp`` and divisions round in float32 and only the result is rounded back, as PyTorch's CPU
kernels, FlashAttention (Dao et al. 2022) and XLA on the CPU do. A subject may compute
otherwise and declare it (:mod:`properties.subject`). Two facts a NumPy user meets: ``@`` on
bfloat16 arrays returns float32, and ``np.einsum`` refuses them.

``float8_e4m3fn`` (largest 448, no infinities) and ``float8_e5m2`` (largest 57344) are
storage dtypes only (:data:`FP8_DTYPES`): an attention call refuses them (dequantize first,
with the scale they were stored with), and ``kv_cache_bytes`` counts them at one byte.
"""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np

__all__ = [
    "BFLOAT16",
    "FLOAT_DTYPES",
    "FP8_DTYPES",
    "compute_dtype",
    "is_fp8",
    "is_ml_float",
    "overflow_threshold",
    "unsupported_dtype",
]

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)

FLOAT_DTYPES = (np.dtype(np.float16), BFLOAT16, np.dtype(np.float32), np.dtype(np.float64))

FP8_DTYPES = (np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2))

_NAMES = "float16, bfloat16, float32 or float64"


def compute_dtype(dtype) -> np.dtype:
    """The dtype an input dtype is computed in: float16 and bfloat16 in float32, float32 and
    float64 in themselves."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype in (np.float16, BFLOAT16) else dtype


def overflow_threshold(dtype) -> int:
    """The magnitude from which a real number rounds to infinity in ``dtype`` (IEEE 754 round
    to nearest, ties to even): ``max + ulp(max) / 2``, an exact integer (``2**128 - 2**103``
    for float32, ``2**1024 - 2**970`` for float64). A value below it rounds to a finite
    number (at most ``max``), however far past ``max`` it is: ``finfo(float32).min - 0.5``
    rounds to ``finfo(float32).min``. The rulebook's score-overflow rule
    (:class:`oracle.rules.ScoreOverflowError`) is ``|s| >= overflow_threshold(compute
    dtype)`` for the exact score ``s`` (the dot product, the float mask added, ALiBi added):
    exactly where a correctly rounded computation gives ``inf``."""
    dtype = np.dtype(dtype)
    largest = ml_dtypes.finfo(dtype).max
    below = np.nextafter(largest, dtype.type(0))
    ulp = Fraction(float(largest)) - Fraction(float(below))
    threshold = Fraction(float(largest)) + ulp / 2
    assert threshold.denominator == 1  # every float dtype here has emax >= its precision
    return int(threshold)


def unsupported_dtype(name: str, dtype) -> str:
    """The message for an argument ``name`` of a dtype outside :data:`FLOAT_DTYPES`: the
    accepted dtypes, and for an fp8 dtype that it is a storage dtype."""
    message = f"{name}: dtype {dtype} is not supported; use {_NAMES}"
    if is_fp8(dtype):
        message += " (fp8 is a storage dtype: dequantize with its scale first)"
    return message


def is_ml_float(dtype) -> bool:
    """Whether ``dtype`` is one of ml_dtypes' floating-point types (bfloat16, every
    ``float8_*``, ``float6_*``, ``float4_*``): NumPy sees them as void (kind ``"V"``), not
    as floating, so ``numbers.Real`` and ``np.issubdtype(.., np.floating)`` miss them."""
    dtype = np.dtype(dtype)
    return dtype.kind == "V" and dtype.name.startswith(("bfloat16", "float"))


def is_fp8(dtype) -> bool:
    """Whether ``dtype`` is an 8-bit float of ml_dtypes (any of its ``float8_*`` variants:
    e4m3fn, e5m2, e4m3, e4m3fnuz, e5m2fnuz, e4m3b11fnuz, ...), not only :data:`FP8_DTYPES`."""
    return np.dtype(dtype).itemsize == 1 and np.dtype(dtype).name.startswith("float8_")
