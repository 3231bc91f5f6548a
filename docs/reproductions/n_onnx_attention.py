"""N1-N3 (docs/findings.md): the ONNX ``Attention`` operator (opset 25), run without the
suite or its adapter, by ``onnx.reference.ReferenceEvaluator`` and by onnxruntime's CPU
provider (where installed).

Run: python docs/reproductions/n_onnx_attention.py   (needs onnx; onnxruntime optional)
Prints, for each finding, what the op returns and what the exact result is, and exits 1 when
any runtime deviates.

- N1: with ``is_causal=1`` and a mask whose query axis has size 1 (a key-padding mask
  ``(B, 1, 1, Tk)``, broadcast over the queries as the spec allows), the reference evaluator
  builds the causal mask for one query row and broadcasts it: every query sees only the keys
  of the first query.
- N2: the scale (a FLOAT attribute) is applied as ``sqrt(scale)`` computed in float32 to both
  Q and K, so float64 scores are scaled by ``float32(sqrt(s))**2 != s`` (relative error up to
  about 6e-8); onnxruntime does the same with its default ``1/sqrt(head_size)``. Past
  float32's range a scale (1e-300) or a cap (1e-46, "no cap") becomes another number.
- N3: float16 scores are computed in float16 by the reference evaluator: a score past 65504
  becomes ``inf`` and the output NaN, where the exact output is finite; so does its float16
  ``sqrt(scale)`` past a scale of 4.29e9.
"""

import math
import sys

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper
from onnx.reference import ReferenceEvaluator

try:
    import onnxruntime
except ImportError:  # the reference evaluator alone
    onnxruntime = None


def model(dtype, with_mask=False, **attributes):
    """A one-node Attention-25 model with inputs Q, K, V (and a bool attn_mask)."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    names = ["Q", "K", "V"] + (["attn_mask"] if with_mask else [])
    inputs = [helper.make_tensor_value_info(n, elem, None) for n in names[:3]]
    if with_mask:
        inputs.append(helper.make_tensor_value_info("attn_mask", TensorProto.BOOL, None))
    node = helper.make_node("Attention", names, ["Y"], **attributes)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("Y", elem, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    m.ir_version = 10
    return m


def runtimes(m):
    """(name, run) for the reference evaluator and, if installed, onnxruntime's CPU provider."""
    yield "onnx.reference", lambda feeds: ReferenceEvaluator(m).run(None, feeds)[0]
    if onnxruntime is not None:
        session = onnxruntime.InferenceSession(
            m.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        yield "onnxruntime", lambda feeds: session.run(None, feeds)[0]


def report(finding, name, got, exact, tolerance) -> bool:
    ok = bool(np.all(np.abs(got.ravel() - exact) <= tolerance))
    print(
        f"{finding} {name}: got {got.ravel().tolist()}, exact {exact.ravel().tolist()}"
        f" -> {'ok' if ok else 'DEVIATES'}"
    )
    return ok


def n1_causal_with_query_broadcast_mask() -> bool:
    # Tq = Tk = 2, q = k = 0 (equal scores), values 0 and 0.5: query 1 sees both keys -> 0.25
    q = np.zeros((1, 1, 2, 1))
    v = np.array([[[[0.0], [0.5]]]])
    feeds = {"Q": q, "K": q, "V": v, "attn_mask": np.ones((1, 1, 1, 2), bool)}
    exact = np.array([0.0, 0.25])
    return all(
        [
            report("N1", name, run(feeds), exact, 1e-15)
            for name, run in runtimes(model(np.float64, with_mask=True, is_causal=1))
        ]
    )


def n2_float64_scale() -> bool:
    # one query, keys 0 and 1, values 0 and 1, head_size 4: softmax([0, s]) . [0, 1]
    q = np.array([[[[1.0, 0.0, 0.0, 0.0]]]])
    k = np.array([[[[0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]]])
    v = np.array([[[[0.0], [1.0]]]])
    ok = True
    for scale in (2.0, None):  # explicit (exact in float32), and the default 1/sqrt(4) = 0.5
        s = 0.5 if scale is None else scale
        exact = np.array([1 / (1 + math.exp(-s))])
        attrs = {} if scale is None else {"scale": scale}
        for name, run in runtimes(model(np.float64, **attrs)):
            label = f"{name} (scale={scale})"
            ok &= report("N2", label, run({"Q": q, "K": k, "V": v}), exact, 4e-16)
    # past float32's range: a scale of 1e-300 becomes 0 (scores of 1e300 and 0: exact 0.731)
    big = np.array([[[[1e150]]]])
    feeds = {"Q": big, "K": np.array([[[[1e150], [0.0]]]]), "V": np.array([[[[1.0], [0.0]]]])}
    exact = np.array([1 / (1 + math.exp(-1.0))])
    for name, run in runtimes(model(np.float64, scale=1e-300)):
        ok &= report("N2", f"{name} (scale=1e-300)", run(feeds), exact, 4e-16)
    # a float32 cap of 1e-46 becomes 0, "no cap" (capped scores are 0 and 1e-46: exact 0.5)
    one = np.ones((1, 1, 1, 1), np.float32)
    feeds = {"Q": one, "K": np.array([[[[1.0], [0.0]]]], np.float32), "V": None}
    feeds["V"] = feeds["K"]
    for name, run in runtimes(model(np.float32, softcap=1e-46)):
        ok &= report("N2", f"{name} (softcap=1e-46)", run(feeds), np.array([0.5]), 1e-7)
    return ok


def n3_float16_score_overflow() -> bool:
    # one key, q . k = 3 * 130 * 168 = 65520 (past float16's 65504), scale 1: weight 1,
    # the output is the value, 0
    q = np.full((1, 1, 1, 3), 130, np.float16)
    k = np.full((1, 1, 1, 3), 168, np.float16)
    v = np.zeros((1, 1, 1, 1), np.float16)
    ok = all(
        [
            report("N3", name, run({"Q": q, "K": k, "V": v}), np.zeros(1), 0)
            for name, run in runtimes(model(np.float16, scale=1.0))
        ]
    )
    # sqrt(scale) cast to float16 overflows past scale 4.29e9: one key, weight 1, output 1
    small = np.full((1, 1, 1, 1), 0.001, np.float16)
    feeds = {"Q": small, "K": small, "V": np.ones((1, 1, 1, 1), np.float16)}
    for name, run in runtimes(model(np.float16, scale=1e10)):
        ok &= report("N3", f"{name} (scale=1e10)", run(feeds), np.ones(1), 0)
    return ok


if __name__ == "__main__":
    print(f"onnx {onnx.__version__}, onnxruntime {getattr(onnxruntime, '__version__', None)}")
    results = [
        n1_causal_with_query_broadcast_mask(),
        n2_float64_scale(),
        n3_float16_score_overflow(),
    ]
    sys.exit(0 if all(results) else 1)
