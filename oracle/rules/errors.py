"""The rulebook's errors: every rule violation raises a subclass of
:class:`AttentionInputError` (a ``ValueError``) whose message names the argument and the
rule (:mod:`oracle.rules`)."""

from __future__ import annotations

__all__ = [
    "AlibiError",
    "AttentionInputError",
    "BlockTableError",
    "CacheSeqlensError",
    "DtypeError",
    "FullyMaskedRowError",
    "NonFiniteInputError",
    "PagedCacheError",
    "QuantizationError",
    "QueryStartError",
    "ScaleError",
    "ScoreOverflowError",
    "SegmentIdsError",
    "SinksError",
    "ShapeError",
    "SoftcapError",
    "WindowError",
]


class AttentionInputError(ValueError):
    """An input breaks one of the rules of :mod:`oracle.rules`. Subclasses say which kind."""


class ShapeError(AttentionInputError):
    """Wrong ndim, mismatched or zero-size axes, or a mask that does not broadcast."""


class DtypeError(AttentionInputError):
    """Unsupported or mismatched dtypes (inputs, masks, cache)."""


class NonFiniteInputError(AttentionInputError):
    """NaN or infinity in query/key/value, NaN or +inf in a float mask."""


class QueryStartError(AttentionInputError):
    """``query_start`` is not an int in ``[0, Tk - Tq]``."""


class ScaleError(AttentionInputError):
    """``scale`` is not a finite number > 0."""


class ScoreOverflowError(AttentionInputError):
    """A visible scaled score (the dot product times the scale, then plus its float mask entry,
    then plus ALiBi's bias: each step checked) overflows the computation dtype: its exact
    value has magnitude at least :func:`oracle.rules.overflow_threshold` (``max + ulp(max) /
    2``), where round to nearest gives ``inf``. A mask entry of ``finfo(dtype).min`` (Hugging
    Face's) plus a negative score rounds to ``finfo.min``: no overflow."""


class FullyMaskedRowError(AttentionInputError):
    """A query row has no visible key (under ``fully_masked_rows="raise"``)."""


class WindowError(AttentionInputError):
    """Local attention's arguments: ``window`` is not ``None`` or a pair of ints >= 0 (each
    may be ``None``), or ``chunk_size`` is not ``None`` or an int >= 1."""


class SegmentIdsError(AttentionInputError):
    """``segment_ids`` is not ``None`` or a pair of integer arrays ``(B, Tq)`` and
    ``(B, Tk)`` (or ``(Tq,)`` and ``(Tk,)``)."""


class AlibiError(AttentionInputError):
    """``alibi_slopes`` is not ``None`` or a finite float array ``(Hq,)`` or ``(B, Hq)``."""


class SoftcapError(AttentionInputError):
    """``softcap`` is not ``None`` or a finite number > 0."""


class SinksError(AttentionInputError):
    """``sinks`` is not ``None`` or a float array ``(Hq,)`` with entries finite or ``-inf``."""


class CacheSeqlensError(AttentionInputError):
    """``cache_seqlens`` is not an integer array ``(B,)`` of lengths in ``[0, capacity]``, or
    a length leaves a query without a key (:mod:`oracle.rules.serving`)."""


class BlockTableError(AttentionInputError):
    """``block_table`` is not an integer array ``(B, pages per sequence)``, names a page
    outside the pool, or holds fewer pages than its sequence's length needs
    (:mod:`oracle.rules.serving`)."""


class PagedCacheError(AttentionInputError):
    """A paged cache's pool has too few free pages for an append, or a sequence id is not
    live (:mod:`oracle.rules.serving`); the cache is unchanged."""


class QuantizationError(AttentionInputError):
    """A quantized cache's storage dtype is not fp8, a scale is not finite and > 0, or an
    appended value lies outside the fp8 range at its scale (:mod:`oracle.rules.quantization`);
    the cache is unchanged."""
