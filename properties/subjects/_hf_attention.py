"""What the two Hugging Face transformers subjects share (``hf_sdpa_attention``,
``hf_eager_attention``): the stand-in attention module, the masks built by transformers' own
builders, the ``DynamicCache`` and the NumPy <-> torch crossing. Not a subject itself (it
has no ``attention``); each subject binds one transformers attention function to
:class:`HFAttention`.

Checked against transformers 5.24.0 and torch 2.13.0+cpu; the files named below are that
release's (``transformers/masking_utils.py``, ``transformers/cache_utils.py``,
``transformers/integrations/sdpa_attention.py``,
``transformers/models/llama/modeling_llama.py``).

How a model calls its attention function, and how the adapter does the same:

- ``LlamaAttention.forward`` projects the hidden states to query ``(B, Hq, Tq, D)``, key and
  value ``(B, Hkv, Tk, D)``, updates the cache (``cache.update(k, v, layer_idx)`` returns the
  whole cached K/V) and calls ``attention_interface(self, query, key, value, attention_mask,
  dropout=0.0, scaling=self.scaling)``, where ``self.scaling = head_dim ** -0.5``. The
  function reads ``module.num_key_value_groups`` (``Hq // Hkv``), ``module.is_causal``
  (``True`` in a decoder) and ``module.training``; it returns ``(output (B, Tq, Hq, Dv),
  weights or None)``. The adapter's module is a :class:`types.SimpleNamespace` with exactly
  those attributes (``training=False``, so dropout is off), plus ``config`` and ``scaling``.
  ``scale=None`` is passed as ``D ** -0.5``, the model's ``scaling``.
- ``LlamaModel.forward`` builds the mask *before* the layers run, with
  ``create_causal_mask(config, inputs_embeds, attention_mask, cache, position_ids)``: the
  cache still holds only the past tokens, so ``q_offset = cache.get_query_offset(0)`` (the
  past length; transformers 5.24 has no ``cache_position`` argument any more) and
  ``kv_length = past + Tq``. It dispatches on ``config._attn_implementation`` to
  ``masking_utils.sdpa_mask`` (bool ``(B, 1, Tq, Tk)``, True = attend, or ``None`` when SDPA's
  own ``is_causal`` can be used instead: ``_ignore_causal_mask_sdpa``) or
  ``masking_utils.eager_mask`` (the same bool mask as an additive float mask in the
  embeddings' dtype: 0 = attend, ``torch.finfo(dtype).min`` = hidden; never ``-inf``).
  :meth:`HFAttention.cached_attention` does exactly this with a ``DynamicCache``.
- The stateless :meth:`HFAttention.attention` calls the same mask function through
  ``ALL_MASK_ATTENTION_FUNCTIONS[config._attn_implementation]`` with the arguments
  ``create_causal_mask`` passes (``q_offset = query_start``, ``kv_offset = 0``, ``kv_length =
  Tk``, ``mask_function = causal_mask_function``, ``allow_is_causal_skip=True``), so an
  explicit ``query_start`` (a chunk of queries that is not the last one) reaches the builder
  as the query offset a cache would give. Keys past the last query (``query_start + Tq <
  Tk``) exist in a model only as a ``StaticCache``'s unfilled slots, for which
  ``create_causal_mask`` passes ``allow_is_causal_skip=False`` when one token is decoded
  (``cache.is_compileable and q_length == 1``); the adapter passes the same (with ``True``
  there, ``sdpa_mask`` returns ``None`` whatever the offset and the query sees every key:
  finding F7, ``docs/findings.md``). Without ``is_causal`` it is
  ``bidirectional_mask_function`` with ``allow_is_bidirectional_skip=True``, as
  ``create_bidirectional_mask`` calls it, and ``module.is_causal = False`` (an encoder).
- Causal alignment: ``causal_mask_function`` is ``kv_idx <= q_idx`` on absolute indices
  (``q_idx = q_offset + i``), so with the cache's offset it is bottom-right, this project's
  rule. SDPA's own ``is_causal`` (top-left) is used only when the builder returns ``None``;
  ``sdpa_attention_forward`` then passes ``is_causal = q_length > 1`` and, when
  ``kv_length > q_length``, drops the keys past ``q_length`` (the empty ``StaticCache``
  prefill case).
- Sliding window: ``sliding_window=W`` selects ``sliding_window_causal_mask_function(W)``
  (``kv_idx > q_idx - W`` AND causal: ``W`` keys counting the query's own, this project's
  ``window=(W - 1, 0)``) with ``local_size=W``, as ``create_sliding_window_causal_mask``
  calls the builder (with a cache: that function itself, the model's ``config.sliding_window
  = W``). It is causal only; ``sliding_window`` without ``is_causal`` is a ``ValueError``. A
  ``W`` longer than the sequence is passed as one past its length (the same mask: no model
  has a window past int64, whose ``q_idx - W`` torch would wrap).
- Masks of the caller: a bool mask that hides keys only (broadcast over heads and queries,
  this project's key-padding mask) is passed as the 2-D ``attention_mask`` ``(B, Tk)`` a model
  receives (True = attend, HF's polarity too). Any other mask cannot be expressed through
  the builders (their head axis is 1, and a user's float mask has no builder at all); it is
  passed the way HF's attention functions accept a prepared 4-D mask (``create_causal_mask``
  returns a 4-D ``attention_mask`` as it is): the builder's positional mask is materialised
  (``allow_is_causal_skip=False``, HF's own flag for a mask that is combined with another)
  and the caller's mask joined to it: bool AND bool for SDPA; for eager, and for a float
  mask in both, the additive mask ``torch.where(positions, user_mask, finfo(dtype).min)``
  in the query's dtype (``eager_mask``'s hidden value; ``create_position_bias_mask`` in
  ``sdpa_attention.py`` joins a bias to a bool mask the same way). A bool mask for eager
  becomes 0 / ``finfo(dtype).min`` as ``eager_mask`` writes it. A mask of another dtype
  (integers) is handed over as it is, causality not joined, as ``create_causal_mask`` hands
  over any 4-D mask: SDPA rejects it, eager adds it to the scores.
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
from transformers import PreTrainedConfig
from transformers.masking_utils import (
    ALL_MASK_ATTENTION_FUNCTIONS,
    bidirectional_mask_function,
    causal_mask_function,
    create_causal_mask,
    create_sliding_window_causal_mask,
    sliding_window_causal_mask_function,
)

from attnprops.oracle.rules import (
    check_cache_append,
    check_cache_instance,
    check_cached_query,
    check_positive_int,
    takes_options,
)
from attnprops.properties.subjects._hf_cache import KVCache
from attnprops.properties.subjects._torch_masks import (
    first_position,
    to_numpy,
    to_tensor,
)

__version__ = f"transformers {transformers.__version__}, torch {torch.__version__}"

# The options of oracle.rules.options a Llama-style layer serves (its window is the model's
# sliding_window, passed apart: see attention).
LAYER_OPTIONS = ("attn_mask", "is_causal", "query_start", "scale")


def _four_d(mask: torch.Tensor) -> torch.Tensor:
    """``mask`` with leading axes of 1 up to 4-D (NumPy's broadcasting)."""
    return mask.reshape((1,) * (4 - mask.ndim) + tuple(mask.shape))


def _config(implementation: str, Hq: int, Hkv: int, D: int, sliding_window=None):
    """A ``PreTrainedConfig`` with the sizes of the call, ``sliding_window`` and
    ``_attn_implementation`` (``"sdpa"`` or ``"eager"``): what the mask builders read. Not a
    ``LlamaConfig``: that one validates RoPE, which refuses an odd ``head_dim`` (the mask
    builders never read it)."""
    config = PreTrainedConfig(
        hidden_size=Hq * D,
        num_attention_heads=Hq,
        num_key_value_heads=Hkv,
        head_dim=D,
        sliding_window=sliding_window,
    )
    config._attn_implementation = implementation
    return config


def _within_int64(sliding_window, reach: int) -> int:
    """``sliding_window`` (an int >= 1: Hugging Face's ``W``, the keys a query sees counting
    its own), one past ``reach`` (no key is farther than that from a query) when it is
    longer: the same mask, and ``q_idx - W`` stays inside torch's int64 (a window of
    ``2**63`` keys, this project's "every key", would wrap). Raises
    oracle.rules.AttentionInputError (a ValueError) naming ``sliding_window`` for anything
    else (``2.5``, ``"2"``, ``0``: ``int`` would take the first two as 2)."""
    return min(check_positive_int(sliding_window, "sliding_window"), int(reach) + 1)


def key_padding(mask: torch.Tensor | None, batch: int, key_len: int) -> torch.Tensor | None:
    """The caller's bool mask (a tensor broadcastable to ``(B, Hq, Tq, Tk)``) as the 2-D
    ``attention_mask`` ``(B, Tk)`` (bool, True = attend) a model receives, or ``None`` when it
    is not a bool mask that hides keys only (its head and query axes of size 1). Raises
    nothing of its own (``expand`` raises ``RuntimeError`` for a batch that does not
    broadcast)."""
    if mask is None or mask.dtype != torch.bool:
        return None
    full = _four_d(mask)
    if full.shape[1] != 1 or full.shape[2] != 1:
        return None
    return full[:, 0, 0, :].expand(batch, key_len).contiguous()


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

    # --- masks ----------------------------------------------------------------------------

    def _join(self, positions, user, dtype):
        """The builder's positional mask (bool ``(B, 1, Tq, Tk)``, or the additive eager mask)
        joined to the caller's mask (bool or float, 4-D) as HF's functions accept a
        prepared mask (module docstring)."""
        if positions is not None and positions.dtype != torch.bool:  # eager: 0 / min
            positions = positions == 0
        if user.dtype == torch.bool and self.implementation == "sdpa":
            return user if positions is None else positions & user
        minimum = torch.tensor(torch.finfo(dtype).min, dtype=dtype)
        if user.dtype == torch.bool:
            user = torch.where(user, torch.tensor(0.0, dtype=dtype), minimum)
        elif user.dtype != dtype:  # a float mask is not rounded below float32: torch's SDPA
            # takes a float32 mask with 16-bit inputs and eager adds it with type promotion
            user = user.to(torch.promote_types(dtype, torch.float32))
        hidden = minimum.to(user.dtype)  # create_position_bias_mask keeps the bias's dtype
        return user if positions is None else torch.where(positions, user, hidden)

    def build_mask(
        self,
        config,
        attn_mask,
        dtype,
        *,
        batch,
        is_causal,
        query_start,
        query_len,
        key_len,
        sliding_window=None,
    ):
        """The ``attention_mask`` a model would hand the attention function (module docstring).

        Args:
            config: the call's ``PreTrainedConfig`` (:func:`_config`).
            attn_mask: the caller's mask (NumPy, bool or float, broadcastable to ``(B, Hq,
                Tq, Tk)``) or None.
            dtype: the query's torch dtype (eager's additive mask and a joined float mask).
            batch, query_len, key_len: ``B``, ``Tq``, ``Tk``.
            is_causal, query_start, sliding_window: as in :meth:`attention`.

        Returns:
            ``None``, bool ``(B, 1, Tq, Tk)`` (sdpa), additive ``(B, 1, Tq, Tk)`` in ``dtype``
            (eager), the caller's 4-D mask joined to the positional one (broadcast shape), or
            an integer mask as it was given.

        Raises:
            ValueError: ``sliding_window`` without ``is_causal``.
        """
        user = None if attn_mask is None else _four_d(to_tensor(attn_mask))
        padding = key_padding(user, batch, key_len)
        builder = ALL_MASK_ATTENTION_FUNCTIONS[self.implementation]
        if sliding_window is not None:
            if not is_causal:
                raise ValueError("sliding_window: Hugging Face's sliding window is causal only")
            sliding_window = _within_int64(sliding_window, query_len + key_len)
            function = sliding_window_causal_mask_function(sliding_window)
        else:
            function = causal_mask_function if is_causal else bidirectional_mask_function
        if user is not None and not (user.dtype == torch.bool or user.is_floating_point()):
            return user  # an integer mask, handed over as create_causal_mask hands a 4-D one
        joined = user is not None and padding is None
        start = first_position(query_len, key_len, query_start) if is_causal else 0
        # Keys past the last query exist in a model only in a StaticCache (its unfilled
        # slots), for which create_causal_mask turns the skip off when decoding one token
        # (allow_is_causal_skip and not (cache.is_compileable and q_length == 1)).
        static = start + query_len < key_len
        kwargs = dict(
            batch_size=batch,
            q_length=query_len,
            kv_length=key_len,
            q_offset=start,
            kv_offset=0,
            mask_function=function,
            attention_mask=None if joined else padding,
            dtype=dtype,
            config=config,
            use_vmap=False,
            device="cpu",
        )
        if is_causal:
            kwargs["allow_is_causal_skip"] = not joined and not (static and query_len == 1)
            if sliding_window is not None:
                kwargs["local_size"] = int(sliding_window)
        else:
            kwargs["allow_is_causal_skip"] = False
            kwargs["allow_is_bidirectional_skip"] = not joined
        positions = builder(**kwargs)
        return self._join(positions, user, dtype) if joined else positions

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
        config = _config(self.implementation, Hq, Hkv, D, sliding_window)
        is_causal = options["is_causal"]
        mask = self.build_mask(
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
                to the builder's mask (module docstring); ``is_causal`` is HF's
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
                other is joined to the causal one (module docstring).
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
        dynamic = cache.dynamic
        config = _config(self.implementation, Hq, k.shape[1], D, sliding_window)
        embeds = torch.zeros((B, Tnew, Hq * D), dtype=q.dtype)
        position_ids = (torch.arange(Tnew) + start)[None]
        user = None if attn_mask is None else _four_d(to_tensor(attn_mask))
        padding = key_padding(user, B, held + Tnew)  # the keys attended: held, then new
        if padding is not None and held < start:  # a model's 2-D mask covers every position
            padding = torch.cat([torch.ones((B, start - held), dtype=torch.bool), padding], 1)
        if sliding_window is not None:
            sliding_window = _within_int64(sliding_window, start + Tnew)
            config.sliding_window = sliding_window
        builder = (
            create_causal_mask if sliding_window is None else create_sliding_window_causal_mask
        )
        joined = user is not None and padding is None
        if joined and not (user.dtype == torch.bool or user.is_floating_point()):
            mask = user  # an integer mask, handed over as it is (see build_mask)
        else:
            mask = builder(
                config=config,
                inputs_embeds=embeds,
                attention_mask=padding,
                cache=dynamic,
                position_ids=position_ids,
                allow_is_causal_skip=not joined,
            )
        if joined and mask is not user:
            mask = self._join(mask, user, q.dtype)
        with cache.updated(k, v) as (keys, values):
            out, _ = self._call(q, keys, values, mask, scale=scale, is_causal=True, config=config)
        return to_numpy(out)
