"""The rules on one argument at a time: float arrays (dtype, size, finiteness), ``scale``,
``query_start``, ``block_size``, ``is_causal``, ``attn_mask``, positive ints
(:mod:`oracle.rules`; the dtypes themselves are :mod:`oracle.rules.dtypes`'s)."""

from __future__ import annotations

import math
import numbers

import numpy as np

from attnprops.oracle.rules.dtypes import FLOAT_DTYPES
from attnprops.oracle.rules.dtypes import is_fp8
from attnprops.oracle.rules.dtypes import is_ml_float
from attnprops.oracle.rules.dtypes import unsupported_dtype
from attnprops.oracle.rules.errors import AttentionInputError
from attnprops.oracle.rules.errors import DtypeError
from attnprops.oracle.rules.errors import NonFiniteInputError
from attnprops.oracle.rules.errors import QueryStartError
from attnprops.oracle.rules.errors import ScaleError
from attnprops.oracle.rules.errors import ShapeError
from attnprops.oracle.rules.errors import WindowError

__all__ = [
    "as_real",
    "read_only_copy",
    "check_block_size",
    "check_flag",
    "check_head_floats",
    "check_float_array",
    "check_is_causal",
    "check_mask",
    "check_positive_int",
    "check_query_start",
    "check_scale",
    "check_window",
    "pages_needed",
    "window_visible",
]


def _as_array(x, name: str) -> np.ndarray:
    """``x`` as a plain ndarray: an ndarray as is, a subclass (``np.matrix``) viewed as a plain
    ndarray, anything else through ``np.asarray``. Masked arrays are refused: dropping their
    mask would silently attend to entries the caller meant to hide."""
    if type(x) is np.ndarray:
        return x
    if isinstance(x, np.ma.MaskedArray):
        raise DtypeError(
            f"{name}: masked arrays are not supported (their mask would be ignored); pass a "
            "plain array and hide keys with attn_mask"
        )
    if isinstance(x, np.ndarray):
        return x.view(np.ndarray)
    try:
        return np.asarray(x)
    except Exception as exc:  # ragged lists and the like
        raise ShapeError(f"{name}: cannot be read as an array ({exc})") from None


def check_float_array(x, name: str, *, scan: bool = True) -> np.ndarray:
    """``x`` as an array of a :data:`FLOAT_DTYPES` dtype, of non-zero size whose entries are all finite.

    ``scan=False`` skips the NaN/infinity pass for an ndarray already of a float dtype and
    non-zero size (returned as is): for implementations that scan their inputs block by block
    as they read them, and must then call this again with ``scan=True`` before raising.
    Raises :class:`DtypeError`, :class:`ShapeError` (zero-size axis, unreadable input) or
    :class:`NonFiniteInputError`, each naming ``name``.
    """
    if not scan and type(x) is np.ndarray and x.dtype in FLOAT_DTYPES and x.size:
        return x
    x = _as_array(x, name)
    if x.dtype not in FLOAT_DTYPES:
        raise DtypeError(unsupported_dtype(name, x.dtype))
    if x.size == 0:
        raise ShapeError(f"{name}: shape {x.shape} has a zero-size axis; every axis must be >= 1")
    with np.errstate(all="ignore"):
        finite = np.isfinite(x).all()
    if not finite:
        raise NonFiniteInputError(f"{name}: contains NaN or infinity; every entry must be finite")
    return x


def read_only_copy(x: np.ndarray) -> np.ndarray:
    """A copy of ``x`` (same dtype and shape) in a view of immutable bytes: unlike an array
    whose WRITEABLE flag was cleared, no caller can set it back, so what a cache stores (or
    the scales its codes were made with) cannot be changed from outside."""
    return np.frombuffer(np.ascontiguousarray(x).tobytes(), x.dtype).reshape(x.shape)


# Not numbers, though Python's numbers ABCs say so: bools, and NumPy's durations (np.timedelta64
# is a NumPy integer subclass; float() of one with a unit raises TypeError).
_NOT_NUMBERS = (bool, np.bool_, np.timedelta64)


def _is_int(x) -> bool:
    """An integer (Python or NumPy) that is not a bool or a duration: what the count and
    position rules accept."""
    return isinstance(x, (numbers.Integral, np.integer)) and not isinstance(x, _NOT_NUMBERS)


def _is_int_dtype(dtype) -> bool:
    """An array dtype of integers, signed or not: not bool, and not ``timedelta64`` (which
    NumPy counts as an integer subtype); what the id, length and table rules accept."""
    return np.dtype(dtype).kind in "iu"


def as_real(x) -> float | None:
    """``x`` as a float when it is a real number (Python's, NumPy's, ml_dtypes' floating-point
    scalars, a ``Fraction``; not a bool, not a ``np.timedelta64``), an int past float64's
    range as ``+-inf``; None for anything else. The scalar parameters' rules (``scale``, ``softcap``, the quantization
    scales) read their argument with it, then judge the float."""
    if isinstance(x, np.generic) and is_ml_float(x.dtype):
        return float(x)  # ml_dtypes' floats (bfloat16, float8_*, ...) are no numbers.Real
    if isinstance(x, _NOT_NUMBERS) or not isinstance(x, numbers.Real):
        return None
    try:
        return float(x)
    except OverflowError:  # 10**400, Fraction(10**400): past every float
        return math.inf if x > 0 else -math.inf
    except (TypeError, ValueError):
        return None


def check_scale(scale) -> float | None:
    """``None`` (meaning ``1/sqrt(D)``) or a finite real number > 0, returned as a float."""
    if scale is None:
        return None
    value = as_real(scale)
    if value is None:
        kind = f"{type(scale).__module__}.{type(scale).__qualname__}"
        raise ScaleError(
            f"scale: {scale!r} (a {kind}) is not a real number; pass None or a finite float "
            "> 0 (of a 0-d array or tensor: its float())"
        )
    if not np.isfinite(value) or value <= 0:
        raise ScaleError(f"scale: {scale!r} must be finite and > 0 (None means 1/sqrt(head_dim))")
    return value


def check_query_start(query_start, query_len: int, key_len: int) -> int | None:
    """``None`` or an int in ``[0, key_len - query_len]`` (positions, not bytes)."""
    if query_start is None:
        return None
    if not _is_int(query_start):
        raise QueryStartError(
            f"query_start: {query_start!r} is not an int; it is the absolute position of the "
            "first query"
        )
    start = int(query_start)
    if not 0 <= start <= key_len - query_len:
        raise QueryStartError(
            f"query_start: {start} is outside [0, Tk - Tq] = [0, {key_len - query_len}] "
            f"(Tq={query_len}, Tk={key_len}); the last query's position must be < Tk"
        )
    return start


def check_window(window) -> tuple[int | None, int | None] | None:
    """Local (sliding-window) attention: ``None`` (no window) or a pair ``(left, right)``,
    each ``None`` (unbounded on that side) or an ``int`` (not bool) >= 0; returned as a tuple
    of ints and Nones, or ``None`` for no window (``(None, None)`` is no window too).

    The convention (this project's, in positions): the query at absolute position
    ``p = query_start + i`` sees key ``j`` iff ``p - left <= j <= p + right``, both ends
    inclusive, so it sees at most ``left + 1 + right`` keys, itself among them. The window
    is AND-ed with the mask and with causality (``window=(W, None)`` with ``is_causal`` is a
    causal sliding window of ``W + 1`` keys). How the libraries write the same window (the
    measured table is in ``docs/conventions.md``):

    - FlashAttention ``window_size=(left, right)``, ``-1`` for unbounded: the same pair,
      bottom-right aligned (``query_start = Tk - Tq``); ``(W, 0)`` sees ``W + 1`` keys.
    - JAX ``jax.nn.dot_product_attention(local_window_size=(left, right))``: the same pair
      (its docstring: ``(3, 2)`` lets token ``c`` at 6 see 3..8), top-left aligned (local
      query indices, as its ``is_causal``; measured with jax 0.10.2), so ``(left - s, right
      + s)`` for a first query at position ``s``; an int ``W`` is ``(W, W)``.
    - xFormers ``LocalAttentionFromBottomRightMask(window_left, window_right)``: the same pair,
      bottom-right aligned; its causal masks' ``window_size=W`` count the query itself
      (``(W - 1, 0)``).
    - Hugging Face ``sliding_window=W`` (Mistral, Gemma; ``masking_utils``: key visible iff
      ``kv_idx > q_idx - W``, with causality): ``W`` keys counting the query itself, i.e.
      ``(W - 1, 0)`` here. Passing Hugging Face's ``W`` as FlashAttention's ``window_size[0]``
      sees one key too many: the off-by-one of vllm#3385 and transformers#39408.
    - PyTorch SDPA has no window (an explicit mask; FlexAttention: a ``mask_mod``).

    Raises:
        WindowError naming ``window`` and the rule.
    """
    if window is None:
        return None
    pair = isinstance(window, (tuple, list)) or (
        isinstance(window, np.ndarray) and window.ndim == 1  # a 0-d array has no len
    )
    if not pair or len(window) != 2:
        raise WindowError(
            f"window: {window!r} must be None or a pair (left, right) of ints >= 0 or None "
            "(query at position p sees keys p - left ..= p + right)"
        )
    sides = []
    for name, side in zip(("left", "right"), window):
        if side is None:
            sides.append(None)
            continue
        if not _is_int(side) or side < 0:
            raise WindowError(
                f"window: {name}={side!r} must be an int >= 0 or None (unbounded); the query "
                "at position p sees keys p - left ..= p + right"
            )
        sides.append(int(side))
    return None if sides == [None, None] else (sides[0], sides[1])


def window_visible(window, query_start: int, query_len: int, key_len: int) -> np.ndarray | None:
    """Bool ``(Tq, Tk)``: True where the window lets local query ``i`` see key ``j``
    (``query_start + i - left <= j <= query_start + i + right``; :func:`check_window`).
    ``None`` for no window. ``window`` is already checked."""
    if window is None:
        return None
    left, right = window
    offset = np.arange(key_len)[None, :] - (query_start + np.arange(query_len))[:, None]  # j - p
    visible = np.ones((query_len, key_len), dtype=bool)
    if left is not None:
        visible &= offset >= -left
    if right is not None:
        visible &= offset <= right
    return visible


def check_block_size(block_size) -> int | None:
    """``None`` (the implementation's default path) or an ``int`` (not bool) >= 1: keys per block.

    Used by implementations with a blocked (online-softmax) path; the result does not depend
    on it beyond rounding. Raises :class:`ShapeError` (a size, like :func:`check_positive_int`).
    """
    if block_size is None:
        return None
    if not _is_int(block_size):
        raise ShapeError(
            f"block_size: {block_size!r} is not an int; it is the number of keys per block "
            "(an int >= 1, or None for the default path)"
        )
    if block_size < 1:
        raise ShapeError(f"block_size: {int(block_size)} must be >= 1 (keys per block)")
    return int(block_size)


def check_flag(value, name: str) -> bool:
    """A yes/no argument (``is_causal``, ``return_lse``): a bool, returned as one.

    Raises:
        AttentionInputError naming ``name``: anything else (``1``, ``"yes"``, None).
    """
    if not isinstance(value, (bool, np.bool_)):
        raise AttentionInputError(f"{name}: {value!r} must be True or False")
    return bool(value)


def check_head_floats(value, error: type, form: str, shapes, allowed, contains: str):
    """A per-head float argument (``alibi_slopes``, ``sinks``) read as an array: None stays
    None; else float16, bfloat16, float32 or float64 (each read exactly; any other dtype,
    a longdouble too, is refused), of one of ``shapes``, every entry ``allowed`` (a
    predicate on the array, elementwise); returned as float64 (exact).

    Raises:
        ``error`` with the argument's ``form`` (the message's start, naming it) and the rule;
        an entry not allowed: "it contains ``contains``".
    """
    if value is None:
        return None
    if isinstance(value, np.ma.MaskedArray):  # np.asarray would drop the mask
        raise error(f"{form}; got a masked array (its mask would be ignored: fill it first)")
    try:
        array = np.asarray(value)
    except Exception as exc:
        raise error(f"{form}; cannot be read as an array ({exc})") from None
    if array.dtype not in FLOAT_DTYPES:
        raise error(f"{form} (float16, bfloat16, float32 or float64); got dtype {array.dtype}")
    if array.shape not in tuple(shapes):
        raise error(f"{form}; got shape {array.shape}")
    if not allowed(array).all():
        raise error(f"{form}; it contains {contains}")
    return array.astype(np.float64)


def check_is_causal(is_causal) -> bool:
    return check_flag(is_causal, "is_causal")


def check_mask(attn_mask, target: tuple[int, ...]) -> np.ndarray | None:
    """Validate ``attn_mask`` against the score shape ``target``; return it as an array."""
    if attn_mask is None:
        return None
    mask = _as_array(attn_mask, "attn_mask")
    if is_fp8(mask.dtype):
        raise DtypeError(unsupported_dtype("attn_mask", mask.dtype))
    if mask.dtype != np.bool_ and mask.dtype not in FLOAT_DTYPES:
        raise DtypeError(
            f"attn_mask: dtype {mask.dtype} is ambiguous; use bool (True = may attend) or a "
            "float additive mask (0 = attend, -inf = hide)"
        )
    try:
        shape = np.broadcast_shapes(mask.shape, target)
    except ValueError:
        shape = None
    if shape != target:
        raise ShapeError(
            f"attn_mask: shape {mask.shape} does not broadcast to the score shape {target}"
        )
    if mask.dtype != np.bool_:
        if np.isnan(mask).any() or np.isposinf(mask).any():
            raise NonFiniteInputError(
                "attn_mask: float masks may hold finite values or -inf only, found NaN or +inf"
            )
    return mask


def check_positive_int(value, name: str) -> int:
    """An ``int`` (not bool) >= 1, as used for sizes (counts, not bytes)."""
    if not _is_int(value):
        raise ShapeError(f"{name}: {value!r} must be an int >= 1")
    if value < 1:
        raise ShapeError(f"{name}: {value} must be >= 1")
    return int(value)


def pages_needed(length: int, page_size: int) -> int:
    """``ceil(length / page_size)``: the pages of ``page_size`` positions that hold ``length``
    positions (0 for 0); the paged cache's and ``kv_cache_bytes``' page count."""
    return -(-int(length) // int(page_size))
