"""The ``attention_mask`` a Hugging Face model hands its attention function, built by
transformers' own mask builders, for the two HF subjects (:mod:`._hf_attention`): for a
stateless call (:func:`build_mask`) and for one step through a ``DynamicCache``
(:func:`model_mask`), the caller's own mask joined to it (:func:`join`).

Checked against transformers 5.24.0 and torch 2.13.0+cpu (``transformers/masking_utils.py``,
``transformers/integrations/sdpa_attention.py``, ``transformers/models/llama/modeling_llama.py``).

- ``LlamaModel.forward`` builds the mask *before* the layers run, with
  ``create_causal_mask(config, inputs_embeds, attention_mask, cache, position_ids)``: the
  cache still holds only the past tokens, so ``q_offset = cache.get_query_offset(0)`` (the
  past length; transformers 5.24 has no ``cache_position`` argument any more) and
  ``kv_length = past + Tq``. It dispatches on ``config._attn_implementation`` to
  ``masking_utils.sdpa_mask`` (bool ``(B, 1, Tq, Tk)``, True = attend, or ``None`` when SDPA's
  own ``is_causal`` can be used instead: ``_ignore_causal_mask_sdpa``) or
  ``masking_utils.eager_mask`` (the same bool mask as an additive float mask in the
  embeddings' dtype: 0 = attend, ``torch.finfo(dtype).min`` = hidden; never ``-inf``).
  :func:`model_mask` does exactly this with a ``DynamicCache`` (for
  :meth:`~._hf_attention.HFAttention.cached_attention`).
- For the stateless :meth:`~._hf_attention.HFAttention.attention`, :func:`build_mask` calls
  the same mask function through ``ALL_MASK_ATTENTION_FUNCTIONS[config._attn_implementation]``
  with the arguments
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
"""

from __future__ import annotations

import torch
from transformers import PreTrainedConfig
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
from transformers.masking_utils import bidirectional_mask_function
from transformers.masking_utils import causal_mask_function
from transformers.masking_utils import create_causal_mask
from transformers.masking_utils import create_sliding_window_causal_mask
from transformers.masking_utils import sliding_window_causal_mask_function

from attnprops.oracle.rules import check_positive_int
from attnprops.properties.subjects._torch_masks import first_position
from attnprops.properties.subjects._torch_masks import to_tensor

__all__ = ["build_mask", "join", "key_padding", "layer_config", "model_mask", "within_int64"]


def four_d(mask: torch.Tensor) -> torch.Tensor:
    """``mask`` with leading axes of 1 up to 4-D (NumPy's broadcasting)."""
    return mask.reshape((1,) * (4 - mask.ndim) + tuple(mask.shape))


def layer_config(implementation: str, Hq: int, Hkv: int, D: int, sliding_window=None):
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


def within_int64(sliding_window, reach: int) -> int:
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
    full = four_d(mask)
    if full.shape[1] != 1 or full.shape[2] != 1:
        return None
    return full[:, 0, 0, :].expand(batch, key_len).contiguous()


def join(implementation: str, positions, user, dtype):
    """The builder's positional mask (bool ``(B, 1, Tq, Tk)``, or the additive eager mask)
    joined to the caller's mask (bool or float, 4-D) as HF's functions accept a
    prepared mask (module docstring); ``implementation``: ``"sdpa"`` or ``"eager"``."""
    if positions is not None and positions.dtype != torch.bool:  # eager: 0 / min
        positions = positions == 0
    if user.dtype == torch.bool and implementation == "sdpa":
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
    implementation: str,
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
        config: the call's ``PreTrainedConfig`` (:func:`layer_config`).
        attn_mask: the caller's mask (NumPy, bool or float, broadcastable to ``(B, Hq,
            Tq, Tk)``) or None.
        dtype: the query's torch dtype (eager's additive mask and a joined float mask).
        batch, query_len, key_len: ``B``, ``Tq``, ``Tk``.
        is_causal, query_start, sliding_window: as in
            :meth:`~._hf_attention.HFAttention.attention`.

    Returns:
        ``None``, bool ``(B, 1, Tq, Tk)`` (sdpa), additive ``(B, 1, Tq, Tk)`` in ``dtype``
        (eager), the caller's 4-D mask joined to the positional one (broadcast shape), or
        an integer mask as it was given.

    Raises:
        ValueError: ``sliding_window`` without ``is_causal``.
    """
    user = None if attn_mask is None else four_d(to_tensor(attn_mask))
    padding = key_padding(user, batch, key_len)
    builder = ALL_MASK_ATTENTION_FUNCTIONS[implementation]
    if sliding_window is not None:
        if not is_causal:
            raise ValueError("sliding_window: Hugging Face's sliding window is causal only")
        sliding_window = within_int64(sliding_window, query_len + key_len)
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
    return join(implementation, positions, user, dtype) if joined else positions


def model_mask(
    implementation: str,
    config,
    attn_mask,
    dtype,
    *,
    cache,
    batch: int,
    start: int,
    held: int,
    new: int,
):
    """The ``attention_mask`` ``LlamaModel.forward`` builds for one step through ``cache``
    (module docstring): ``create_causal_mask`` (``create_sliding_window_causal_mask`` when
    ``config.sliding_window`` is set) over the cache as it is, before ``cache.update``, the caller's mask
    joined to it as :func:`build_mask` joins it.

    Args:
        implementation: ``"sdpa"`` or ``"eager"``.
        config: the call's ``PreTrainedConfig`` (:func:`layer_config`), its
            ``sliding_window`` already the one to apply (:func:`within_int64`).
        attn_mask: the caller's mask (NumPy, bool or float, broadcastable to ``(B, Hq, new,
            held + new)``) or None: a key-only bool mask becomes the model's 2-D
            ``attention_mask`` over every position seen (the ones a rolling cache dropped:
            True).
        dtype: the query's torch dtype.
        cache: the ``DynamicCache`` before the append.
        batch: ``B``; start: the positions seen before the step; held: the ones the cache
            holds (``start`` but for a rolling cache); new: the step's positions.

    Returns:
        As :func:`build_mask`. Raises nothing of its own.
    """
    user = None if attn_mask is None else four_d(to_tensor(attn_mask))
    padding = key_padding(user, batch, held + new)  # the keys attended: held, then new
    if padding is not None and held < start:  # a model's 2-D mask covers every position
        padding = torch.cat([torch.ones((batch, start - held), dtype=torch.bool), padding], 1)
    joined = user is not None and padding is None
    if joined and not (user.dtype == torch.bool or user.is_floating_point()):
        return user  # an integer mask, handed over as it is (see build_mask)
    sliding = config.sliding_window is not None
    builder = create_sliding_window_causal_mask if sliding else create_causal_mask
    positions = builder(
        config=config,
        inputs_embeds=torch.zeros((batch, new, config.hidden_size), dtype=dtype),
        attention_mask=padding,
        cache=cache,
        position_ids=(torch.arange(new) + start)[None],
        allow_is_causal_skip=not joined,
    )
    return join(implementation, positions, user, dtype) if joined else positions
