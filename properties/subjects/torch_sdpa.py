r"""Subject: ``torch.nn.functional.scaled_dot_product_attention`` (SDPA) on the CPU.

Install torch first (``pip install torch``; from a clone, the extra ``pip install -e .[torch]`` pins a CPU build). Run:
``attnprops check --impl attnprops.properties.subjects.torch_sdpa``.

What the adapter maps, and why (every mapping was checked by ``python -m
properties.subjects.probe torch_sdpa``, see ``docs/conventions.md``):

- Layout: SDPA already takes ``(B, H, T, D)`` (any leading dims, so 2-D ``(T, D)`` works as
  is); NumPy arrays are copied into tensors and the result is copied back to NumPy.
- Mask polarity: SDPA's bool ``attn_mask`` is True = take part in attention, the same as
  this project's; a float mask is additive in both. Float masks are cast to the query's dtype
  (SDPA's documented requirement; the rounding is inside the bound's ``u |b|`` term).
- Causality: SDPA's ``is_causal=True`` is *top-left* aligned (query ``i`` sees keys
  ``0..i`` whatever ``Tk``), and SDPA refuses ``attn_mask`` together with ``is_causal``. The
  adapter therefore never passes ``is_causal``: it builds the bool mask ``j <= query_start + i``
  (``query_start=None`` meaning ``Tk - Tq``), AND-ed with the caller's mask.
- Local windows: SDPA has none (FlexAttention would express one as a ``mask_mod``). The
  adapter's ``window=(left, right)`` is AND-ed into the same bool mask (``p - left <= j <= p +
  right``, ``p = query_start + i``), so the window properties test SDPA with the masks a
  windowed model builds for it; a side past the sequence is unbounded (kept out of int64).
  Packed documents (``segment_ids``) and chunks (``chunk_size``) are AND-ed in the same way
  (FlexAttention's document and chunk ``mask_mod``\ s, as explicit masks). ALiBi
  (``alibi_slopes``) is added to the float mask: ``-slope * |p - j|`` in float64, converted
  to the query's dtype with the rest of the mask. Sinks (``sinks``, one logit per query head)
  are one more key: a zero key and a zero value appended to K and V, its float-mask column
  the head's sink (score ``scale * q . 0 + sigma_h = sigma_h``, value 0), so SDPA's softmax
  holds ``exp(sigma_h - m)`` in each denominator (:func:`with_sink_key`).
- Log-sum-exp (``return_lse=True``): SDPA returns none; the adapter takes it from
  ``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu`` (the CPU flash kernel
  SDPA dispatches to, which returns ``(output, logsumexp)``), called with the same float mask
  but without the sink key (the ``lse`` does not count the sink), K/V repeated to the query
  heads (``h // G``), 2-D inputs given two leading axes and the head dims padded with zero
  columns to one size (the kernel wants ``D == Dv``; the zeros change no score, and the
  scale is then passed explicitly). A row that sees no key gets ``-inf`` here: the kernel
  writes ``0`` there ([F5](../../docs/findings.md)), so the adapter maps its convention to
  this project's from the mask it built, as it maps the causal alignment.
- GQA: ``enable_gqa=True`` when ``Hq != Hkv`` (SDPA maps query head ``h`` to K/V head
  ``h // (Hq // Hkv)``, this project's convention).
- ``attention_weights`` is SDPA applied to an identity value matrix: ``softmax(...) @ I``
  is the weights, exactly (every other product is an exact zero), so the weights properties
  test SDPA's own softmax.
- KV cache: SDPA has none. :class:`KVCache` stores torch tensors ``(B, Hkv, T, D)`` and
  :func:`cached_attention` calls SDPA over the whole cache with ``query_start`` = the cache
  length before the append, so the cache properties exercise SDPA with offsets.

Declared (:data:`ATTNPROPS_CAPABILITIES`): SDPA does not validate its inputs the project's way
(NaN/inf pass through, shape errors are ``RuntimeError``), a fully masked query row gives
a zero output row (``fully_masked_rows="zeros"``), as in PyTorch >= 2.5, and float16 and
bfloat16 are computed in float32 with the unnormalised weights rounded to the input dtype
before the product with the values (``compute_dtypes``, ``rounds_weights``: what the error
bounds charge).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from attnprops.oracle.rules import BFLOAT16
from attnprops.oracle.rules import CACHED_OPTIONS
from attnprops.oracle.rules import check_cache_instance
from attnprops.oracle.rules import check_cached_query
from attnprops.oracle.rules import kv_cache_elements
from attnprops.oracle.rules import takes_options
from attnprops.properties.subjects._concat_cache import ConcatKVCache
from attnprops.properties.subjects._concat_cache import appended
from attnprops.properties.subjects._torch_masks import cpu_lse
from attnprops.properties.subjects._torch_masks import sdpa_mask
from attnprops.properties.subjects._torch_masks import to_numpy
from attnprops.properties.subjects._torch_masks import to_tensor
from attnprops.properties.subjects._torch_masks import torch_dtype
from attnprops.properties.subjects._torch_masks import with_sink_key

__version__ = torch.__version__
ATTNPROPS_EXPECTED_FAILURES = "torch_sdpa.xfail.txt"  # known deviations, docs/findings.md

ATTNPROPS_CAPABILITIES = {
    "dtypes": ("bfloat16", "float16", "float32", "float64"),
    "validates_inputs": False,
    "fully_masked_rows": "zeros",
    # float16 and bfloat16 are computed in float32, the exponentials rounded to the input
    # dtype before P @ V (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp: accum_t = float
    # for reduced types, _exp_reduce_sum_fusion_kernel writes exp(s - m) to the reduced-type
    # buffer; the math fallback converts reduced types to float32 on the CPU)
    "compute_dtypes": {"float16": "float32", "bfloat16": "float32"},
    "rounds_weights": True,
    "window": "offsets",  # built into the bool mask (see the module docstring)
    "segment_ids": True,  # likewise
    "chunk_size": True,  # likewise
    "alibi": True,  # a float mask
    "sinks": True,  # a zero key whose float-mask column is the sink (with_sink_key)
    "lse": True,  # from the CPU flash kernel (cpu_lse); -inf for rows without keys (F5)
}


def options_mask(query: torch.Tensor, key: torch.Tensor, options) -> torch.Tensor | None:
    """The SDPA ``attn_mask`` (CPU, bool or float) that holds every option of a call but the
    scale and the sinks: the caller's mask, causality at ``query_start``, the window,
    documents, chunks and ALiBi (:func:`_torch_masks.sdpa_mask`); ``None`` when none is given.
    ``options`` is the complete dict :func:`takes_options` passes."""
    return sdpa_mask(
        options["attn_mask"],
        query.dtype,
        is_causal=options["is_causal"],
        query_start=options["query_start"],
        query_len=query.shape[-2],
        key_len=key.shape[-2],
        window=options["window"],
        segment_ids=options["segment_ids"],
        chunk_size=options["chunk_size"],
        alibi_slopes=options["alibi_slopes"],
        two_d=query.ndim == 2,
    )


def sdpa_operands(query, key, value, mask, options) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """``(key, value, keywords)`` for ``F.scaled_dot_product_attention(query, key, value,
    **keywords)``: the sinks become one more key (:func:`with_sink_key`), GQA is
    ``enable_gqa`` when ``Hq != Hkv``, ``mask`` (:func:`options_mask`) is ``attn_mask``."""
    scale, sinks = options["scale"], options["sinks"]
    if sinks is not None:
        mask, key, value = with_sink_key(mask, key, value, sinks, query.shape[-2])
    gqa = query.ndim == 4 and key.ndim == 4 and query.shape[1] != key.shape[1]
    scale = None if scale is None else float(scale)
    return key, value, {"attn_mask": mask, "scale": scale, "enable_gqa": gqa}


@takes_options(without=("softcap",))
def sdpa(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    *,
    return_lse=False,
    **options,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """SDPA on tensors under this project's conventions (see the module docstring).

    Shapes: query ``(B, Hq, Tq, D)`` or ``(Tq, D)``, key ``(B, Hkv, Tk, D)``, value
    ``(B, Hkv, Tk, Dv)`` -> ``(B, Hq, Tq, Dv)``; with ``return_lse`` also the rows' ``lse``
    (:func:`cpu_lse`). Whatever SDPA raises is passed on (``RuntimeError`` for most shape
    errors).
    """
    mask = options_mask(query, key, options)
    lse = cpu_lse(query, key, value, mask, options["scale"]) if return_lse else None
    key, value, keywords = sdpa_operands(query, key, value, mask, options)
    out = F.scaled_dot_product_attention(query, key, value, is_causal=False, **keywords)
    return (out, lse) if return_lse else out


@takes_options(without=("softcap",))
def attention(
    query,
    key,
    value,
    *,
    return_lse=False,
    **options,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Scaled dot-product attention through ``torch.nn.functional.scaled_dot_product_attention``.

    Args:
        query: ``(B, Hq, Tq, D)`` or ``(Tq, D)``; bfloat16, float16, float32 or float64 NumPy array.
        key: ``(B, Hkv, Tk, D)`` or ``(Tk, D)``, same dtype; value: ``(B, Hkv, Tk, Dv)``.
        the keyword options of :mod:`oracle.rules.options` but ``softcap`` (SDPA has no
            cap): the window, documents and chunks become an explicit mask
            (:func:`_torch_masks.window_mask`, :func:`_torch_masks.packing_mask`), ALiBi joins the float mask
            (:func:`sdpa_mask`), a sink is one more key (:func:`with_sink_key`).
        return_lse: also return each row's log-sum-exp (:func:`cpu_lse`).

    Returns:
        ``(B, Hq, Tq, Dv)`` (or ``(Tq, Dv)``), the input dtype; with ``return_lse`` the pair
        ``(output, lse)``.

    Raises:
        Whatever SDPA raises (mostly ``RuntimeError``); no input validation of its own
        (declared ``validates_inputs=False``). A fully masked row gives zeros.
    """
    q, k, v = to_tensor(query), to_tensor(key), to_tensor(value)
    out = sdpa(q, k, v, return_lse=return_lse, **options)
    if return_lse:
        return to_numpy(out[0]), to_numpy(out[1])
    return to_numpy(out)


@takes_options(without=("softcap",))
def attention_weights(query, key, **options) -> np.ndarray:
    """Attention weights ``(B, Hq, Tq, Tk)`` (or ``(Tq, Tk)``), computed by SDPA.

    SDPA does not return its weights; with the identity as value matrix its output *is* the
    weights (``w @ I = w`` exactly). Arguments as :func:`attention`; same dtype and errors.
    """
    q, k = to_tensor(query), to_tensor(key)
    key_len = k.shape[-2]
    eye = torch.eye(key_len, dtype=k.dtype)  # (Tk, Tk)
    identity = eye if k.ndim == 2 else eye.expand(k.shape[0], k.shape[1], key_len, key_len)
    return to_numpy(sdpa(q, k, identity.contiguous(), **options))


class KVCache(ConcatKVCache):
    """A per-layer K/V cache of torch tensors ``(B, Hkv, T, D)`` / ``(B, Hkv, T, Dv)``
    (:class:`~properties.subjects._concat_cache.ConcatKVCache`: sizes, rules, ``append``).

    dtype: bfloat16, float16, float32 or float64 (NumPy dtype). ``keys``/``values`` are
    read-only NumPy views of the cached tensors; ``append`` stores copies (``torch.cat``
    allocates).
    """

    def _empty(self, shape):
        return torch.empty(shape, dtype=torch_dtype(self.dtype))

    def _concat(self, past, new):
        return torch.cat([past, to_tensor(new)], dim=2)

    def _view(self, t):
        # The flag is cleared on the array torch gives, before any bfloat16 view of it: a
        # view whose base is writable can have its flag set back.
        view = t.view(torch.int16).numpy() if t.dtype == torch.bfloat16 else t.numpy()
        view.flags.writeable = False
        return view.view(BFLOAT16) if t.dtype == torch.bfloat16 else view


@takes_options(only=CACHED_OPTIONS)
def cached_attention(query, key, value, cache: KVCache, **options) -> np.ndarray:
    """Append ``key``/``value`` to ``cache``, then SDPA over the whole cache.

    Args:
        query: ``(B, Hq, Tnew, D)``, one query per appended token.
        key: ``(B, Hkv, Tnew, D)``; value: ``(B, Hkv, Tnew, Dv)``; the cache's dtype.
        cache: a :class:`KVCache` (modified in place).
        the options of :data:`oracle.rules.CACHED_OPTIONS`: ``attn_mask`` ``None`` or a
            mask broadcastable to ``(B, Hq, Tnew, T_total)``; ``scale``, ``window``, ``sinks``
            as in :func:`attention`.

    Returns:
        ``(B, Hq, Tnew, Dv)``: causal attention with ``query_start`` = the cache length before
        the append (query ``i`` sees positions ``0 .. start + i``), passed to SDPA as an
        explicit bool mask.

    Raises:
        oracle.rules.AttentionInputError (a ValueError) for a cache that is not a
        :class:`KVCache`, or when the query and the new keys differ in length; whatever the
        append or SDPA raise; the cache is then exactly as before.
    """
    query = np.asarray(query)
    check_cache_instance(cache, KVCache)  # another object has none of its tensors to roll back
    check_cached_query(query, key, cache)
    with appended(cache, key, value) as start:
        out = sdpa(
            to_tensor(query),
            cache._keys,
            cache._values,
            is_causal=True,
            query_start=start,
            **options,
        )
    return to_numpy(out)


def kv_cache_bytes(*, num_layers, batch, tokens, num_kv_heads, head_dim, dtype) -> int:
    """K/V cache payload in bytes: ``2 * layers * batch * tokens * Hkv * head_dim *
    element_size`` with torch's ``element_size`` for ``dtype`` (a NumPy dtype or its name).

    Raises ValueError for a size that is not an int >= 1, TypeError for another dtype.
    Source: Pope et al. 2022, "Efficiently Scaling Transformer Inference" (the 2 is K and V).
    """
    elements = kv_cache_elements(num_layers, batch, tokens, num_kv_heads, head_dim)
    return elements * torch.empty((), dtype=torch_dtype(dtype)).element_size()
