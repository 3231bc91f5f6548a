"""Subject: Hugging Face transformers' ``sdpa_attention_forward``
(``transformers/integrations/sdpa_attention.py``), called as a Llama layer calls it.

Run: ``attnprops check --impl attnprops.properties.subjects.hf_sdpa_attention``
(what to install, and the releases checked: :mod:`._hf_attention`).

The call is the model's (the stand-in module, the masks of ``masking_utils.sdpa_mask`` /
``create_causal_mask``, the ``DynamicCache``; every mapping is in the docstring of
:mod:`._hf_attention`, shared with ``hf_eager_attention``). What is particular to SDPA:

- Mask: ``sdpa_mask`` returns a bool ``(B, 1, Tq, Tk)`` mask, True = attend (this project's
  polarity), or ``None`` when ``_ignore_causal_mask_sdpa`` finds that SDPA's own
  ``is_causal`` will do: no padding and ``Tq == 1`` or ``Tq == Tk``, or ``q_offset == 0``.
  ``sdpa_attention_forward`` then passes ``is_causal = Tq > 1`` (top-left, right for
  ``Tq == Tk``) and, when ``Tk > Tq``, keeps only the first ``Tq`` keys. SDPA turns a
  hidden key into ``-inf``, so a fully masked row gives zeros (PyTorch >= 2.5), declared
  ``fully_masked_rows="zeros"``. A caller's float mask is passed as a 4-D additive mask in
  the query's dtype (HF's functions accept a prepared 4-D mask), its causal positions
  hidden with ``torch.finfo(dtype).min``, as ``create_position_bias_mask`` does.
- GQA: with no mask and ``D == Dv <= 256`` SDPA's ``enable_gqa``; with a mask and one query,
  ``pack_gqa`` (the ``G`` query heads of a K/V head become ``G`` query rows of one head);
  otherwise ``repeat_kv``. All three read K/V head ``h // G``.
- Arithmetic: torch SDPA's CPU kernels (see ``torch_sdpa``): float16 and bfloat16 computed in
  float32, the unnormalised weights rounded to the input dtype before ``P @ V``. The
  function returns no weights (``(output, None)``): ``weights`` is not declared.

Declared: no input validation (``validates_inputs=False``: the function checks nothing),
fully masked rows give zeros, HF's ``sliding_window`` convention (``W`` keys), a KV cache
(transformers' ``DynamicCache``) and a rolling cache (its ``DynamicSlidingWindowLayer``).
Not declared: documents, chunks, ALiBi, soft-capping (``sdpa_attention_forward`` raises for
``softcap``), sinks, ``lse``.
"""

from __future__ import annotations

from transformers.integrations.sdpa_attention import sdpa_attention_forward

from attnprops.properties.subjects._hf_attention import HFAttention
from attnprops.properties.subjects._hf_attention import __version__
from attnprops.properties.subjects._hf_cache import KVCache
from attnprops.properties.subjects._hf_cache import RollingKVCache

__all__ = ["KVCache", "RollingKVCache", "attention", "cached_attention", "__version__"]

ATTNPROPS_EXPECTED_FAILURES = "hf_sdpa_attention.xfail.txt"  # docs/findings.md

ATTNPROPS_CAPABILITIES = {
    "dtypes": ("bfloat16", "float16", "float32", "float64"),
    "validates_inputs": False,
    "fully_masked_rows": "zeros",
    "weights": False,  # sdpa_attention_forward returns (output, None)
    # torch SDPA's CPU flash kernel: accum_t = float for reduced types, exp(s - m) written
    # to the reduced-type buffer before P @ V (as torch_sdpa declares)
    "compute_dtypes": {"float16": "float32", "bfloat16": "float32"},
    "rounds_weights": True,
    "window": "sliding_window",  # masking_utils.sliding_window_causal_mask_function
    "rolling_cache": True,  # RollingKVCache: a DynamicSlidingWindowLayer
}

_SDPA = HFAttention("sdpa", sdpa_attention_forward)
attention = _SDPA.attention
cached_attention = _SDPA.cached_attention
