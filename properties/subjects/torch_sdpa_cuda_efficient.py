r"""Subject: SDPA's memory-efficient CUDA kernel (``SDPBackend.EFFICIENT_ATTENTION``, the
xFormers/CUTLASS kernel after Rabe & Staats 2021).

Needs torch with CUDA and a CUDA device (there is none in CI: this subject is for a machine
that has one; importing it elsewhere raises ``SubjectError``). Run:
``attnprops check --impl attnprops.properties.subjects.torch_sdpa_cuda_efficient``.

Every call runs inside ``sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION])``: SDPA may pick no
other kernel, so a call this kernel cannot take raises ``RuntimeError``. The arguments are
:mod:`torch_sdpa`'s (the same conventions, masks, sink key and GQA flag: read its docstring),
built on the CPU and moved to the device (:mod:`._sdpa_cuda`). Causality with no other
visibility rule is ``is_causal=True`` when ``query_start == 0`` and no mask when every key
is visible; any other causal call takes the explicit bool mask (this kernel's additive
``attn_bias``). ``causal_lower_right`` is not used here: PyTorch sends it to the flash kernel
whenever flash can take the call, whatever ``sdpa_kernel`` allows. This kernel takes head dims
that are multiples of 8 only and no ``enable_gqa``: the adapter pads the head dims with zero
columns and repeats the K/V heads (``h // G``); masks go as row-major ``(Tq, Tk)`` planes,
which it needs ([F13](../../docs/findings.md)).

Declared (:data:`ATTNPROPS_CAPABILITIES`): float64 is not a dtype of this kernel; float16
and bfloat16 are computed with float32 scores and accumulators, the unnormalised weights
rounded to the input dtype before the product with the values (``compute_dtypes``,
``rounds_weights``); a fully masked row gives zeros as on the CPU (PyTorch >= 2.5); no
``attention_weights`` (the identity-value trick of :mod:`torch_sdpa` needs ``Dv = Tk``) and
no log-sum-exp. The KV cache is :class:`torch_sdpa.KVCache` (CPU tensors), attended on the
device.
"""

from __future__ import annotations

# __version__, KVCache and kv_cache_bytes are re-exported: the subject's version, cache and sizes
from attnprops.properties.subjects._sdpa_cuda import CAPABILITIES
from attnprops.properties.subjects._sdpa_cuda import SDPBackend
from attnprops.properties.subjects._sdpa_cuda import __version__  # noqa: F401
from attnprops.properties.subjects._sdpa_cuda import subject_functions
from attnprops.properties.subjects.torch_sdpa import KVCache  # noqa: F401
from attnprops.properties.subjects.torch_sdpa import kv_cache_bytes  # noqa: F401

ATTNPROPS_EXPECTED_FAILURES = "torch_sdpa_cuda_efficient.xfail.txt"

ATTNPROPS_CAPABILITIES = {**CAPABILITIES, "dtypes": ("bfloat16", "float16", "float32")}

_BACKENDS = [SDPBackend.EFFICIENT_ATTENTION]  # no other kernel
attention, cached_attention = subject_functions(
    "cuda", _BACKENDS, lower_right=False, native_gqa=False
)
