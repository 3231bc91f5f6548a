"""N1 (docs/findings.md) at model level: a randomly initialised one-layer ONNX decoder (input
projections, the ``Attention`` operator with ``is_causal=1`` and the batch's key-padding mask
``(B, 1, 1, T)``, an output projection) run on a right-padded batch. ONNX's reference
evaluator gives the real tokens of every sequence the wrong output (each sees only the first
token's keys); onnxruntime gives the exact ones.

Run: python docs/reproductions/n1_onnx_padded_batch_model.py   (needs onnx and numpy;
onnxruntime optional). Prints, per runtime, the largest error at the real (not padded)
tokens against a float64 NumPy evaluation of the same model, and exits 1 when one is wrong.
"""

import sys

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

try:
    import onnxruntime
except ImportError:
    onnxruntime = None

B, T, E, H, D = 2, 6, 16, 2, 8  # batch, tokens, model width, heads, head dim
LENGTHS = [6, 4]  # the second sequence is padded by two tokens
rng = np.random.default_rng(0)
weights = {name: rng.standard_normal((E, E)) / np.sqrt(E) for name in ("wq", "wk", "wv", "wo")}
x = rng.standard_normal((B, T, E))
padding = (np.arange(T)[None, :] < np.array(LENGTHS)[:, None])[:, None, None, :]  # (B,1,1,T)


def heads(name: str, source: str) -> list:
    """Nodes: ``source`` @ ``w<name>`` reshaped to ``(B, H, T, D)`` as ``name``."""
    return [
        helper.make_node("MatMul", [source, "w" + name], [name + "_flat"]),
        helper.make_node("Reshape", [name + "_flat", "split"], [name + "_bthd"]),
        helper.make_node("Transpose", [name + "_bthd"], [name], perm=[0, 2, 1, 3]),
    ]


nodes = heads("q", "x") + heads("k", "x") + heads("v", "x")
nodes += [
    helper.make_node("Attention", ["q", "k", "v", "mask"], ["y"], is_causal=1),
    helper.make_node("Transpose", ["y"], ["y_bthd"], perm=[0, 2, 1, 3]),
    helper.make_node("Reshape", ["y_bthd", "merge"], ["y_flat"]),
    helper.make_node("MatMul", ["y_flat", "wo"], ["out"]),
]
initializers = [numpy_helper.from_array(w, name) for name, w in weights.items()]
initializers += [
    numpy_helper.from_array(np.array([B, T, H, D], np.int64), "split"),
    numpy_helper.from_array(np.array([B, T, E], np.int64), "merge"),
]
graph = helper.make_graph(
    nodes,
    "decoder_layer",
    [
        helper.make_tensor_value_info("x", TensorProto.DOUBLE, [B, T, E]),
        helper.make_tensor_value_info("mask", TensorProto.BOOL, [B, 1, 1, T]),
    ],
    [helper.make_tensor_value_info("out", TensorProto.DOUBLE, [B, T, E])],
    initializers,
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
model.ir_version = 10


def expected() -> np.ndarray:
    """The same layer in float64 NumPy: causal AND the padding, softmax over visible keys."""
    split = [(x @ weights["w" + n]).reshape(B, T, H, D).transpose(0, 2, 1, 3) for n in "qkv"]
    q, k, v = split
    visible = np.tril(np.ones((T, T), bool))[None, None] & padding
    s = np.where(visible, q @ k.swapaxes(-1, -2) / np.sqrt(D), -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    y = (w / w.sum(-1, keepdims=True)) @ v
    return y.transpose(0, 2, 1, 3).reshape(B, T, E) @ weights["wo"]


runtimes = [("onnx.reference", lambda feeds: ReferenceEvaluator(model).run(None, feeds)[0])]
if onnxruntime is not None:
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    runtimes.append(("onnxruntime", lambda feeds: session.run(None, feeds)[0]))

print(f"onnx {onnx.__version__}, onnxruntime {getattr(onnxruntime, '__version__', None)}")
want = expected()
real = np.arange(T)[None, :] < np.array(LENGTHS)[:, None]  # (B, T): the unpadded tokens
wrong = False
for name, run in runtimes:
    got = run({"x": x, "mask": padding})
    error = np.abs(got - want).max(axis=-1)[real]  # per real token
    bad = int((error > 1e-6).sum())
    print(f"{name}: largest error at a real token {error.max():.3g}; {bad} of {real.sum()} wrong")
    wrong |= bad > 0
sys.exit(1 if wrong else 0)
