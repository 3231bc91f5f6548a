"""Subject: the ONNX ``Attention`` operator (opset 25) on onnxruntime's CPU execution provider.

Install onnxruntime first (``pip install onnx onnxruntime``; from a clone, the extra:
``pip install -e .[onnx]``). Run: ``attnprops check --impl
attnprops.properties.subjects.onnxruntime_attention``.

The same one-node models and the same mappings as :mod:`properties.subjects.onnx_attention`
(its docstring: layout, mask, positions through ``past_key``/``nonpad_kv_seqlen``, the FLOAT
``scale`` and ``softcap`` attributes, weights from ``qk_matmul_output_mode=3``, the op's own
cache update), each model in an ``onnxruntime.InferenceSession`` (one intra-op thread, so
that parallel test workers do not wait on each other; the arithmetic does not depend on it).

Known deviations: ``onnxruntime_attention.xfail.txt``, explained in ``docs/findings.md``.
"""

from __future__ import annotations

import onnx
import onnxruntime

from attnprops.properties.subjects.onnx_attention import (
    ATTNPROPS_CAPABILITIES as _REFERENCE_CAPABILITIES,
)
from attnprops.properties.subjects.onnx_attention import KVCache
from attnprops.properties.subjects.onnx_attention import OnnxAttention
from attnprops.properties.subjects.onnx_attention import Runner

__all__ = ["KVCache", "attention", "attention_weights", "cached_attention"]
__version__ = onnxruntime.__version__

ATTNPROPS_EXPECTED_FAILURES = "onnxruntime_attention.xfail.txt"
ATTNPROPS_CAPABILITIES = dict(_REFERENCE_CAPABILITIES)


def runtime_runner(model: onnx.ModelProto) -> Runner:
    """An ``onnxruntime.InferenceSession`` of ``model`` on the CPU provider."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 4  # fatal only: a failed run raises with its message anyway
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return lambda feeds: session.run(None, feeds)


_OP = OnnxAttention(runtime_runner)
attention = _OP.attention
attention_weights = _OP.attention_weights
cached_attention = _OP.cached_attention
