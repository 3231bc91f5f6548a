r"""Subject: SDPA's FlashAttention-2 CUDA kernel (``SDPBackend.FLASH_ATTENTION``, Dao 2023),
with the memory-efficient kernel for the calls flash cannot take.

Needs torch with CUDA and a CUDA device (there is none in CI: this subject is for a machine
that has one; importing it elsewhere raises ``SubjectError``). Run:
``attnprops check --impl attnprops.properties.subjects.torch_sdpa_cuda_flash``.

The flash kernel takes float16 and bfloat16 only, ``D == Dv`` up to 256, and no
``attn_mask``: its causal modes are built in. Every call runs inside
``sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION])``, so SDPA picks
flash whenever flash can take the call, as it does by default, and the memory-efficient
kernel otherwise (:mod:`torch_sdpa_cuda_efficient` tests that one alone). Flash therefore
runs every call without a mask: no causality, or causality as its only visibility rule at
``query_start`` 0 (``is_causal=True``), ``Tk - Tq`` (``causal_lower_right``, the bottom-right
alignment of FlashAttention >= 2.1) or past the last key (:mod:`._sdpa_cuda`); every other
call (a mask, a window, documents, chunks, ALiBi, sinks, another ``query_start``, ``Dv !=
D``) runs the memory-efficient kernel with :mod:`torch_sdpa`'s explicit masks.

Declared (:data:`ATTNPROPS_CAPABILITIES`): float16 and bfloat16 only (the flash kernel's
dtypes), computed with float32 scores and accumulators, the unnormalised weights rounded to
the input dtype before the product with the values (``compute_dtypes``,
``rounds_weights``); a fully masked row gives zeros (PyTorch >= 2.5); no
``attention_weights`` and no log-sum-exp. The KV cache is :class:`torch_sdpa.KVCache` (CPU
tensors), attended on the device.
"""

from __future__ import annotations

# __version__, KVCache and kv_cache_bytes are re-exported: the subject's version, cache and sizes
from attnprops.properties.subjects._sdpa_cuda import CAPABILITIES
from attnprops.properties.subjects._sdpa_cuda import SDPBackend
from attnprops.properties.subjects._sdpa_cuda import __version__  # noqa: F401
from attnprops.properties.subjects._sdpa_cuda import subject_functions
from attnprops.properties.subjects.torch_sdpa import KVCache  # noqa: F401
from attnprops.properties.subjects.torch_sdpa import kv_cache_bytes  # noqa: F401

ATTNPROPS_EXPECTED_FAILURES = "torch_sdpa_cuda_flash.xfail.txt"

ATTNPROPS_CAPABILITIES = {**CAPABILITIES, "dtypes": ("bfloat16", "float16")}

_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]  # flash first
attention, cached_attention = subject_functions(
    "cuda", _BACKENDS, lower_right=True, native_gqa=True
)
