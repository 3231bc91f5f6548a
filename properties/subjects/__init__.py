"""Ready-made subjects (adapters) for the property suite.

Each module here is a *subject*: it exposes the API of :mod:`impl` (``attention(query, key,
value, *, attn_mask=None, is_causal=False, query_start=None, scale=None)`` on NumPy arrays in
the shared ``(B, H, T, D)`` layout, optionally ``attention_weights``, ``KVCache``,
``cached_attention`` and ``kv_cache_bytes``) and declares what it lacks in
``ATTNPROPS_CAPABILITIES`` (see :mod:`properties.subject`). Select one with
``attnprops check --impl attnprops.properties.subjects.NAME`` or ``pytest --attn-impl
attnprops.properties.subjects.NAME``.

``oracle_float64``           the 50-digit oracle rounded to float64 (no-false-alarm check)
``torch_sdpa``               ``torch.nn.functional.scaled_dot_product_attention`` (extra ``torch``)
``torch_sdpa_naive_causal``  the same with ``is_causal`` passed straight through: a known-wrong
                             decode loop the suite must kill
``torch_sdpa_cuda_flash``    SDPA's FlashAttention-2 CUDA kernel (memory-efficient where flash
                             cannot take a call); needs a CUDA device
``torch_sdpa_cuda_efficient`` SDPA's memory-efficient CUDA kernel alone; needs a CUDA device
``jax_dot_product_attention`` ``jax.nn.dot_product_attention`` (extra ``jax``)
``hf_sdpa_attention``        Hugging Face transformers' ``sdpa_attention_forward``, called as a
                             Llama layer calls it (extra ``hf``)
``hf_eager_attention``       transformers' Llama ``eager_attention_forward``, likewise (extra ``hf``)

Nothing here is imported by the suite itself: an adapter's third-party import happens only
when it is selected, so a missing extra affects only that subject. :mod:`.probe` prints the
conventions a subject (and the raw library behind it) follows, as observed.
"""
