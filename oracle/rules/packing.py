"""Which keys a query may see by the document or chunk its position belongs to: packed
sequences (``segment_ids``) and chunked attention (``chunk_size``) (:mod:`oracle.rules`).

Packed sequences (``segment_ids=(query_segments, key_segments)``)
    Several documents share one row of the batch; each position carries the id of its
    document, and query ``i`` of batch element ``b`` sees key ``j`` only when
    ``query_segments[b, i] == key_segments[b, j]`` (AND the mask, causality and the window).
    Causality stays on absolute positions, so in packed self-attention each document's first
    token sees only itself: positions restart per document as far as visibility goes (a
    position-dependent bias such as ALiBi is the caller's to restart). A document of length
    zero is an id that does not occur.

    How the libraries write it: FlashAttention's varlen functions take ``cu_seqlens_q`` and
    ``cu_seqlens_k`` (cumulative lengths of the sequences concatenated along the tokens; for
    packed self-attention, ``cu_seqlens_q == cu_seqlens_k``, token ``t`` has id
    ``searchsorted(cu_seqlens, t, side="right") - 1``; its causal mask is bottom-right *per
    sequence*, which equals this rule when each sequence has as many queries as keys);
    FlexAttention's document masks and JAX's Splash attention take segment ids per position,
    as here; Hugging Face packs with ``position_ids`` that restart at 0
    (``find_packed_sequence_indices``).

Chunked attention (``chunk_size=C``, Llama 4)
    The query at absolute position ``p`` sees key ``j`` only when ``p // C == j // C`` (floor
    division; AND causality, the mask, the window and the segments): fixed chunks of ``C``
    positions from position 0 (with ``is_causal``, each attended causally within itself; without,
    bidirectionally). Hugging Face's
    ``chunked_overlay`` is ``kv_idx // chunk_size == q_idx // chunk_size``, the same rule.
"""

from __future__ import annotations

import numpy as np

from attnprops.oracle.rules.arguments import _is_int
from attnprops.oracle.rules.arguments import _is_int_dtype
from attnprops.oracle.rules.errors import SegmentIdsError
from attnprops.oracle.rules.errors import WindowError

__all__ = [
    "check_chunk_size",
    "check_segment_ids",
    "chunk_visible",
    "cu_seqlens_from_segment_ids",
    "segment_ids_from_cu_seqlens",
    "segment_visible",
]


def check_chunk_size(chunk_size) -> int | None:
    """``None`` (no chunks) or an ``int`` (not bool) >= 1, positions per chunk.

    Raises:
        WindowError naming ``chunk_size`` (local attention's argument) and the rule.
    """
    if chunk_size is None:
        return None
    if not _is_int(chunk_size) or chunk_size < 1:
        raise WindowError(
            f"chunk_size: {chunk_size!r} must be None or an int >= 1 (positions per chunk: the "
            "query at p sees keys j with p // chunk_size == j // chunk_size)"
        )
    return int(chunk_size)


def check_segment_ids(
    segment_ids, batch: int, query_len: int, key_len: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """``None`` or a pair ``(query_segments, key_segments)`` of integer arrays (not bool) of
    shapes ``(B, Tq)`` and ``(B, Tk)`` (a first axis of 1 for every batch element), or
    ``(Tq,)`` and ``(Tk,)`` for every batch element, the two of the same form (2-D inputs
    are ``B = 1``). Returns them, in their own integer dtypes (ids are compared as
    integers, never wrapped: ``2**64 - 1`` is not ``-1``), as arrays of shapes ``(B or 1, Tq)``
    and ``(B or 1, Tk)`` (copies: later changes of the caller's arrays do not reach a
    validated call). A masked array is refused (its mask would be dropped).

    Raises:
        SegmentIdsError naming ``segment_ids`` and the rule.
    """
    if segment_ids is None:
        return None
    form = (
        "segment_ids: must be None or a pair (query_segments, key_segments) of integer arrays "
        f"of shapes (B, Tq) and (B, Tk), or (Tq,) and (Tk,); here B={batch}, Tq={query_len}, "
        f"Tk={key_len}"
    )
    if isinstance(segment_ids, (str, bytes, np.ndarray)) or not hasattr(segment_ids, "__len__"):
        raise SegmentIdsError(f"{form}; got {type(segment_ids).__name__}")
    if len(segment_ids) != 2:
        raise SegmentIdsError(f"{form}; got {len(segment_ids)} items")
    arrays = []
    for name, ids, length in zip(("query", "key"), segment_ids, (query_len, key_len)):
        if isinstance(ids, np.ma.MaskedArray):
            raise SegmentIdsError(f"{form}; {name}_segments is a masked array (fill it first)")
        try:
            ids = np.array(ids)  # a copy
        except Exception as exc:
            raise SegmentIdsError(f"{form}; {name}_segments cannot be read ({exc})") from None
        if not _is_int_dtype(ids.dtype):
            raise SegmentIdsError(f"{form}; {name}_segments has dtype {ids.dtype}")
        given = ids.shape
        if ids.ndim == 1:
            ids = ids[None]
        if ids.ndim != 2 or ids.shape[1] != length or ids.shape[0] not in (1, batch):
            raise SegmentIdsError(f"{form}; {name}_segments has shape {given}")
        arrays.append(ids)
    if np.ndim(segment_ids[0]) != np.ndim(segment_ids[1]):
        raise SegmentIdsError(f"{form}; the two have different ndim")
    return arrays[0], arrays[1]


def segment_visible(segments, rows: slice, keys: slice) -> np.ndarray | None:
    """Bool ``(B or 1, 1, len(rows), len(keys))``: True where query ``i`` and key ``j`` are
    in the same document; ``None`` without segments (already checked)."""
    if segments is None:
        return None
    query, key = segments
    return query[:, rows][:, None, :, None] == key[:, keys][:, None, None, :]


def chunk_visible(chunk_size, query_start: int, rows: slice, keys: slice) -> np.ndarray | None:
    """Bool ``(len(rows), len(keys))``: True where the query at ``query_start + i`` and key
    ``j`` are in the same chunk (``p // C == j // C``); ``None`` without chunks."""
    if chunk_size is None:
        return None
    p = query_start + np.arange(rows.start, rows.stop)
    j = np.arange(keys.start, keys.stop)
    return (p // chunk_size)[:, None] == (j // chunk_size)[None, :]


INT32_MAX = 2**31 - 1  # FlashAttention's cu_seqlens are int32


def _int_row(x, rule: str) -> np.ndarray:
    """``x`` as a 1-D int64 array, or a SegmentIdsError with ``rule``: integers (not bool),
    each in ``[-2**31, 2**31)`` (FlashAttention's int32, so that no difference wraps around
    in a narrow or unsigned dtype, and no length asks for more than int32 counts); an empty
    sequence is an empty row."""
    if isinstance(x, np.ma.MaskedArray):  # np.array would drop the mask
        raise SegmentIdsError(f"{rule}; got a masked array (its mask would be ignored)")
    try:
        row = np.array(x)
    except Exception as exc:  # ragged lists and the like
        raise SegmentIdsError(f"{rule}; it cannot be read as an array ({exc})") from None
    if row.ndim != 1:
        raise SegmentIdsError(f"{rule}; got shape {row.shape}")
    if row.size == 0:  # [] reads as float64: nothing in it to be of the wrong type
        return np.zeros(0, np.int64)
    if not _is_int_dtype(row.dtype):
        raise SegmentIdsError(f"{rule}; got dtype {row.dtype}")
    if int(row.min()) < -(2**31) or int(row.max()) > INT32_MAX:
        raise SegmentIdsError(
            f"{rule}; got entries past int32 ({int(row.min())}..{int(row.max())})"
        )
    return row.astype(np.int64)


def segment_ids_from_cu_seqlens(cu_seqlens) -> np.ndarray:
    """The segment ids ``(T,)`` (int64) of FlashAttention's varlen ``cu_seqlens``: ``N + 1``
    cumulative lengths of ``N >= 0`` sequences concatenated along the tokens
    (``cu_seqlens[0] == 0``, non-decreasing, ``T = cu_seqlens[-1]``, every entry an int32 as
    FlashAttention's); token ``t`` belongs to sequence ``searchsorted(cu_seqlens, t,
    side="right") - 1``, so a sequence of length zero (two equal entries) is an id that does
    not occur. ``[0]`` is no sequence: no token. Pass the ids of ``cu_seqlens_q`` and
    ``cu_seqlens_k`` as ``segment_ids=(query_ids, key_ids)``. Any integer dtype, read
    exactly (no wrap-around in ``uint8`` or ``int8`` differences).

    Raises:
        SegmentIdsError naming ``cu_seqlens`` and the rule (not 1-D integers, a masked
        array, no entry, a first entry other than 0, a decrease, an entry past int32).
    """
    rule = (
        "cu_seqlens: must be a 1-D integer array of N + 1 >= 1 cumulative lengths (int32 "
        "values), starting at 0 and non-decreasing"
    )
    cu = _int_row(cu_seqlens, rule)
    if cu.size < 1:
        raise SegmentIdsError(f"{rule}; got shape {cu.shape}")
    if cu[0] != 0 or (np.diff(cu) < 0).any():
        raise SegmentIdsError(f"{rule}; got {cu.tolist()}")
    tokens = np.arange(int(cu[-1]))
    return np.searchsorted(cu, tokens, side="right").astype(np.int64) - 1


def cu_seqlens_from_segment_ids(segment_ids) -> np.ndarray:
    """FlashAttention's ``cu_seqlens`` (int32, ``N + 1`` entries) of one row of segment ids
    ``(T,)`` that number the sequences in order: non-decreasing integers from 0, a skipped id a
    sequence of length zero; ``N = ids[-1] + 1`` (a zero-length sequence after the last token
    has no token, so it is not returned); no token gives ``[0]``. The inverse of
    :func:`segment_ids_from_cu_seqlens` for those ids; other ids (a document in two runs, ids
    out of order) have no ``cu_seqlens``. Any integer dtype, read exactly; ``N + 1`` must
    fit int32 (the result has that many entries, whatever ``T``).

    Raises:
        SegmentIdsError naming ``segment_ids`` and the rule.
    """
    rule = (
        "segment_ids: as cu_seqlens, one row (T,) of non-decreasing integer ids from 0 "
        "(sequences in order, each one run of tokens; N + 1 = last id + 2 fits int32)"
    )
    ids = _int_row(segment_ids, rule)
    if ids.size and (ids[0] < 0 or (np.diff(ids) < 0).any() or ids[-1] + 1 > INT32_MAX - 1):
        raise SegmentIdsError(f"{rule}; got {ids.tolist()}")
    count = int(ids[-1]) + 1 if ids.size else 0
    return np.searchsorted(ids, np.arange(count + 1), side="left").astype(np.int32)
