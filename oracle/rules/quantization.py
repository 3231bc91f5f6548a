"""The rules of a quantized (fp8) KV cache: its storage dtype, its scales, the range a value
must lie in to be stored, and the two conversions every implementation shares
(:mod:`oracle.rules`).

A quantized cache stores each appended key (value) ``x`` of K/V head ``h`` as the fp8 *code*
``c = fp8(x / s_h)`` and reads it back, *dequantized*, as ``x~ = dtype(c * s_h)``:

- **storage**: ``float8_e4m3fn`` (4 significant bits, largest 448, no infinities) or
  ``float8_e5m2`` (3 significant bits, largest 57344), :data:`oracle.rules.FP8_DTYPES`;
- **scales**: one float32 per tensor (a scalar, every head) or one per K/V head (``(Hkv,)``),
  separately for the keys and the values; each finite and > 0 (a scale of 0, negative,
  NaN or infinite, or one that rounds to 0 or infinity in float32, is refused with a
  :class:`QuantizationError` naming ``key_scale`` / ``value_scale``). The scale multiplies on
  read: ``x ~ c * s``, so a calibrated scale is ``amax / fp8_max`` (vLLM's ``k_scale`` /
  ``v_scale``, FlashInfer's ``k_scale``; default 1.0 in vLLM), rounded *up* to float32
  where rounding to nearest went down (:func:`calibrated_scale`: else ``amax`` itself lies a
  few ulps past the range below);
- **range, rejected, not saturated**: an append with ``|x| > fp8_max * s_h`` for some entry
  raises :class:`QuantizationError` naming ``key`` / ``value``, the largest ``|x / s|`` and the
  limit, and leaves the cache unchanged. Saturating would change a value by an unbounded
  amount without a word; the libraries differ here (measured with torch 2.13 and ml_dtypes
  0.7.0: ``torch.Tensor.to(torch.float8_e4m3fn)`` saturates to +-448, ml_dtypes' cast gives
  NaN for e4m3fn; both give +-inf for e5m2), so a rule that picks one of them would make the
  others wrong. ``fp8_max * s_h`` is exact in float64 (4 + 24 significant bits), so the test
  is exact, and a value within it never rounds past ``fp8_max``. A code whose ``c * s``
  passes the cache dtype's largest value (float16 near 65504: the code may round up by
  ``u8`` relative) is refused the same way;
- **quantize** (:func:`quantize`): ``x / s`` in the compute dtype of the cache's dtype
  (:func:`oracle.rules.compute_dtype`: float32 for the 16-bit dtypes), then rounded to the
  fp8 dtype, to nearest, ties to even;
- **dequantize** (:func:`dequantize`): ``c * s`` in the compute dtype, rounded to the cache's
  dtype: vLLM's ``scaled_convert`` (fp8 to float32, times the float32 scale, to the model's
  dtype). Attention then reads the dequantized keys and values like any others.

Other conventions: FlashInfer and FlashAttention 3 fold the scales into the computation
instead (``k_scale`` into the softmax scale, ``v_scale`` into the output) and never round
``c * s`` to the model's dtype; FlashAttention 3's fp8 path quantizes the queries too.
Neither is this rulebook's model (attention over the dequantized K/V in the cache's dtype).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from attnprops.oracle.rules.arguments import as_real
from attnprops.oracle.rules.arguments import read_only_copy
from attnprops.oracle.rules.dtypes import FP8_DTYPES
from attnprops.oracle.rules.dtypes import compute_dtype
from attnprops.oracle.rules.dtypes import is_ml_float
from attnprops.oracle.rules.errors import QuantizationError

__all__ = [
    "FP8_NAMES",
    "FrozenScales",
    "QuantizedStorage",
    "calibrated_scale",
    "check_fp8_storage",
    "check_quantization_scale",
    "dequantize",
    "fp8_max",
    "quantize",
]

FP8_NAMES = tuple(d.name for d in FP8_DTYPES)


def check_fp8_storage(storage) -> np.dtype:
    """``storage`` (a name of :data:`FP8_NAMES` or its NumPy dtype) as a dtype; anything else
    raises :class:`QuantizationError` naming ``storage``."""
    try:
        dtype = np.dtype(storage)
    except (TypeError, ValueError):  # "float8_e4m3fn,float8_e4m3fn" is a ValueError
        dtype = None
    if dtype not in FP8_DTYPES:
        raise QuantizationError(
            f"storage: {storage!r} is not an fp8 dtype; use one of {', '.join(FP8_NAMES)}"
        )
    return dtype


def fp8_max(storage) -> float:
    """The largest finite value of the fp8 dtype ``storage`` (448 or 57344)."""
    return float(ml_dtypes.finfo(check_fp8_storage(storage)).max)


def _real_array(x, name: str) -> np.ndarray:
    """``x``, a real number or an array of them (ints, floats, ml_dtypes' floats), as an
    ndarray; an int past float64's range (``10**400``) reads as ``inf``, for the caller's
    finiteness rule. Raises QuantizationError naming ``name`` for a bool, a masked array
    (its mask would be ignored), nesting NumPy cannot build, or another dtype."""
    if isinstance(x, (bool, np.bool_)):
        raise QuantizationError(f"{name}: {x!r} is not a real number")
    if isinstance(x, np.ma.MaskedArray):  # np.array would drop the mask
        raise QuantizationError(f"{name}: a masked array (its mask would be ignored)")
    real = as_real(x)
    try:
        array = np.array(x if real is None else real)
    except (TypeError, ValueError) as error:  # ragged nesting, objects NumPy cannot hold
        raise QuantizationError(f"{name}: not an array of real numbers ({error})") from None
    if array.dtype.kind not in "fiu" and not is_ml_float(array.dtype):
        raise QuantizationError(f"{name}: dtype {array.dtype} is not a real number dtype")
    return array


def calibrated_scale(amax, storage="float8_e4m3fn") -> np.ndarray:
    """The smallest float32 scales ``s`` with ``amax <= fp8_max * s`` (exactly): a calibration
    that every value of magnitude at most ``amax`` passes, and whose largest value maps to
    ``fp8_max`` or just below. ``amax / fp8_max`` rounded to float32 is that scale about half
    the time; the other half it rounds down and the rule refuses ``amax`` itself (``|x / s|``
    a few ulps past ``fp8_max``), so the quotient is raised to the next float32 when it has
    to be. ``amax``: a non-negative finite real or array (per K/V head), any float dtype;
    returns float32 of its shape.

    Raises:
        QuantizationError naming ``amax``: not real, negative, zero or not finite (no scale
        > 0 exists for 0: use any, e.g. 1.0), or past what a float32 scale can hold.
    """
    limit = fp8_max(storage)
    peak = _real_array(amax, "amax")
    if peak.ndim > 1 or peak.size == 0:
        raise QuantizationError(
            f"amax: shape {peak.shape}; a scalar (per tensor) or (num_kv_heads,) (per head)"
        )
    peak = peak.astype(np.float64)
    if not (np.isfinite(peak) & (peak > 0)).all():
        raise QuantizationError(
            f"amax: {repr(amax)[:60]} must be finite and > 0 (and within float64's range)"
        )
    with np.errstate(over="ignore"):
        scale = (peak / limit).astype(np.float32)
        short = peak > limit * scale.astype(np.float64)  # exact: 4 + 24 significant bits
        scale = np.where(short, np.nextafter(scale, np.float32(np.inf)), scale)
    if not (np.isfinite(scale) & (scale > 0)).all():
        raise QuantizationError(f"amax: {peak.tolist()} has no finite float32 scale > 0")
    return scale.astype(np.float32)


def check_quantization_scale(scale, num_kv_heads: int, name: str) -> np.ndarray:
    """``scale`` (a real number: one per tensor; or an array ``()``, ``(1,)`` or ``(Hkv,)``:
    one per K/V head) as a read-only float32 array ``(num_kv_heads,)``.

    Raises:
        QuantizationError naming ``name``: not real numbers, the wrong shape, or an entry
        that is not finite and > 0 after rounding to float32.
    """
    array = _real_array(scale, name)
    if array.shape not in ((), (1,), (num_kv_heads,)):
        raise QuantizationError(
            f"{name}: shape {array.shape}; expected a scalar (per tensor) or "
            f"(num_kv_heads={num_kv_heads},) (per head)"
        )
    with np.errstate(all="ignore"):
        scales = np.broadcast_to(array.astype(np.float32), (num_kv_heads,)).copy()
    if not (np.isfinite(scales) & (scales > 0)).all():
        raise QuantizationError(
            f"{name}: {array.tolist()} must be finite and > 0 in float32 (a code is read "
            "back as code * scale)"
        )
    return read_only_copy(scales)  # the scale the stored codes are made with


class FrozenScales:
    """A quantized cache's scales as a read-only attribute (a data descriptor): set once, in
    ``__init__``, to :func:`check_quantization_scale`'s array, kept as bytes and read as a
    float32 ``(Hkv,)`` view of them. The codes were made with these scales, so no caller may
    change them: the view cannot be made writeable, the attribute cannot be set again
    (``AttributeError``), and a copy or pickle of the cache keeps bytes, not an array."""

    def __set_name__(self, owner, name: str) -> None:
        self.name, self.slot = name, "_" + name

    def __get__(self, cache, owner=None):
        if cache is None:
            return self
        if self.slot not in cache.__dict__:  # not set yet: as any attribute not set
            raise AttributeError(f"{self.name} is not set (the cache's __init__ sets it)")
        return np.frombuffer(cache.__dict__[self.slot], np.float32)

    def __set__(self, cache, scales: np.ndarray) -> None:
        if self.slot in cache.__dict__:
            raise AttributeError(
                f"{self.name} is read-only: the stored codes were made with it; create a new "
                "cache for other scales"
            )
        cache.__dict__[self.slot] = np.asarray(scales, np.float32).tobytes()


class QuantizedStorage:
    """The fp8 half of a quantized KV cache, one definition for ``impl.QuantizedKVCache`` and
    the oracle's: the constructor's rules (the storage dtype first, then the scales, per
    tensor or per K/V head, read-only: :class:`FrozenScales`) and the dequantized read
    ``keys``/``values`` ``dtype(c * s)`` (read-only copies, :func:`dequantize`). Mixed in
    before a KV cache class: ``class QuantizedKVCache(QuantizedStorage, KVCache)``, which gives
    ``key_codes``/``value_codes`` (its stored codes) and takes ``batch, num_kv_heads,
    head_dim, value_dim, *, dtype`` and its own keywords (``cache_options``: impl's
    ``capacity``).

    ``storage`` is read-only too (the codes are in it): a new storage needs a new cache.

    Raises:
        QuantizationError for a storage that is not fp8 (before the cache is built) or a bad
        scale (after); the cache's own errors for bad sizes or dtype.
    """

    key_scale = FrozenScales()
    value_scale = FrozenScales()

    def __init__(
        self,
        batch,
        num_kv_heads,
        head_dim,
        value_dim=None,
        *,
        dtype=np.float64,
        storage="float8_e4m3fn",
        key_scale=1.0,
        value_scale=1.0,
        **cache_options,
    ):
        self._storage = check_fp8_storage(storage)  # first: the cache's storage dtype
        super().__init__(batch, num_kv_heads, head_dim, value_dim, dtype=dtype, **cache_options)
        self.key_scale = check_quantization_scale(key_scale, self.num_kv_heads, "key_scale")
        self.value_scale = check_quantization_scale(value_scale, self.num_kv_heads, "value_scale")

    @property
    def storage(self) -> np.dtype:
        """The fp8 dtype the codes are stored in (``float8_e4m3fn`` or ``float8_e5m2``)."""
        return self._storage

    def _dequantized(self, codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
        out = dequantize(codes, scales, self.dtype)
        out.flags.writeable = False  # read-only, like a plain cache's keys
        return out

    @property
    def keys(self) -> np.ndarray:
        """Read-only ``(B, Hkv, T, D)`` dequantized keys ``dtype(c * key_scale)`` (a copy)."""
        return self._dequantized(self.key_codes, self.key_scale)

    @property
    def values(self) -> np.ndarray:
        """Read-only ``(B, Hkv, T, Dv)`` dequantized values ``dtype(c * value_scale)``."""
        return self._dequantized(self.value_codes, self.value_scale)


def _per_head(scales: np.ndarray) -> np.ndarray:
    return scales.astype(np.float64)[None, :, None, None]


def quantize(x: np.ndarray, scales: np.ndarray, storage, name: str) -> np.ndarray:
    """The fp8 codes of ``x`` ``(B, Hkv, T, D)`` (finite, of a :data:`FLOAT_DTYPES` dtype) with
    per-head float32 ``scales`` ``(Hkv,)``: ``fp8(x / s)``, the quotient in
    ``compute_dtype(x.dtype)``, rounded to nearest.

    Raises:
        QuantizationError naming ``name`` when an entry has ``|x| > fp8_max * s`` (exact in
        float64; the largest ``|x / s|`` and the limit in the message), or when a code would
        dequantize past the largest ``x.dtype`` value (float16 near 65504: ``c * s`` rounds
        up by up to ``u8`` relative).
    """
    limit = fp8_max(storage)
    magnitude = np.abs(x.astype(np.float64))
    if (magnitude > limit * _per_head(scales)).any():
        with np.errstate(over="ignore"):  # 1e300 / 1e-44 is past float64: say inf
            largest = float((magnitude / _per_head(scales)).max())
        # repr: the shortest digits that read back as the ratio, never "448 > 448"
        raise QuantizationError(
            f"{name}: |{name} / scale| reaches {largest!r} > {limit:g}, the largest "
            f"{np.dtype(storage).name}; values out of range are rejected, not saturated "
            "(raise the scale)"
        )
    compute = compute_dtype(x.dtype)
    quotient = x.astype(compute) / scales.astype(compute)[None, :, None, None]
    codes = quotient.astype(check_fp8_storage(storage))
    with np.errstate(over="ignore"):
        finite = np.isfinite(dequantize(codes, scales, x.dtype)).all()
    if not finite:
        raise QuantizationError(
            f"{name}: a code times its scale passes the largest {x.dtype} value, "
            f"{float(ml_dtypes.finfo(x.dtype).max):g}; lower the scale or widen the dtype"
        )
    return codes


def dequantize(codes: np.ndarray, scales: np.ndarray, dtype) -> np.ndarray:
    """``dtype(c * s)`` for fp8 ``codes`` ``(B, Hkv, T, D)`` and per-head float32 ``scales``
    ``(Hkv,)``: the product in ``compute_dtype(dtype)``, rounded to ``dtype``."""
    compute = compute_dtype(dtype)
    product = codes.astype(compute) * scales.astype(compute)[None, :, None, None]
    return product.astype(dtype)
