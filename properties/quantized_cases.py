"""Strategies for the quantized (fp8) KV cache (:mod:`oracle.rules.quantization`): a causal
sequence decoded chunk by chunk through a ``QuantizedKVCache``, with its fp8 storage dtype and
its key and value scales.

The scales are what calibration gives, ``amax / fp8_max`` (rounded up to float32, so every
value is in range), times a drawn power of two (``2**0`` to ``2**6``: less of the fp8 range
used, down into its subnormals); per tensor (one number) or per K/V head (``(Hkv,)``, each
head its own amax and factor, so the heads' scales differ and a scale read from the wrong
head shows).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from attnprops.oracle.rules import FP8_NAMES
from attnprops.oracle.rules import QuantizationError
from attnprops.oracle.rules import check_quantization_scale
from attnprops.oracle.rules import fp8_max
from attnprops.oracle.rules import quantize
from attnprops.properties.cache_draws import append_chunks
from attnprops.properties.cache_draws import run_arrays
from attnprops.properties.kernel_cache_cases import cache_runs
from attnprops.properties.kernel_cache_cases import chunks_of
from attnprops.properties.sizes import limits
from attnprops.properties.strategies import AttentionCase
from attnprops.properties.variant_draws import attention_sinks

__all__ = [
    "KernelQuantizedRun",
    "QuantizedRun",
    "calibrated_scales",
    "kernel_quantized_runs",
    "quantized_runs",
]

SMALLEST_SCALE = np.float32(2.0**-126)  # float32's smallest normal: a scale never underflows


class QuantizedRun(NamedTuple):
    """A causal ``case`` appended ``chunks`` at a time to a quantized cache of ``storage``
    with ``key_scale``/``value_scale`` (a float per tensor or float32 ``(Hkv,)`` per head).
    ``spec``: the :class:`~properties.kernel_spec.KernelSpec` a kernel-sized ``case`` was
    built from (None for a small one)."""

    case: AttentionCase
    storage: str
    key_scale: float | np.ndarray
    value_scale: float | np.ndarray
    chunks: tuple[int, ...]
    spec: object = None

    def cache_kwargs(self) -> dict:
        """``QuantizedKVCache``'s keywords for this run."""
        return dict(
            dtype=self.case.dtype,
            storage=self.storage,
            key_scale=self.key_scale,
            value_scale=self.value_scale,
        )

    def scales(self, which: str) -> np.ndarray:
        """The per-head float32 scales ``(Hkv,)`` of ``"key"`` or ``"value"``."""
        scale = self.key_scale if which == "key" else self.value_scale
        return check_quantization_scale(scale, self.case.key.shape[1], f"{which}_scale")


class KernelQuantizedRun(QuantizedRun):
    """A kernel-sized :class:`QuantizedRun` that prints (``repr`` and a falsifying example) as
    its ``spec`` (sizes and seed: the arrays), storage, scales (each float32 in its shortest
    exact decimal) and appends, not as the arrays (NumPy's summaries: about 90 kB with 8
    heads); every field of the run follows from that text."""

    __slots__ = ()

    def __repr__(self) -> str:
        def exact(scale) -> str:
            values = np.atleast_1d(np.asarray(scale, np.float32))
            return "[" + ", ".join(np.format_float_positional(x, unique=True) for x in values) + "]"

        return (
            f"KernelQuantizedRun(spec={self.spec!r}, storage={self.storage!r}, "
            f"key_scale={exact(self.key_scale)}, value_scale={exact(self.value_scale)}, "
            f"chunks={self.chunks!r})"
        )

    def _repr_pretty_(self, printer, cycle) -> None:  # Hypothesis's pretty printer
        printer.text(repr(self))


def calibrated_scales(x: np.ndarray, storage: str, factors: np.ndarray) -> np.ndarray:
    """float32 ``(Hkv,)``: ``amax_h / fp8_max`` of each K/V head of ``x`` ``(B, Hkv, T, D)``,
    rounded up to float32 (at least its smallest normal), times ``factors`` (powers of two)."""
    amax = np.abs(x.astype(np.float64)).max(axis=(0, 2, 3))
    needed = amax / fp8_max(storage)
    scales = needed.astype(np.float32)
    low = scales.astype(np.float64) < needed
    scales[low] = np.nextafter(scales[low], np.float32(np.inf))
    return np.maximum(scales, SMALLEST_SCALE) * factors.astype(np.float32)


def _scales(draw, key: np.ndarray, value: np.ndarray, storage: str, per_head: bool) -> dict:
    """``{"key": ..., "value": ...}``: each head's calibrated scale times ``2**0`` to ``2**6``
    (:func:`calibrated_scales`), per head (float32 ``(Hkv,)``) or per tensor (the largest, a
    float); a draw whose values a scale cannot quantize is rejected."""
    scales = {}
    for name, x in (("key", key), ("value", value)):
        kv_heads = x.shape[1]
        exponents = st.lists(st.integers(0, 6), min_size=kv_heads, max_size=kv_heads)
        factors = 2.0 ** np.array(draw(exponents, label=f"{name} scale exponents"))
        per = calibrated_scales(x, storage, factors)
        scales[name] = per if per_head else float(per.max())
        try:  # float16 near 65504: a code may dequantize past it (refused); draw another
            quantize(x, check_quantization_scale(scales[name], kv_heads, name), storage, name)
        except QuantizationError:
            assume(False)
    return scales


@st.composite
def quantized_runs(draw, subject) -> QuantizedRun:
    """A causal sequence of 1-8 positions (1-2 sequences, 1-8 K/V heads, groups of 1-2, head
    dims 1-4; 8 K/V heads as most GQA models have: a kernel that loads per-head scales four
    at a time reads head 4's wrong) in one of the subject's dtypes and a value regime, the
    subject's sinks a quarter of the time, an fp8 storage dtype, per-tensor or per-head
    calibrated scales, and its split into appended chunks (token by token half the time)."""
    caps = subject.capabilities
    dtype = np.dtype(draw(st.sampled_from(tuple(reversed(caps.dtypes)))))
    magnitude = draw(st.sampled_from(("unit", "ties", "large")))
    storage = draw(st.sampled_from(FP8_NAMES))
    total = draw(st.integers(1, 8))
    q, k, v = draw(run_arrays(total, dtype, magnitude, max_kv_heads=8, max_dim=4))
    heads = q.shape[1]
    per_head = draw(st.booleans())
    scales = _scales(draw, k, v, storage, per_head)
    sinks = None
    if caps.sinks and draw(st.integers(0, 3)) == 0:
        sinks = draw(attention_sinks(heads, dtype))
    scale = draw(st.one_of(st.none(), st.floats(0.05, 4)))
    chunks = draw(append_chunks(total))
    layout = f"{storage} cache, {'per-head' if per_head else 'per-tensor'} scales"
    case = AttentionCase(q, k, v, None, True, None, scale, layout, magnitude, sinks=sinks)
    return QuantizedRun(case, storage, scales["key"], scales["value"], tuple(chunks))


@st.composite
def kernel_quantized_runs(draw, subject) -> KernelQuantizedRun:
    """A kernel-sized causal sequence appended to a quantized cache in hundreds of chunks of
    mixed sizes (:func:`~properties.kernel_cache_cases.cache_runs`: past any plausible
    preallocated capacity, up to the profile's ``max_appends`` positions), an fp8 storage
    dtype and per-head calibrated scales (:func:`calibrated_scales`); drawn last, up to 7
    more K/V heads as the ``max_kv`` budget allows (most GQA models have 8: a kernel that
    reads per-head scales in pairs or fours reads the third head's wrong), the scales then
    drawn again for them."""
    spec, pattern, steps = draw(cache_runs(subject))
    case = spec.build()
    storage = draw(st.sampled_from(FP8_NAMES), label="storage")
    scales = _scales(draw, case.key, case.value, storage, per_head=True)
    chunks = chunks_of(case.key.shape[2], pattern, steps)
    more = draw(st.integers(0, 7), label="more K/V heads")
    B, T = spec.batch, spec.key_len
    fit = limits().max_kv // (B * T * (spec.head_dim + spec.value_dim))
    heads = max(spec.num_kv_heads, min(spec.num_kv_heads + more, fit))
    if heads != spec.num_kv_heads:
        group = spec.num_heads // spec.num_kv_heads
        spec = spec._replace(num_kv_heads=heads, num_heads=heads * group)
        case = spec.build()
        scales = _scales(draw, case.key, case.value, storage, per_head=True)
    case = case._replace(mask_layout=f"{storage} cache, per-head scales")
    return KernelQuantizedRun(case, storage, scales["key"], scales["value"], tuple(chunks), spec)
