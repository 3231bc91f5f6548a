"""Subject: SDPA with ``is_causal`` passed straight through -- a known-wrong adapter.

This is the mistake many decode loops make::

    k_all = torch.cat([k_cache, k_new], dim=2)
    out = F.scaled_dot_product_attention(q_new, k_all, v_all, is_causal=True)  # wrong

PyTorch's ``is_causal`` is *top-left* aligned: query ``i`` sees keys ``0..i`` whatever
``Tk``. A decode step (``Tq = 1``) then sees key 0 only, instead of every cached key; a
prefill chunk at ``query_start > 0`` loses its prefix. Nothing crashes and shapes are right.
The property suite must kill this subject (``attnprops check --impl
attnprops.properties.subjects.torch_sdpa_naive_causal`` fails; ``ci`` and the guide show the shrunk
counterexample). It is identical to :mod:`properties.subjects.torch_sdpa` except:

- ``attention``/``attention_weights`` ignore ``query_start`` and pass ``is_causal`` to SDPA;
  SDPA refuses a mask together with ``is_causal``, so then the mask is AND-ed with
  ``tril(ones(Tq, Tk))``, PyTorch's own ``is_causal`` mask (the same top-left alignment);
- ``cached_attention`` calls SDPA over the whole cache with ``is_causal=True``.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from attnprops.oracle.rules import check_cache_instance
from attnprops.properties.subjects._concat_cache import appended
from attnprops.properties.subjects._torch_masks import sdpa_mask
from attnprops.properties.subjects._torch_masks import to_numpy
from attnprops.properties.subjects._torch_masks import to_tensor
from attnprops.properties.subjects.torch_sdpa import KVCache
from attnprops.properties.subjects.torch_sdpa import kv_cache_bytes

__version__ = torch.__version__

ATTNPROPS_CAPABILITIES = {
    "dtypes": ("float16", "float32", "float64"),
    "validates_inputs": False,
    "fully_masked_rows": "zeros",
}

__all__ = ["KVCache", "attention", "attention_weights", "cached_attention", "kv_cache_bytes"]


def _naive_sdpa(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    *,
    attn_mask=None,
    is_causal=False,
    scale=None,
) -> torch.Tensor:
    """SDPA with PyTorch's own (top-left) ``is_causal``; ``query_start`` is never used."""
    scale = None if scale is None else float(scale)
    gqa = query.ndim == 4 and key.ndim == 4 and query.shape[1] != key.shape[1]
    if attn_mask is None:
        return F.scaled_dot_product_attention(
            query, key, value, is_causal=is_causal, scale=scale, enable_gqa=gqa
        )
    # PyTorch's is_causal mask is tril(ones(Tq, Tk)), i.e. query_start=0.
    mask = sdpa_mask(
        attn_mask,
        query.dtype,
        is_causal=is_causal,
        query_start=0,
        query_len=query.shape[-2],
        key_len=key.shape[-2],
    )
    return F.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, scale=scale, enable_gqa=gqa
    )


def attention(
    query, key, value, *, attn_mask=None, is_causal=False, query_start=None, scale=None
) -> np.ndarray:
    """SDPA with ``is_causal`` passed through and ``query_start`` ignored (WRONG when
    ``Tq != Tk`` or ``query_start != Tk - Tq``). Shapes, dtypes and errors as
    :func:`properties.subjects.torch_sdpa.attention`."""
    out = _naive_sdpa(
        to_tensor(query),
        to_tensor(key),
        to_tensor(value),
        attn_mask=attn_mask,
        is_causal=is_causal,
        scale=scale,
    )
    return to_numpy(out)


def attention_weights(
    query, key, *, attn_mask=None, is_causal=False, query_start=None, scale=None
) -> np.ndarray:
    """Weights ``(B, Hq, Tq, Tk)`` from SDPA on an identity value matrix, with the same
    top-left causal mistake as :func:`attention`."""
    k = to_tensor(key)
    key_len = k.shape[-2]
    eye = torch.eye(key_len, dtype=k.dtype)
    identity = eye if k.ndim == 2 else eye.expand(k.shape[0], k.shape[1], key_len, key_len)
    out = _naive_sdpa(
        to_tensor(query),
        k,
        identity.contiguous(),
        attn_mask=attn_mask,
        is_causal=is_causal,
        scale=scale,
    )
    return to_numpy(out)


def cached_attention(
    query, key, value, cache: KVCache, *, attn_mask=None, scale=None
) -> np.ndarray:
    """Append to ``cache``, then ``SDPA(q_new, k_all, v_all, is_causal=True)`` -- the decode
    loop bug: query ``i`` of the new block sees cached keys ``0..i`` only. Shapes as
    :func:`properties.subjects.torch_sdpa.cached_attention`; refuses another cache class and
    rolls back on error."""
    check_cache_instance(cache, KVCache)
    with appended(cache, key, value):
        out = _naive_sdpa(
            to_tensor(query),
            cache._keys,
            cache._values,
            attn_mask=attn_mask,
            is_causal=True,
            scale=scale,
        )
    return to_numpy(out)
