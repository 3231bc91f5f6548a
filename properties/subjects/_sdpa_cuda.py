r"""SDPA on a CUDA device with its kernels pinned: the shared part of
:mod:`torch_sdpa_cuda_flash` and :mod:`torch_sdpa_cuda_efficient`.

Each call builds SDPA's arguments on the CPU exactly as :mod:`torch_sdpa` does (the same
masks, sink key and GQA flag: :func:`torch_sdpa.options_mask`, :func:`torch_sdpa.sdpa_operands`),
moves them to the device, and calls ``F.scaled_dot_product_attention`` inside
``torch.nn.attention.sdpa_kernel(backends)``, so SDPA may pick only those kernels (it raises
``RuntimeError: No available kernel`` when none of them takes the call).

Causality without a mask. FlashAttention takes no ``attn_mask``; its causal modes are built
in. When a call's only visibility rule is causal (no mask, window, documents, chunks, ALiBi or
sinks), the causal rule ``j <= query_start + i`` is passed the way the kernels take it:

- ``query_start >= Tk - 1``: every row sees every key, no mask;
- ``query_start == 0``: ``is_causal=True`` (PyTorch's top-left alignment, ``j <= i``);
- ``query_start == Tk - Tq`` (the default ``None``) and ``lower_right``:
  ``torch.nn.attention.bias.causal_lower_right(Tq, Tk)`` (FlashAttention >= 2.1's and
  PyTorch's bottom-right alignment, ``j <= i + Tk - Tq``). PyTorch dispatches this bias to the
  flash kernel, else to the memory-efficient one, *whatever* ``sdpa_kernel`` allows
  (``torch/nn/attention/bias.py``, ``CausalBias._dispatch``), so only the flash subject uses it;
- any other ``query_start``: the explicit bool mask, as :mod:`torch_sdpa`.

2-D ``(T, D)`` inputs are given two leading axes of 1 (the fused kernels take 4-D only) and
the output loses them again. Head dims are padded to multiples of 8 and K/V heads repeated
for GQA where the kernels need it (:func:`_kernel_operands`). A mask is passed as
row-major ``(Tq, Tk)`` planes: the CUDA kernels refuse a valid mask whose key axis is
broadcast (stride 0) or not the fastest-varying one, which the CPU kernels take
([F13](../../docs/findings.md)). NumPy arrays are copied to the device and back.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend
from torch.nn.attention import sdpa_kernel

from attnprops.oracle.rules import CACHED_OPTIONS
from attnprops.oracle.rules import OPTIONS
from attnprops.oracle.rules import check_cache_instance
from attnprops.oracle.rules import check_cached_query
from attnprops.oracle.rules import takes_options
from attnprops.properties.subject_import import SubjectError
from attnprops.properties.subjects._concat_cache import appended
from attnprops.properties.subjects._torch_masks import first_position
from attnprops.properties.subjects._torch_masks import to_numpy
from attnprops.properties.subjects._torch_masks import to_tensor
from attnprops.properties.subjects.torch_sdpa import KVCache
from attnprops.properties.subjects.torch_sdpa import options_mask
from attnprops.properties.subjects.torch_sdpa import sdpa_operands

__version__ = torch.__version__  # the CUDA subjects' version line
__all__ = [
    "CAPABILITIES",
    "SDPBackend",
    "cached_sdpa",
    "numpy_sdpa",
    "require_cuda",
    "sdpa_on",
    "subject_functions",
]

# What both CUDA subjects declare but their dtypes (their modules' docstrings say why): the
# options go through torch_sdpa's masks and sink key; float16 and bfloat16 take float32
# scores and accumulators, the unnormalised weights rounded to the input dtype before P @ V.
# Not "exp2", though both kernels fold log2 e into the scale: finding F15 is more than that
# model explains, and its worst-case slack would hide it (docs/findings.md).
CAPABILITIES = {
    "validates_inputs": False,
    "fully_masked_rows": "zeros",
    "compute_dtypes": {"float16": "float32", "bfloat16": "float32"},
    "rounds_weights": True,
    "window": "offsets",
    "segment_ids": True,
    "chunk_size": True,
    "alibi": True,
    "sinks": True,
}

# the options that need a mask (or a sink key): with none of them, causality is maskless
_MASKING = ("attn_mask", "window", "segment_ids", "chunk_size", "alibi_slopes", "sinks")


def require_cuda() -> None:
    """Raise :class:`SubjectError` unless torch sees a CUDA device (the CUDA subjects cannot
    run on a machine without one; :mod:`torch_sdpa` is the CPU subject)."""
    if not torch.cuda.is_available():
        raise SubjectError(
            "this subject runs SDPA's CUDA kernels, and torch.cuda.is_available() is False "
            f"(torch {torch.__version__}): use attnprops.properties.subjects.torch_sdpa on the CPU"
        )


def _maskless_causal(query_len: int, key_len: int, query_start, lower_right: bool):
    """The keywords that express causality at ``query_start`` without a mask tensor (module
    docstring), or ``None`` when only an explicit mask can."""
    start = first_position(query_len, key_len, query_start)
    if start >= key_len - 1:
        return {"attn_mask": None, "is_causal": False}
    if start == 0:
        return {"attn_mask": None, "is_causal": True}
    if lower_right and start == key_len - query_len >= 0:  # Tq > Tk: NaN rows (torch warns)
        from torch.nn.attention.bias import causal_lower_right  # imports torch._dynamo: 2 s

        return {"attn_mask": causal_lower_right(query_len, key_len), "is_causal": False}
    return None


def sdpa_on(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    *,
    device: str,
    backends: list[SDPBackend],
    lower_right: bool,
    native_gqa: bool,
    options: dict,
) -> torch.Tensor:
    """SDPA on ``device`` with only ``backends`` allowed, under this project's conventions.

    Args:
        query, key, value: CPU tensors, ``(B, Hq, Tq, D)``, ``(B, Hkv, Tk, D)``, ``(B, Hkv,
            Tk, Dv)`` or 2-D ``(T, D)``.
        device: a torch device (``"cuda"``; the tests use ``"cpu"``).
        backends: the kernels SDPA may pick (``sdpa_kernel``).
        lower_right: express ``query_start == Tk - Tq`` as ``causal_lower_right`` (module
            docstring).
        native_gqa: pass GQA to SDPA (``enable_gqa``) where flash takes the call, instead
            of repeating the K/V heads (:func:`_kernel_operands`).
        options: the complete options dict of :func:`takes_options` (``softcap`` excluded).

    Returns:
        The output on the CPU, ``(B, Hq, Tq, Dv)`` (or ``(Tq, Dv)``), the query's dtype.

    Raises:
        Whatever SDPA raises (``RuntimeError`` when no allowed kernel takes the call).
    """
    two_d = query.ndim == 2
    if two_d:
        query, key, value = query[None, None], key[None, None], value[None, None]
    causal = None
    if options["is_causal"] and all(options[name] is None for name in _MASKING):
        Tq, Tk = query.shape[-2], key.shape[-2]
        causal = _maskless_causal(Tq, Tk, options["query_start"], lower_right)
    mask = None if causal is not None else options_mask(query, key, options)
    key, value, keywords = sdpa_operands(query, key, value, mask, options)
    keywords.update(causal or {"is_causal": False})
    value_dim = value.shape[-1]
    mask = keywords["attn_mask"]
    if _is_mask_tensor(mask):  # row-major (Tq, Tk) planes: F13 (docs/findings.md)
        planes = mask.expand(mask.shape[:-2] + (query.shape[-2], key.shape[-2]))
        keywords["attn_mask"] = planes.contiguous().to(device)
    try:
        out = _call(query, key, value, keywords, device, backends, native_gqa)
    except RuntimeError as error:  # flash refused the call: GQA as repeated heads
        if not (keywords["enable_gqa"] and "No available kernel" in str(error)):
            raise
        out = _call(query, key, value, keywords, device, backends, native_gqa=False)
    out = out[..., :value_dim].cpu()
    return out[0, 0] if two_d else out


def _call(query, key, value, keywords, device, backends, native_gqa) -> torch.Tensor:
    """One SDPA call on ``device`` inside ``sdpa_kernel(backends)``, the operands fitted to
    the fused kernels (:func:`_kernel_operands`)."""
    keywords = dict(keywords)
    query, key, value = _kernel_operands(query, key, value, keywords, native_gqa)
    with sdpa_kernel(backends):
        return F.scaled_dot_product_attention(
            query.to(device), key.to(device), value.to(device), **keywords
        )


def _is_mask_tensor(mask) -> bool:
    """Whether SDPA gets a mask tensor (a ``CausalBias`` is a tensor subclass, but no mask:
    it dispatches to the fused kernels' built-in causal modes)."""
    return type(mask) is torch.Tensor


def _kernel_operands(query, key, value, keywords: dict, native_gqa: bool):
    """The operands as the fused kernels take them (``keywords`` is updated in place).

    - Head dims are padded with zero columns to multiples of 8 (the memory-efficient kernel
      takes only those; flash pads the same way inside SDPA): the zeros change no score and
      no output column that is kept, and the scale is then passed explicitly,
      ``1/sqrt(D)`` of the unpadded ``D`` unless given.
    - GQA: the memory-efficient kernel has no ``enable_gqa``; K/V heads are repeated to the
      query heads (head ``h`` reads K/V head ``h // G``, this project's map) unless
      ``native_gqa`` and the call may be one flash takes (no mask tensor, ``D == Dv``);
      when flash refuses it after all (``No available kernel``), :func:`sdpa_on` calls
      again with the heads repeated.
    """
    D, Dv = query.shape[-1], value.shape[-1]
    if keywords["scale"] is None and D > 0:
        keywords["scale"] = 1.0 / math.sqrt(D)
    flash_takes = not _is_mask_tensor(keywords["attn_mask"]) and D == Dv
    if keywords["enable_gqa"] and not (native_gqa and flash_takes):
        group = query.shape[1] // key.shape[1]
        key = key.repeat_interleave(group, dim=1)
        value = value.repeat_interleave(group, dim=1)
        keywords["enable_gqa"] = False
    pad = lambda x: F.pad(x, (0, -x.shape[-1] % 8))  # noqa: E731
    return pad(query), pad(key), pad(value)


def numpy_sdpa(query, key, value, **kernel) -> np.ndarray:
    """:func:`sdpa_on` on NumPy arrays (copied to tensors and back, bfloat16 bit for bit)."""
    return to_numpy(sdpa_on(to_tensor(query), to_tensor(key), to_tensor(value), **kernel))


def cached_sdpa(query, key, value, cache, *, options: dict, **kernel) -> np.ndarray:
    """Append ``key``/``value`` to ``cache`` (a :class:`torch_sdpa.KVCache`, on the CPU),
    then :func:`sdpa_on` over the whole cache, causal at the cache's length before the append
    (``options``: those of :data:`oracle.rules.CACHED_OPTIONS`; the others take their
    defaults). The cache is exactly as before when SDPA raises."""
    with appended(cache, key, value) as start:
        out = sdpa_on(
            to_tensor(query),
            cache._keys,
            cache._values,
            options={**OPTIONS, **options, "is_causal": True, "query_start": start},
            **kernel,
        )
    return to_numpy(out)


def subject_functions(device: str, backends: list, **kernel):
    """``(attention, cached_attention)`` of a CUDA subject whose calls run :func:`sdpa_on`
    on ``device`` with only ``backends`` allowed, and ``kernel`` (``lower_right``,
    ``native_gqa``). Raises :class:`SubjectError` for ``device="cuda"`` on a machine without
    one (:func:`require_cuda`): the subjects call it at import.

    ``attention(query, key, value, **options)`` takes NumPy arrays in the shapes of
    :func:`torch_sdpa.attention` (``(B, Hq, Tq, D)`` or ``(Tq, D)``; output ``(B, Hq, Tq,
    Dv)``) and every option but ``softcap``; ``cached_attention(query, key, value, cache,
    **options)`` appends to ``cache`` (a :class:`torch_sdpa.KVCache`) and attends over it,
    causal at its length before the append, with the options of
    :data:`oracle.rules.CACHED_OPTIONS`. Both return the input dtype and raise whatever SDPA
    raises (``RuntimeError``); no validation of their own. A failed ``cached_attention``
    leaves the cache as it was (``oracle.rules.AttentionInputError`` for another cache
    object or a query whose length differs from the new keys')."""

    if device == "cuda":
        require_cuda()
    kernel = {"device": device, "backends": backends, **kernel}

    @takes_options(without=("softcap",))
    def attention(query, key, value, **options):
        return numpy_sdpa(query, key, value, options=options, **kernel)

    @takes_options(only=CACHED_OPTIONS)
    def cached_attention(query, key, value, cache: KVCache, **options):
        check_cache_instance(cache, KVCache)
        check_cached_query(query, key, cache)
        return cached_sdpa(query, key, value, cache, options=options, **kernel)

    attention.__doc__ = cached_attention.__doc__ = subject_functions.__doc__
    return attention, cached_attention
