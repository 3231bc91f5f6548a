r"""Subject: PyTorch's FlexAttention, ``torch.nn.attention.flex_attention.flex_attention``, on
the CPU (eager: its unfused reference path; ``torch.compile`` is not used here).

Install torch first (``pip install torch``; from a clone, ``pip install -e .[torch]``). Run:
``attnprops check --impl attnprops.properties.subjects.torch_flex_attention``.

FlexAttention expresses each variant as a user function, the way its documentation and
attention-gym write them, and that is what this adapter passes:

- Hiding (``mask_mod(b, h, q_idx, kv_idx)``, through ``create_block_mask``): causality on
  absolute positions (``kv_idx <= query_start + q_idx``; FlexAttention's own causal example
  is top-left, ``q_idx >= kv_idx``), the local window (``p - left <= kv_idx <= p + right``),
  documents (``query_segments[b, q_idx] == key_segments[b, kv_idx]``), chunks (``p // C ==
  kv_idx // C``) and a bool ``attn_mask`` (read at ``[b, h, q_idx, kv_idx]`` of the mask
  broadcast to ``(B, Hq, Tq, Tk)``).
- Scores (``score_mod(score, b, h, q_idx, kv_idx)``, on the scaled score): the soft cap
  ``c * tanh(score / c)`` first, then a float ``attn_mask`` added, then ALiBi's ``-slope *
  |p - kv_idx|``.
- ``lse``: ``return_aux=AuxRequest(lse=True)`` (natural log; ``-inf`` for a row that sees no
  key, which FlexAttention's reference path sets itself).
- GQA: ``enable_gqa=True`` (query head ``h`` reads K/V head ``h // G``). 2-D inputs get two
  leading axes. No sinks (FlexAttention has no sink argument), no KV cache, no weights.
- Serving caches (``attention_with_kvcache``, ``PagedKVCache``): a ragged batch is one more
  ``mask_mod`` rule (``kv_idx < L_b``, the queries at ``L_b - Tq ..``); a paged one goes
  through FlexAttention's own paged attention, ``PagedAttention`` (experimental, private:
  ``torch.nn.attention.experimental._paged_attention``): its page table, its
  ``convert_logical_block_mask``/``get_score_mod`` and, for the cache, its ``reserve``,
  ``assign`` and ``erase``. Known deviations (strict xfails, ``torch_flex_attention.xfail.txt``):
  F6 of ``docs/findings.md``, two faults of ``PagedAttention`` that the cache run finds.

Declared (:data:`ATTNPROPS_CAPABILITIES`): no input validation of the project's kind; a row
that sees no key gives zeros (``fully_masked_rows="zeros"``). Arithmetic: the eager path
computes the scores and the softmax in float32 for float16 and bfloat16 inputs and then
rounds the normalised weights to the input dtype for ``P @ V``
(``torch/_higher_order_ops/flex_attention.py``, ``math_attention``), which none of the
declarable conventions describes, so nothing is declared for the 16-bit dtypes and the bounds
charge their unit roundoff to every operation (the conservative default: each float32
rounding is smaller, so the bound holds; for bfloat16 at head dims past about 100 it says
little, ``gamma(D + 5)`` of ``2**-8`` nearing 1). bfloat16 arrays (``ml_dtypes``) travel as
their 16 bits (``_torch_masks.to_tensor``).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch.nn.attention.experimental._paged_attention import PagedAttention
from torch.nn.attention.flex_attention import AuxRequest
from torch.nn.attention.flex_attention import create_block_mask
from torch.nn.attention.flex_attention import flex_attention

from attnprops.oracle.rules import SERVING_OPTIONS
from attnprops.oracle.rules import takes_options
from attnprops.properties.subjects._flex_paged_cache import PagedKVCache
from attnprops.properties.subjects._torch_masks import to_numpy
from attnprops.properties.subjects._torch_masks import to_tensor

__version__ = torch.__version__

ATTNPROPS_CAPABILITIES = {
    "dtypes": ("bfloat16", "float16", "float32", "float64"),
    "validates_inputs": False,
    "fully_masked_rows": "zeros",
    "weights": False,
    "kv_cache": False,
    "window": "offsets",
    "segment_ids": True,
    "chunk_size": True,
    "alibi": True,
    "softcap": True,
    "lse": True,
    "ragged_cache": True,  # attention_with_kvcache: a length-hiding mask_mod
    "paged_cache": True,  # and PagedAttention's page table, block mask and allocator
}
ATTNPROPS_EXPECTED_FAILURES = "torch_flex_attention.xfail.txt"  # F6 (docs/findings.md)

__all__ = ["PagedKVCache", "attention", "attention_with_kvcache", "cached_attention"]


def _first_position(start):
    """``p0(b)``: the absolute position of batch element ``b``'s first query (``start``: an
    int for all, or a ``(B,)`` tensor, one per sequence of a ragged batch)."""
    if torch.is_tensor(start):
        return lambda b: start[b]
    return lambda b: start


def _mask_mod(shape, *, is_causal, start, window, chunk_size, attn_mask=None, segment_ids=None):
    """The ``mask_mod`` of every rule that hides keys (module docstring), or None when none
    hides any (``attn_mask`` and ``segment_ids`` None: no mask, no documents). ``shape``:
    ``(B, Hq, Tq, Tk)``; ``start``: :func:`_first_position`'s."""
    B, Hq, Tq, Tk = shape
    p0 = _first_position(start)
    rules = []
    if attn_mask is not None and attn_mask.dtype == np.bool_:
        full = to_tensor(np.broadcast_to(attn_mask, shape))
        rules.append(lambda b, h, i, j: full[b, h, i, j])
    if is_causal:
        rules.append(lambda b, h, i, j: j <= i + p0(b))
    if window is not None:
        farthest = int(abs(start).max()) if torch.is_tensor(start) else abs(start)
        reach = Tq + Tk + farthest  # a longer side reaches every key (and fits an int64)
        left, right = (None if side is None else min(int(side), reach) for side in window)
        if left is not None:
            rules.append(lambda b, h, i, j: j >= i + p0(b) - left)
        if right is not None:
            rules.append(lambda b, h, i, j: j <= i + p0(b) + right)
    if segment_ids is not None:
        query_ids, key_ids = (np.asarray(x) for x in segment_ids)
        same = query_ids[..., :, None] == key_ids[..., None, :]  # (B or 1, Tq, Tk) or (Tq, Tk)
        same = to_tensor(np.broadcast_to(same.reshape((-1, Tq, Tk)), (B, Tq, Tk)))
        rules.append(lambda b, h, i, j: same[b, i, j])
    if chunk_size is not None:
        C = int(chunk_size)
        rules.append(lambda b, h, i, j: torch.div(i + p0(b), C, rounding_mode="floor") == j // C)
    if not rules:
        return None

    def mask_mod(b, h, i, j):
        visible = rules[0](b, h, i, j)
        for rule in rules[1:]:
            visible = visible & rule(b, h, i, j)
        return visible

    return mask_mod


def _score_mod(shape, *, attn_mask, start, alibi_slopes, softcap):
    """The ``score_mod`` of the cap, a float mask and ALiBi, in that order; None without."""
    B, Hq, Tq, Tk = shape
    p0 = _first_position(start)
    bias = None
    if attn_mask is not None and attn_mask.dtype != np.bool_:
        bias = to_tensor(np.broadcast_to(attn_mask, shape))
    slopes = None
    if alibi_slopes is not None:
        slopes = np.asarray(alibi_slopes, dtype=np.float64).reshape(-1, Hq)
        slopes = to_tensor(np.broadcast_to(slopes, (B, Hq)))
    if bias is None and slopes is None and softcap is None:
        return None

    def score_mod(score, b, h, i, j):
        if softcap is not None:
            score = softcap * torch.tanh(score / softcap)
        if bias is not None:
            score = score + bias[b, h, i, j].to(score.dtype)
        if slopes is not None:
            score = score - slopes[b, h].to(score.dtype) * (i + p0(b) - j).abs().to(score.dtype)
        return score

    return score_mod


@takes_options(without=("sinks",))
def attention(query, key, value, *, return_lse=False, **options):
    """Attention through FlexAttention (module docstring), this project's conventions.

    Args:
        query ``(B, Hq, Tq, D)`` or ``(Tq, D)``; key ``(B, Hkv, Tk, D)``; value ``(B, Hkv, Tk,
        Dv)``: float16/32/64 NumPy arrays of one dtype. The keyword options of
        :mod:`oracle.rules.options` but ``sinks`` (declared unsupported).
        return_lse: also return each row's log-sum-exp ``(B, Hq, Tq)`` (``(Tq,)``).

    Returns:
        The output in the input dtype (``(output, lse)`` with ``return_lse``; ``lse`` in
        float32 for float16/32 inputs, float64 for float64).

    Raises:
        Whatever FlexAttention raises; no validation of its own (``validates_inputs=False``).
    """
    two_d = np.ndim(query) == 2
    q, k, v = (to_tensor(x) for x in (query, key, value))
    if two_d:
        q, k, v = q[None, None], k[None, None], v[None, None]
    B, Hq, Tq, _ = q.shape
    Tk = k.shape[2]
    shape = (B, Hq, Tq, Tk)
    start = Tk - Tq if options["query_start"] is None else int(options["query_start"])
    mask = None if options["attn_mask"] is None else np.asarray(options["attn_mask"])
    if mask is not None and two_d:
        mask = mask.reshape((1, 1) + mask.shape[-2:]) if mask.ndim >= 2 else mask
    mask_mod = _mask_mod(
        shape,
        attn_mask=mask,
        is_causal=options["is_causal"],
        start=start,
        window=options["window"],
        segment_ids=options["segment_ids"],
        chunk_size=options["chunk_size"],
    )
    score_mod = _score_mod(
        shape,
        attn_mask=mask,
        start=start,
        alibi_slopes=options["alibi_slopes"],
        softcap=options["softcap"],
    )
    scale = options["scale"]
    with warnings.catch_warnings():  # "called without torch.compile()": the eager path, chosen
        warnings.simplefilter("ignore", UserWarning)
        block_mask = None
        if mask_mod is not None:
            block_mask = create_block_mask(mask_mod, B, Hq, Tq, Tk, device="cpu")
        out, aux = flex_attention(
            q,
            k,
            v,
            score_mod=score_mod,
            block_mask=block_mask,
            scale=None if scale is None else float(scale),
            enable_gqa=q.shape[1] != k.shape[1],
            return_aux=AuxRequest(lse=True),
        )
    out, lse = to_numpy(out), to_numpy(aux.lse)
    if two_d:
        out, lse = out[0, 0], lse[0, 0]
    return (out, lse) if return_lse else out


def _flex(q, k, v, *, score_mod, block_mask, scale):
    """``flex_attention`` on the eager path (its "called without torch.compile()" warning
    silenced: the eager path is the one chosen), as a float NumPy array."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = flex_attention(
            q,
            k,
            v,
            score_mod=score_mod,
            block_mask=block_mask,
            scale=None if scale is None else float(scale),
            enable_gqa=q.shape[1] != k.shape[1],
        )
    return to_numpy(out)


def _paged_attention(num_pages, page_size, table, lengths) -> PagedAttention:
    """FlexAttention's ``PagedAttention`` whose page table is ``block_table``'s rows (each
    sequence's first ``ceil(L_b / S)`` entries; ``physical_to_logical`` filled to match), as
    :meth:`PagedAttention.reserve` would leave it."""
    paged = PagedAttention(num_pages, page_size, len(lengths), device="cpu")
    for b, n in enumerate(lengths.tolist()):
        pages = torch.as_tensor(table[b, : -(-n // page_size)], dtype=torch.int64)
        paged.page_table[b, : len(pages)] = pages
        paged.physical_to_logical[b, pages] = torch.arange(len(pages))
    return paged


def _serving_mods(shape, lengths, *, is_causal, window, chunk_size, alibi_slopes, softcap):
    """``(mask_mod, score_mod)`` of a ragged batch of ``shape`` ``(B, Hq, Tq, Tk)``: keys past
    ``lengths[b]`` hidden, sequence ``b``'s queries at ``lengths[b] - Tq ..``."""
    start = lengths - shape[2]
    rules = _mask_mod(shape, is_causal=is_causal, start=start, window=window, chunk_size=chunk_size)

    def mask_mod(b, h, i, j):
        cached = j < lengths[b]
        return cached if rules is None else cached & rules(b, h, i, j)

    score_mod = _score_mod(
        shape, attn_mask=None, start=start, alibi_slopes=alibi_slopes, softcap=softcap
    )
    return mask_mod, score_mod


def _paged_mods(paged, shape, lengths, mask_mod, score_mod, batch_idx=None):
    """The logical block mask (``KV_BLOCK_SIZE`` = the page size) turned physical by
    ``paged.convert_logical_block_mask(..., batch_idx, kv_len=lengths)``, and the score_mod
    by ``paged.get_score_mod``: FlexAttention's paged attention as gpt-fast uses it."""
    B, Hq, Tq, Tk = shape
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        logical = create_block_mask(
            mask_mod, B, Hq, Tq, Tk, device="cpu", BLOCK_SIZE=(128, paged.page_size)
        )
        block_mask = paged.convert_logical_block_mask(logical, batch_idx, kv_len=lengths)
    if score_mod is not None:
        score_mod = paged.get_score_mod(score_mod, kv_len=lengths)
    return block_mask, score_mod


@takes_options(only=tuple(n for n in SERVING_OPTIONS if n != "sinks"))
def attention_with_kvcache(
    query, key_cache, value_cache, cache_seqlens, *, block_table=None, **options
):
    """Each sequence over its own ``cache_seqlens[b]`` cached positions, as
    :func:`impl.attention_with_kvcache` (:mod:`oracle.rules.serving`), through FlexAttention.

    Contiguous storage ``(B, Hkv, T, D)``: one ``flex_attention`` call whose ``mask_mod`` hides
    ``kv_idx >= L_b`` and puts sequence ``b``'s queries at ``L_b - Tq ..``. A page pool ``(P,
    Hkv, S, D)`` with ``block_table``: FlexAttention's paged attention (``PagedAttention``,
    page table from ``block_table``): the pool as its physical cache ``(1, Hkv, P * S, D)``
    and :func:`_paged_mods`. The options of :data:`oracle.rules.SERVING_OPTIONS` but
    ``sinks`` (declared unsupported). Returns ``(B, Hq, Tq, Dv)`` in the query's dtype; no
    validation of its own.
    """
    q = to_tensor(query)
    B, Hq, Tq, _ = q.shape
    lengths = torch.as_tensor(np.asarray(cache_seqlens).astype(np.int64))
    if block_table is None:
        k, v = to_tensor(key_cache), to_tensor(value_cache)
        Tk = k.shape[2]
    else:
        P, Hkv, S, _ = np.shape(key_cache)
        table = np.asarray(block_table).astype(np.int64)
        # PagedAttention's page table has P columns: the logical positions are at most P * S
        Tk = min(table.shape[1], P) * S
        k, v = (
            to_tensor(np.asarray(x).transpose(1, 0, 2, 3).reshape(1, Hkv, P * S, -1))
            for x in (key_cache, value_cache)
        )
    shape = (B, Hq, Tq, Tk)
    scale = options.pop("scale")
    mask_mod, score_mod = _serving_mods(shape, lengths, **options)
    if block_table is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            block_mask = create_block_mask(mask_mod, B, Hq, Tq, Tk, device="cpu")
    else:
        paged = _paged_attention(P, S, table, lengths)
        block_mask, score_mod = _paged_mods(paged, shape, lengths, mask_mod, score_mod)
    return _flex(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale)


def cached_attention(query, key, value, cache, *, seqs, scale=None, window=None):
    """Append row ``b`` of ``key``/``value`` to sequence ``seqs[b]`` of a :class:`PagedKVCache`,
    then attend through the cache's own ``PagedAttention``, as a serving loop does: the
    sequences' batch slots as ``batch_idx`` of ``convert_logical_block_mask``, their lengths
    as ``kv_len``, the physical cache as K/V. Causal, queries the appended positions."""
    starts = cache.append(seqs, key, value)
    ids = cache._ids(seqs)
    q = to_tensor(query)
    B, Hq, Tq, _ = q.shape
    lengths = torch.as_tensor(starts + Tq)
    shape = (B, Hq, Tq, cache.num_pages * cache.page_size)
    mask_mod, score_mod = _serving_mods(
        shape,
        lengths,
        is_causal=True,
        window=window,
        chunk_size=None,
        alibi_slopes=None,
        softcap=None,
    )
    block_mask, score_mod = _paged_mods(
        cache._paged, shape, lengths, mask_mod, score_mod, batch_idx=torch.tensor(ids)
    )
    return _flex(q, cache._k, cache._v, score_mod=score_mod, block_mask=block_mask, scale=scale)
