"""The rules of serving-side KV caches: ragged lengths (``cache_seqlens``), paged storage (a pool
of pages addressed by a block table) and the rolling (sliding-window) cache
(:mod:`oracle.rules`).

Ragged lengths
    ``cache_seqlens`` ``(B,)``, integers: sequence ``b`` holds ``L_b = cache_seqlens[b]``
    cached positions, ``0 .. L_b - 1``; whatever the storage holds past ``L_b`` is never read.
    Its ``Tq`` queries are its last ``Tq`` positions, ``L_b - Tq .. L_b - 1`` (the KV-cache
    convention of the rest of the rulebook, per sequence: ``query_start = L_b - Tq``), so with
    ``is_causal`` query ``i`` of sequence ``b`` sees keys ``0 ..= L_b - Tq + i``; windows,
    chunks and ALiBi count from the same absolute positions. Each sequence is attention over its
    own ``L_b`` keys alone: a ragged batch equals its sequences run one at a time.
    ``L_b >= Tq`` with or without ``is_causal``: a query is one of its sequence's cached
    positions (its K/V appended before attention, vLLM's and this project's order), so none
    sits before position 0. Decision: FlashAttention also takes ``seqlen_q > L_b`` without
    causality (every query sees every key); here such a call is refused rather than given
    positions below 0, where windows, chunks and ALiBi would have no meaning.

Paged storage
    A pool of ``P`` pages of ``S = page_size`` positions: keys ``(P, Hkv, S, D)``, values
    ``(P, Hkv, S, Dv)`` (heads before positions, as every other array here: FlashInfer's "HND"
    layout). ``block_table`` ``(B, M)``, integers: position ``t`` of sequence ``b`` lives in
    page ``block_table[b, t // S]``, slot ``t % S``. The first ``ceil(L_b / S)`` entries of row
    ``b`` must name pages of the pool (``0 <= page < P``); the entries after them are never
    read (``-1`` is the usual filler). ``M * S >= L_b``: a sequence cannot hold more positions
    than its row's pages. Pages may appear in any order, and two rows may share a page (prefix
    sharing); the result is that of the gathered contiguous keys.

How the libraries write the same thing (this project's names first):

- FlashAttention ``flash_attn_with_kvcache``: ``cache_seqlens`` ``(B,)`` int32, the same
  lengths; ``block_table`` ``(B, max_num_blocks_per_seq)`` int32, the same addressing; but
  positions before heads: ``k_cache`` ``(num_blocks, page_block_size, nheads_k, headdim)``
  paged, ``(B, seqlen_cache, nheads_k, headdim)`` contiguous, and its causal mask is
  bottom-right aligned, as here. Given ``k``/``v`` it appends them in place at
  ``cache_seqlens`` first (here an append is the cache's, :class:`impl.PagedKVCache`).
- vLLM: ``block_tables`` ``(num_seqs, max_num_blocks_per_seq)`` and ``seq_lens`` that already
  count the token being decoded (its K/V is written by ``reshape_and_cache`` before attention:
  this project's append-then-attend); its kernels' cache layouts put ``block_size`` after the
  heads (``[num_blocks, num_kv_heads, head_size / x, block_size, x]`` for keys).
- FlashInfer: the page table in CSR form, ``kv_page_indptr`` ``(B + 1,)``, ``kv_page_indices``
  and ``kv_last_page_len`` ``(B,)`` (positions used in each sequence's last page, ``1 .. S``):
  ``L_b = (pages_b - 1) * S + last_page_len_b``; layouts "NHD" and "HND" (this one).
- Hugging Face transformers pads instead: a contiguous ``(B, H, T, D)`` cache
  (``DynamicCache``, ``StaticCache``) whose shorter prompts are left-padded and hidden by the
  2-D ``attention_mask``; the positions then start at each prompt's first real token. Here that
  is a contiguous cache with a key-padding mask; the result is the unpadded one.
- PyTorch SDPA and ``jax.nn.dot_product_attention`` have no paged cache; JAX takes ragged
  lengths as ``key_value_seq_lengths`` ``(B,)``.

Rolling cache
    A cache of ``capacity`` slots keeps the last ``capacity`` positions: position ``t`` is
    stored in slot ``t % capacity``, overwriting position ``t - capacity`` (Mistral's rolling
    buffer; Hugging Face's sliding-window cache layers). Positions stay absolute after the wrap.
    It serves causal attention with ``window=(left, right)`` only when ``left <= capacity``:
    the first new query, at position ``start``, needs keys from ``start - left``, and the cache
    holds ``start - capacity .. start - 1`` before the new ones join
    (:func:`check_rolling_window`). Mistral's cache of ``W`` slots with ``W`` keys per query
    (Hugging Face's ``sliding_window=W``) is ``capacity=W``, ``window=(W - 1, 0)``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from attnprops.oracle.rules.alibi import check_alibi_slopes
from attnprops.oracle.rules.arguments import _as_array
from attnprops.oracle.rules.arguments import _is_int
from attnprops.oracle.rules.arguments import _is_int_dtype
from attnprops.oracle.rules.arguments import check_float_array
from attnprops.oracle.rules.arguments import check_window
from attnprops.oracle.rules.arguments import pages_needed
from attnprops.oracle.rules.cache import check_cached_query
from attnprops.oracle.rules.errors import AttentionInputError
from attnprops.oracle.rules.errors import BlockTableError
from attnprops.oracle.rules.errors import CacheSeqlensError
from attnprops.oracle.rules.errors import DtypeError
from attnprops.oracle.rules.errors import NonFiniteInputError
from attnprops.oracle.rules.errors import PagedCacheError
from attnprops.oracle.rules.errors import ShapeError
from attnprops.oracle.rules.errors import WindowError

__all__ = [
    "KVCacheCall",
    "sequence_options",
    "check_block_table",
    "check_free_pages",
    "check_paged_cached_call",
    "check_sequence_finite",
    "check_sequence_id",
    "check_sequence_ids",
    "check_cache_seqlens",
    "check_kvcache_call",
    "check_rolling_window",
    "pool_call",
]


def _integer_array(x, name: str, error: type, form: str) -> np.ndarray:
    """``x`` as an int64 array; a bool, float or object array, or unsigned entries past
    int64's range, are refused (``error``)."""
    array = _as_array(x, name)
    if not _is_int_dtype(array.dtype):
        raise error(f"{form}; got dtype {array.dtype}")
    if array.size and np.issubdtype(array.dtype, np.unsignedinteger):
        largest = int(array.max())
        if largest > np.iinfo(np.int64).max:
            raise error(f"{form}; it holds {largest}, past int64's range")
    return array.astype(np.int64)


def check_cache_seqlens(cache_seqlens, batch: int, capacity: int | None) -> np.ndarray:
    """``cache_seqlens``: an integer array ``(B,)`` of lengths in ``[0, capacity]``, returned
    as int64 ``(B,)``. ``capacity``: positions the storage holds per sequence (the contiguous
    cache's ``T``), or ``None`` when a block table bounds each (:func:`check_block_table`).

    Raises:
        CacheSeqlensError naming ``cache_seqlens`` and the rule.
    """
    form = f"cache_seqlens: must be an integer array of shape (B,) = ({batch},)"
    lengths = _integer_array(cache_seqlens, "cache_seqlens", CacheSeqlensError, form)
    if lengths.shape != (batch,):
        raise CacheSeqlensError(f"{form}; got shape {lengths.shape}")
    top = np.iinfo(np.int64).max if capacity is None else capacity
    bad = np.flatnonzero((lengths < 0) | (lengths > top))
    if bad.size:
        b = int(bad[0])
        where = (
            "a length >= 0"
            if capacity is None
            else f"[0, {capacity}], the positions the cache holds per sequence"
        )
        raise CacheSeqlensError(f"cache_seqlens[{b}] = {int(lengths[b])} is outside {where}")
    return lengths


def check_block_table(block_table, lengths: np.ndarray, num_pages: int, page_size: int):
    """``block_table``: an integer array ``(B, M)``; for each sequence ``b`` its first
    ``ceil(L_b / S)`` entries are pages of the pool (``0 <= page < P``) and ``M * S >= L_b``.
    Entries past a sequence's pages are not read. Returns it as int64.

    Raises:
        BlockTableError naming ``block_table``, the sequence and the rule.
    """
    batch = lengths.shape[0]
    form = f"block_table: must be an integer array of shape (B, pages per sequence) = ({batch}, M)"
    table = _integer_array(block_table, "block_table", BlockTableError, form)
    if table.ndim != 2 or table.shape[0] != batch:
        raise BlockTableError(f"{form}; got shape {table.shape}")
    for b, length in enumerate(lengths.tolist()):
        used = pages_needed(length, page_size)
        if used > table.shape[1]:
            raise BlockTableError(
                f"block_table: sequence {b} has {length} positions, which need {used} pages "
                f"of {page_size}, but its row names {table.shape[1]} (at most "
                f"{table.shape[1] * page_size} positions)"
            )
        row = table[b, :used]
        outside = np.flatnonzero((row < 0) | (row >= num_pages))
        if outside.size:
            j = int(outside[0])
            raise BlockTableError(
                f"block_table[{b}, {j}] = {int(row[j])} is not a page of the pool [0, "
                f"{num_pages}) (sequence {b} reads its first {used} entries)"
            )
    return table


class KVCacheCall(NamedTuple):
    """A validated :func:`check_kvcache_call`: the arrays, the lengths, the block table
    (``None``: contiguous storage) and the page size (``None`` when contiguous)."""

    query: np.ndarray
    key_cache: np.ndarray
    value_cache: np.ndarray
    lengths: np.ndarray
    block_table: np.ndarray | None
    page_size: int | None


def check_kvcache_call(
    query, key_cache, value_cache, cache_seqlens, block_table, is_causal: bool
) -> KVCacheCall:
    """Attention over a serving cache (module doc): ``query`` ``(B, Hq, Tq, D)``; contiguous
    ``key_cache`` ``(B, Hkv, T, D)`` and ``value_cache`` ``(B, Hkv, T, Dv)`` with
    ``block_table=None``, or a pool ``(P, Hkv, S, D)`` / ``(P, Hkv, S, Dv)`` with
    ``block_table`` ``(B, M)``; ``cache_seqlens`` ``(B,)``. One float dtype; the query
    finite, and of the storage the positions read (:func:`check_sequence_finite`, per
    sequence: storage past the lengths may hold anything, ``np.empty``'s junk included). Each length is at least ``Tq``: the queries are the sequence's last ``Tq`` cached
    positions (appended before the call), never before position 0. The per-sequence attention rules (heads, head dims,
    window, scale, ...) are :func:`check_attention_call`'s, applied to each sequence's keys.

    Raises:
        ShapeError, DtypeError, NonFiniteInputError, CacheSeqlensError, BlockTableError.
    """
    query = check_float_array(query, "query")
    # storage past the lengths is never read, so only the gathered positions must be finite
    # (each sequence's, checked as it is read: check_sequence_finite)
    key_cache = check_float_array(key_cache, "key_cache", scan=False)
    value_cache = check_float_array(value_cache, "value_cache", scan=False)
    layout = "(P, Hkv, page_size, D)" if block_table is not None else "(B, Hkv, T, D)"
    for name, x in (("query", query), ("key_cache", key_cache), ("value_cache", value_cache)):
        if x.ndim != 4:
            shape = "(B, Hq, Tq, D)" if name == "query" else layout
            raise ShapeError(f"{name}: ndim {x.ndim} (shape {x.shape}); expected {shape}")
    for name, x in (("key_cache", key_cache), ("value_cache", value_cache)):
        if x.dtype != query.dtype:
            raise DtypeError(f"{name}: dtype {x.dtype} differs from query's {query.dtype}")
    if value_cache.shape[:3] != key_cache.shape[:3]:
        raise ShapeError(
            f"value_cache: shape {value_cache.shape} does not match key_cache "
            f"{key_cache.shape} on the first three axes"
        )
    if key_cache.shape[3] != query.shape[3]:
        raise ShapeError(
            f"key_cache: head_dim {key_cache.shape[3]} differs from query's {query.shape[3]}"
        )
    if query.shape[1] % key_cache.shape[1]:
        raise ShapeError(
            f"query: {query.shape[1]} heads is not a multiple of key_cache's "
            f"{key_cache.shape[1]} K/V heads (query head h reads K/V head h // (Hq // Hkv))"
        )
    batch, query_len = query.shape[0], query.shape[2]
    if block_table is None:
        if key_cache.shape[0] != batch:
            raise ShapeError(
                f"key_cache: batch {key_cache.shape[0]} differs from query's {batch} "
                "(contiguous storage: one row per sequence; pass block_table for a page pool)"
            )
        lengths = check_cache_seqlens(cache_seqlens, batch, key_cache.shape[2])
        table, page_size = None, None
    else:
        page_size = key_cache.shape[2]
        lengths = check_cache_seqlens(cache_seqlens, batch, None)  # bounded by the table's rows
        table = check_block_table(block_table, lengths, key_cache.shape[0], page_size)
    short = np.flatnonzero(lengths < query_len)
    if short.size:
        b = int(short[0])
        raise CacheSeqlensError(
            f"cache_seqlens[{b}] = {int(lengths[b])} must be >= {query_len}: the {query_len} "
            f"queries are the sequence's last {query_len} cached positions"
        )
    return KVCacheCall(query, key_cache, value_cache, lengths, table, page_size)


def check_rolling_window(window, capacity: int) -> tuple[int, int | None]:
    """A rolling cache of ``capacity`` slots serves a causal ``window=(left, right)`` with
    ``left <= capacity`` (module doc); returns the window checked by
    :func:`check_window`.

    Raises:
        WindowError naming ``window``, ``capacity`` and the rule.
    """
    checked = check_window(window)
    left = None if checked is None else checked[0]
    if left is None or left > capacity:
        reach = "every earlier position" if left is None else f"keys {left} positions back"
        raise WindowError(
            f"window: {window!r} needs {reach}, but a RollingKVCache of capacity {capacity} "
            f"keeps only the last {capacity}; pass window=(left, 0) with left <= {capacity}"
        )
    return checked


def check_sequence_ids(seqs, live) -> list[int]:
    """A paged cache's ``seqs``: one id or a sequence of distinct ids, each live (in ``live``),
    at least one; returned as a list of ints.

    Raises:
        PagedCacheError naming ``seqs`` and the rule.
    """
    if _is_int(seqs) or isinstance(seqs, (bool, np.bool_)):
        ids = [seqs]
    elif isinstance(seqs, (list, tuple)) or (isinstance(seqs, np.ndarray) and seqs.ndim == 1):
        ids = list(seqs)
    else:
        raise PagedCacheError(
            f"seqs: {seqs!r} must be one sequence id or a list, tuple or 1-D array of them "
            "(its order is the order of the rows)"
        )
    for seq in ids:
        if not _is_int(seq) or seq not in live:
            raise PagedCacheError(
                f"seqs: {seq!r} is not a live sequence of this cache (live: {sorted(live)}; "
                "add one with add_sequence())"
            )
    if len(set(ids)) != len(ids) or not ids:
        raise PagedCacheError(f"seqs: {ids} must name distinct live sequences, at least one")
    return [int(s) for s in ids]


def check_sequence_id(seq, live) -> int:
    """One live sequence id (``free`` takes one), returned as an int.

    Raises:
        PagedCacheError naming ``seq`` and the rule.
    """
    if not _is_int(seq):
        raise PagedCacheError(f"seq: {seq!r} must be one sequence id, an int (free takes one)")
    return check_sequence_ids(seq, live)[0]


def check_free_pages(wanted: int, free: int, num_pages: int, page_size: int, new: int, ids):
    """An append of ``new`` positions to sequences ``ids`` that needs ``wanted`` new pages
    fits a pool of ``num_pages`` pages of ``page_size`` with ``free`` free ones.

    Raises:
        PagedCacheError naming ``key`` (the positions that do not fit) and the pool.
    """
    if wanted > free:
        raise PagedCacheError(
            f"key: appending {new} positions to sequences {list(ids)} needs {wanted} new pages "
            f"of {page_size}, but the pool has {free} free of {num_pages}; free a sequence first"
        )


def check_sequence_finite(keys: np.ndarray, values: np.ndarray, b: int) -> None:
    """The positions sequence ``b`` reads are finite (the rest of the storage is never read).

    Raises:
        NonFiniteInputError naming ``key_cache``/``value_cache`` and the sequence.
    """
    for name, x in (("key_cache", keys), ("value_cache", values)):
        if not np.isfinite(x).all():
            raise NonFiniteInputError(
                f"{name}: sequence {b} reads NaN or infinity among its cached positions; "
                "every position a sequence reads must be finite"
            )


def sequence_options(options: dict, batch: int, num_heads: int) -> list[dict]:
    """Each sequence's keyword options for its own attention call: ``alibi_slopes`` checked
    whole (:func:`check_alibi_slopes`, ``(Hq,)`` or ``(B, Hq)``) and given to sequence ``b``
    as its row ``(1, Hq)``; every other option shared as it is.

    Raises:
        AlibiError naming ``alibi_slopes`` with the batch's ``B``.
    """
    options = {k: v for k, v in options.items() if v is not None}
    slopes = check_alibi_slopes(options.pop("alibi_slopes", None), batch, num_heads)
    if slopes is None:
        return [options] * batch
    return [{**options, "alibi_slopes": slopes[b : b + 1] if len(slopes) > 1 else slopes[0]}
            for b in range(batch)]  # fmt: skip


def check_paged_cached_call(query, key, cache, paged: bool, seqs, attn_mask) -> None:
    """``cached_attention`` with a paged cache (``paged``: ``cache`` is the implementation's
    ``PagedKVCache``) or with ``seqs``: both or neither; no ``attn_mask`` (each sequence sees
    its own cached positions); then the cached query's rule (:func:`check_cached_query`).

    Raises:
        PagedCacheError naming ``seqs``, AttentionInputError naming ``attn_mask``.
    """
    if not paged:
        raise PagedCacheError(
            f"seqs: names sequences of a PagedKVCache, but cache is a {type(cache).__name__}"
        )
    if seqs is None:
        raise PagedCacheError("seqs: cached_attention on a PagedKVCache needs seqs=[ids]")
    if attn_mask is not None:
        raise AttentionInputError(
            "attn_mask: not taken with a PagedKVCache (each sequence sees its own cached "
            "positions; hide keys with a window or chunks)"
        )
    check_cached_query(query, key, cache)


def pool_call(cache, seqs) -> tuple[tuple, dict]:
    """The arguments with which ``attention_with_kvcache`` reads sequences ``seqs`` of a paged
    ``cache`` (``impl.PagedKVCache`` or the oracle's): ``(key_pages, value_pages,
    seqlens)`` and ``block_table=`` the cache's rows for ``seqs``, ``is_causal=True`` (the
    queries are the sequences' last positions). One definition for the paged cached call of
    ``impl`` and the oracle, and for the properties that read a pool after a run."""
    args = (cache.key_pages, cache.value_pages, cache.seqlens(seqs))
    return args, dict(block_table=cache.block_table(seqs), is_causal=True)
