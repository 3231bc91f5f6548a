"""Subject: Hugging Face transformers' eager attention, ``eager_attention_forward`` of the
Llama model (``transformers/models/llama/modeling_llama.py``), called as ``LlamaAttention``
calls it.

Run: ``attnprops check --impl attnprops.properties.subjects.hf_eager_attention``
(what to install, and the releases checked: :mod:`._hf_attention`).

The call is the model's (the stand-in module, the masks of ``masking_utils.eager_mask`` /
``create_causal_mask``, the ``DynamicCache``; every mapping is in the docstring of
:mod:`._hf_attention`, shared with ``hf_sdpa_attention``). What is particular to eager:

- The function: ``key_states = repeat_kv(key, G)`` (query head ``h`` reads K/V head
  ``h // G``), ``attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling``,
  ``+ attention_mask``, ``softmax(..., dim=-1, dtype=torch.float32).to(query.dtype)``,
  ``torch.matmul(attn_weights, value_states)``; it returns ``(output, attn_weights)``.
- Mask: ``eager_mask`` is ``sdpa_mask``'s bool mask as an additive float mask in the
  embeddings' dtype: 0 = attend, ``torch.finfo(dtype).min`` = hidden, never ``-inf`` (the
  same polarity as this project's bool mask once mapped). It is never skipped for a causal
  call. A hidden key's score is ``s + finfo.min``: finite, so a row that hides every key
  gets a softmax over ``s_j + min``, not zeros and not an error; declared
  ``fully_masked_rows="zeros"``, the nearest convention (see the expected-failures file).
  A caller's mask that the builders cannot express is joined as ``torch.where(positions,
  user_mask, finfo(dtype).min)`` in the query's dtype, a bool one as 0 / ``finfo.min``.
- Arithmetic (what ``compute_dtypes`` may claim): the scores ``q k^T``, their scaling and
  the mask's addition are in the input dtype (float16 scores are stored in float16), the
  softmax in float32, the weights rounded back to the input dtype, ``P @ V`` in the input
  dtype. So nothing is declared: every operation is charged the input dtype's unit
  roundoff (the conservative default). For float64 inputs the softmax is float32, which no
  declaration can express (a compute dtype is never less precise than the input): a known
  deviation (``hf_eager_attention.xfail.txt``).
- ``attention_weights`` returns the weights the function returns (what
  ``output_attentions=True`` gives a user), ``(B, Hq, Tq, Tk)`` in the input dtype.

Declared: no input validation (``validates_inputs=False``), HF's ``sliding_window``
convention, a KV cache (transformers' ``DynamicCache``), a rolling cache (its
``DynamicSlidingWindowLayer``), the weights. Not declared:
documents, chunks, ALiBi, soft-capping and sinks (other models' eager functions, Gemma 2's
and gpt-oss's, have them; Llama's does not), ``lse``.
"""

from __future__ import annotations

from transformers.models.llama.modeling_llama import eager_attention_forward

from attnprops.properties.subjects._hf_attention import HFAttention
from attnprops.properties.subjects._hf_attention import __version__
from attnprops.properties.subjects._hf_cache import KVCache
from attnprops.properties.subjects._hf_cache import RollingKVCache

__all__ = [
    "KVCache",
    "RollingKVCache",
    "attention",
    "attention_weights",
    "cached_attention",
    "__version__",
]

ATTNPROPS_EXPECTED_FAILURES = "hf_eager_attention.xfail.txt"  # docs/findings.md

ATTNPROPS_CAPABILITIES = {
    "dtypes": ("bfloat16", "float16", "float32", "float64"),
    "validates_inputs": False,
    "fully_masked_rows": "zeros",  # nearest convention; eager does not follow it
    "weights": True,  # eager_attention_forward returns attn_weights
    "window": "sliding_window",  # masking_utils.sliding_window_causal_mask_function
    "rolling_cache": True,  # RollingKVCache: a DynamicSlidingWindowLayer
}

_EAGER = HFAttention("eager", eager_attention_forward)
attention = _EAGER.attention
attention_weights = _EAGER.attention_weights
cached_attention = _EAGER.cached_attention
