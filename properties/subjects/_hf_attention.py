"""What the two Hugging Face transformers subjects share (``hf_sdpa_attention``,
``hf_eager_attention``): the stand-in attention module, the masks built by transformers' own
builders, the ``DynamicCache`` and the NumPy <-> torch crossing. Not a subject itself (it
has no ``attention``); each subject binds one transformers attention function to
:class:`HFAttention`.

Install: ``pip install transformers torch`` (from a clone, the extra: ``pip install -e
.[hf]``). Checked against transformers 5.24.0 and torch 2.13.0+cpu; the files named below
are that release's (``transformers/masking_utils.py``, ``transformers/cache_utils.py``,
``transformers/integrations/sdpa_attention.py``,
``transformers/models/llama/modeling_llama.py``).

How a model calls its attention function, and how the adapter does the same (the masks a
model builds for it, and how the adapter builds them: :mod:`._hf_masks`):

- ``LlamaAttention.forward`` projects the hidden states to query ``(B, Hq, Tq, D)``, key and
  value ``(B, Hkv, Tk, D)``, updates the cache (``cache.update(k, v, layer_idx)`` returns the
  whole cached K/V) and calls ``attention_interface(self, query, key, value, attention_mask,
  dropout=0.0, scaling=self.scaling)``, where ``self.scaling = head_dim ** -0.5``. The
  function reads ``module.num_key_value_groups`` (``Hq // Hkv``), ``module.is_causal``
  (``True`` in a decoder) and ``module.training``; it returns ``(output (B, Tq, Hq, Dv),
  weights or None)``. The adapter's module is a :class:`types.SimpleNamespace` with exactly
  those attributes (``training=False``, so dropout is off), plus ``config`` and ``scaling``.
  ``scale=None`` is passed as ``D ** -0.5``, the model's ``scaling``.
- GQA: both functions map query head ``h`` to K/V head ``h // (Hq // Hkv)`` (``repeat_kv``
  repeats each K/V head ``G`` times in a row; SDPA's ``enable_gqa`` and ``pack_gqa`` keep the
  same grouping): this project's convention.
- 2-D ``(T, D)`` inputs are one head of one batch: given two leading axes of 1.
- Inputs cross to torch as copies (:func:`_torch_masks.to_tensor`, bfloat16 bit for bit) and
  the output ``(B, Tq, Hq, Dv)`` is transposed back to ``(B, Hq, Tq, Dv)``.
"""

from __future__ import annotations

import types

import numpy as np
import torch
import transformers  # missing: load_subject's hint names the ``hf`` extra

from attnprops.oracle.rules import check_cache_append
from attnprops.oracle.rules import check_cache_instance
from attnprops.oracle.rules import check_cached_query
from attnprops.oracle.rules import takes_options
from attnprops.properties.subjects._hf_cache import KVCache
from attnprops.properties.subjects._hf_masks import build_mask
from attnprops.properties.subjects._hf_masks import layer_config
from attnprops.properties.subjects._hf_masks import model_mask
from attnprops.properties.subjects._hf_masks import within_int64
from attnprops.properties.subjects._torch_masks import to_numpy
from attnprops.properties.subjects._torch_masks import to_tensor

__version__ = f"transformers {transformers.__version__}, torch {torch.__version__}"

# The options of oracle.rules.options a Llama-style layer serves (its window is the model's
# sliding_window, passed apart: see attention).
LAYER_OPTIONS = ("attn_mask", "is_causal", "query_start", "scale")


class HFAttention:
    """One transformers attention function called as a Llama layer calls it.

    Args:
        implementation: ``"sdpa"`` or ``"eager"``: ``config._attn_implementation``, which
            selects the mask builder (``sdpa_mask`` / ``eager_mask``).
        forward: the attention function, ``forward(module, query, key, value,
            attention_mask, scaling=..., dropout=0.0) -> (output (B, Tq, Hq, Dv), weights)``.
    """

    def __init__(self, implementation: str, forward):
        self.implementation = implementation
        self.forward = forward

    # --- calls ------------------------------------------------------------------------------

    def _call(self, query, key, value, mask, *, scale, is_causal, config):
        """``forward`` with the stand-in module on tensors query ``(B, Hq, Tq, D)``, key
        ``(B, Hkv, Tk, D)``, value ``(B, Hkv, Tk, Dv)``; returns ``(output (B, Hq, Tq, Dv),
        weights (B, Hq, Tq, Tk) or None)``. Whatever ``forward`` raises is passed on."""
        Hq, Hkv, D = query.shape[1], key.shape[1], query.shape[-1]
        module = types.SimpleNamespace(
            num_key_value_groups=Hq // Hkv,
            is_causal=bool(is_causal),
            training=False,
            config=config,
            scaling=D**-0.5 if scale is None else float(scale),
            layer_idx=0,
            head_dim=D,
        )
        out, weights = self.forward(
            module, query, key, value, mask, scaling=module.scaling, dropout=0.0
        )
        return out.transpose(1, 2), weights

    @takes_options(only=LAYER_OPTIONS)
    def tensors(self, query, key, value, *, sliding_window=None, **options):
        """The call on NumPy inputs (arguments as :meth:`attention`): ``(output (B, Hq, Tq,
        Dv), weights (B, Hq, Tq, Tk) or None)`` as tensors in the input dtype, 2-D inputs given
        two leading axes (removed again by the callers). Raises as :meth:`attention`."""
        q, k, v = to_tensor(query), to_tensor(key), to_tensor(value)
        if q.ndim == 2:
            q, k, v = q[None, None], k[None, None], v[None, None]
        B, Hq, Tq, D = q.shape
        Hkv, Tk = k.shape[1], k.shape[2]
        config = layer_config(self.implementation, Hq, Hkv, D, sliding_window)
        is_causal = options["is_causal"]
        mask = build_mask(
            self.implementation,
            config,
            options["attn_mask"],
            q.dtype,
            batch=B,
            is_causal=is_causal,
            query_start=options["query_start"],
            query_len=Tq,
            key_len=Tk,
            sliding_window=sliding_window,
        )
        return self._call(q, k, v, mask, scale=options["scale"], is_causal=is_causal, config=config)

    @takes_options(only=LAYER_OPTIONS)
    def attention(self, query, key, value, *, sliding_window=None, **options) -> np.ndarray:
        """Attention through the transformers function, called as a Llama layer calls it.

        Args:
            query: ``(B, Hq, Tq, D)`` or ``(Tq, D)``; bfloat16, float16, float32 or float64.
            key: ``(B, Hkv, Tk, D)`` or ``(Tk, D)``, same dtype; value ``(B, Hkv, Tk, Dv)``.
            attn_mask, is_causal, query_start, scale: the keyword options of
                :mod:`oracle.rules.options` that the function serves. A key-only bool
                ``attn_mask`` becomes the model's 2-D ``attention_mask``, any other is joined
                to the builder's mask (:mod:`._hf_masks`); ``is_causal`` is HF's
                ``causal_mask_function`` at ``q_offset = query_start``; ``scale=None`` is the
                model's ``head_dim ** -0.5``.
            sliding_window: Hugging Face's ``W`` (``W`` keys counting the query's own), with
                ``is_causal`` only.

        Returns:
            ``(B, Hq, Tq, Dv)`` (``(Tq, Dv)`` for 2-D inputs) in the input dtype.

        Raises:
            ValueError for ``sliding_window`` without ``is_causal``; otherwise whatever torch
            and transformers raise (no validation of its own: ``validates_inputs=False``).
        """
        out, _ = self.tensors(query, key, value, sliding_window=sliding_window, **options)
        out = to_numpy(out)
        return out[0, 0] if np.ndim(query) == 2 else out

    def attention_weights(self, query, key, **options) -> np.ndarray:
        """The weights the function returns (``output_attentions``): ``(B, Hq, Tq, Tk)`` (or
        ``(Tq, Tk)``), the input dtype. Arguments, errors as :meth:`attention`; the values
        are zeros ``(..., Tk, 1)`` (the weights do not depend on them)."""
        key_array = np.asarray(key)
        value = np.zeros(key_array.shape[:-1] + (1,), key_array.dtype)
        _, weights = self.tensors(query, key_array, value, **options)
        if weights is None:
            raise TypeError(f"{self.implementation} attention returns no weights")
        weights = to_numpy(weights)
        return weights[0, 0] if np.ndim(query) == 2 else weights

    def cached_attention(
        self, query, key, value, cache, *, attn_mask=None, scale=None, sliding_window=None
    ) -> np.ndarray:
        """One forward step of a model through its ``DynamicCache``: the mask from
        ``create_causal_mask`` (``create_sliding_window_causal_mask`` with
        ``sliding_window``) over the cache as it is, then ``cache.update(key, value, 0)``,
        then the attention function over the whole cache.

        Args:
            query: ``(B, Hq, Tnew, D)``, one query per appended token.
            key: ``(B, Hkv, Tnew, D)``; value: ``(B, Hkv, Tnew, Dv)``; the cache's dtype.
            cache: a :class:`KVCache` (modified in place).
            attn_mask: ``None`` or a mask broadcastable to ``(B, Hq, Tnew, T_total)``, ``T_total``
                the keys attended (a rolling cache: the positions it held, then the new
                ones, as impl's): a key-only bool mask is the model's 2-D ``attention_mask``
                (over every position a rolling cache has seen, the dropped ones True), any
                other is joined to the causal one (:mod:`._hf_masks`).
            scale, sliding_window: as in :meth:`attention`.

        Returns:
            ``(B, Hq, Tnew, Dv)``, the cache's dtype: query ``i`` at position ``start + i``
            (``start`` = the cache length before the append).

        Raises:
            oracle.rules.AttentionInputError (a ValueError) for another implementation's
            cache, when the query and the new keys differ in length, the append is invalid
            or a rolling cache cannot serve the window (no ``sliding_window``, or ``W - 1``
            past its capacity: the rulebook's cache and serving checks, as ``torch_sdpa``'s
            cache and impl's), and whatever transformers and torch raise; the cache is
            then as before (its layers' states restored: ``DynamicSlidingWindowLayer.crop``
            cannot roll back past the window).
        """
        query = np.asarray(query)
        check_cache_instance(cache, KVCache)  # another object has no DynamicCache
        check_cached_query(query, key, cache)
        start = len(cache)  # positions before the new ones, of which a rolling cache holds some
        held = cache.held(sliding_window)
        key, value = check_cache_append(cache, key, value)
        q, k, v = to_tensor(query), to_tensor(key), to_tensor(value)
        B, Hq, Tnew, D = q.shape
        config = layer_config(self.implementation, Hq, k.shape[1], D, sliding_window)
        if sliding_window is not None:
            config.sliding_window = within_int64(sliding_window, start + Tnew)
        mask = model_mask(
            self.implementation,
            config,
            attn_mask,
            q.dtype,
            cache=cache.dynamic,
            batch=B,
            start=start,
            held=held,
            new=Tnew,
        )
        with cache.updated(k, v) as (keys, values):
            out, _ = self._call(q, keys, values, mask, scale=scale, is_causal=True, config=config)
        return to_numpy(out)
