"""The rules of the quantized (fp8) cache (:mod:`oracle.rules.quantization`), each with its
break function.

The valid call (``func="quantized_append"``): the lab's 3 keys ``(1, 1, 3, 4)`` and values
``(1, 1, 3, 2)`` appended to an empty ``QuantizedKVCache(1, 1, 4, 2, storage="float8_e4m3fn",
key_scale=1/256, value_scale=1/256)`` (``|x| <= 1.1 <= 448 / 256``: in range).
"""

from __future__ import annotations

import numpy as np

from attnprops.oracle import lab
from attnprops.oracle.rules import QuantizationError
from attnprops.oracle.violations.calls import Call
from attnprops.oracle.violations.calls import Example
from attnprops.oracle.violations.calls import Violation

SCALE = 2.0**-8


def quantized_append_base() -> Call:
    """The lab's 3 tokens appended to an empty e4m3fn ``QuantizedKVCache(1, 1, 4, 2)``."""
    cache = dict(
        batch=1,
        num_kv_heads=1,
        head_dim=4,
        value_dim=2,
        storage="float8_e4m3fn",
        key_scale=SCALE,
        value_scale=SCALE,
    )
    k, v = lab.KEY[None, None].copy(), lab.VALUE[None, None].copy()
    return Call(None, k, v, {"cache": cache}, "quantized_append")


def _cache(call: Call, **changes) -> Call:
    return call._replace(kwargs={**call.kwargs, "cache": {**call.kwargs["cache"], **changes}})


def _bad_scale(call, pick):
    """A key scale that is 0, negative, NaN, infinite (``10**400``: an int past float64's
    range), 0 in float32 (``1e-60``), or per-head scales of the wrong length or with a 0."""
    heads = call.kwargs["cache"]["num_kv_heads"]
    bad = [0.0, -SCALE, float("nan"), float("inf"), 1e-60, 10**400]
    bad += [np.full(heads + 1, SCALE), np.zeros(heads)]
    return _cache(call, key_scale=pick.choice(bad))


def _not_fp8(call, pick):
    return _cache(call, storage=pick.choice(["float16", "int8", "float8", "bfloat16", "uint8"]))


def _out_of_range(call, pick):
    """The lab's largest key, 1.1, past ``448 s`` once the key scale is ``2**-9`` (0.875)."""
    return _cache(call, key_scale=pick.choice([2.0**-9, 2.0**-12]))


E = Example
QUANTIZED = (("quantized_cache", True),)
QUANTIZATION: tuple[Violation, ...] = (
    Violation(
        "quantization scale not finite and > 0",
        QuantizationError,
        "key_scale",
        _bad_scale,
        (E("quantized-scale-zero", "quantized-append"),),
        needs=QUANTIZED,
    ),
    Violation(
        "quantized storage not fp8",
        QuantizationError,
        "storage",
        _not_fp8,
        (E("quantized-storage-float16", "quantized-append"),),
        needs=QUANTIZED,
    ),
    Violation(
        "value outside the fp8 range at its scale",
        QuantizationError,
        "key",
        _out_of_range,
        (E("quantized-key-out-of-range", "quantized-append"),),
        needs=QUANTIZED,
    ),
)
del E
