"""Section 3: impl.attention against torch.nn.functional.scaled_dot_product_attention (CPU).

Same inputs (``torch.from_numpy`` views of the NumPy arrays), one process, the same number of
threads for NumPy's BLAS and PyTorch (``--threads``), float32 and float64:

- causal (B, H, T, D) = (1, 8, 1024, 64): ``is_causal=True`` (Tq == Tk, so impl's bottom-right
  alignment and PyTorch's top-left one coincide);
- decode (B, H, Tq, Tk, D) = (1, 32, 1, 8192, 128): one query over 8192 cached keys, no mask.

Each is timed for impl's default call (``block_size=None``: the path impl picks by size, see
``impl.default_path.default_block_size``; the ``<= 1.5x torch`` target is the default's), impl's
dense path (``block_size="dense"``), impl's blocked path (``--block-size``, default 128, for the
causal case; ``--decode-block-size``, default 128, for decode; not timed again when it is the
call the default makes) and PyTorch; the figure is the best of several runs (other processes
only ever add time), timed in interleaved rounds (each round runs every call once) so that
load from other processes falls on impl and PyTorch alike.
Throughput is counted in nominal dense FLOPs, ``4 B H Tq Tk D`` (QK^T and PV; the causal half
is not subtracted), and compared with the machine's ``numpy.matmul`` on the same two products,
measured in the run.
"""

from __future__ import annotations

import numpy as np

from attnprops.benchmarks._harness import Row
from attnprops.benchmarks._harness import best_of_each

CASES = {
    "causal": dict(
        B=1, H=8, Tq=1024, Tk=1024, D=64, is_causal=True, label="causal (B,H,T,D)=(1,8,1024,64)"
    ),
    "decode": dict(
        B=1,
        H=32,
        Tq=1,
        Tk=8192,
        D=128,
        is_causal=False,
        label="decode (B,H,Tq,Tk,D)=(1,32,1,8192,128)",
    ),
}
TARGET = 1.5  # impl's time within 1.5x PyTorch's


def _inputs(case: dict, dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    B, H, Tq, Tk, D = (case[k] for k in ("B", "H", "Tq", "Tk", "D"))
    return (
        rng.standard_normal((B, H, Tq, D)).astype(dtype),
        rng.standard_normal((B, H, Tk, D)).astype(dtype),
        rng.standard_normal((B, H, Tk, D)).astype(dtype),
    )


def _path_name(block_size: int | None) -> str:
    return "dense" if block_size is None else f"blocked n={block_size}"


def measure(case: dict, dtype, block_size: int, repeat: int) -> dict:
    from attnprops import impl
    from attnprops.impl.default_path import default_block_size

    q, k, v = _inputs(case, dtype)
    causal = case["is_causal"]
    B, H, Tq, Tk, D = (case[k] for k in ("B", "H", "Tq", "Tk", "D"))
    flops = 4.0 * B * H * Tq * Tk * D
    default_block = default_block_size(q.shape, k.shape, v.shape, causal)
    result = {
        "flops": flops,
        "block_size": block_size,
        "default_block_size": default_block,
        "default_path": _path_name(default_block),
    }
    calls = {
        "default": lambda: impl.attention(q, k, v, is_causal=causal),
        "dense": lambda: impl.attention(q, k, v, is_causal=causal, block_size="dense"),
        "blocked": lambda: impl.attention(q, k, v, is_causal=causal, block_size=block_size),
    }
    if default_block == block_size:  # the default makes exactly this call: timed once
        del calls["blocked"]
    outputs = {name: call() for name, call in calls.items()}
    # numpy.matmul on the same two products (QK^T, then weights @ V), no softmax, no masking
    key_t = k.swapaxes(-1, -2)
    weights = np.full((B, H, Tq, Tk), 1.0 / Tk, dtype=dtype)
    calls["matmul"] = lambda: (np.matmul(q, key_t), np.matmul(weights, v))
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
        sdpa = torch.nn.functional.scaled_dot_product_attention
        with torch.no_grad():
            reference = sdpa(tq, tk, tv, is_causal=causal).numpy()

        def torch_call():
            with torch.no_grad():
                sdpa(tq, tk, tv, is_causal=causal)

        calls["torch"] = torch_call
    # interleaved rounds: a burst of load from other processes hits impl and torch alike
    for name, timing in best_of_each(calls, repeat=repeat).items():
        result[f"{name}_s"] = timing
    if "blocked" not in calls:
        result["blocked_s"] = result["default_s"]
        outputs["blocked"] = outputs["default"]
    if torch is None:
        result["torch_s"] = None
        return result
    scale = float(np.abs(reference).max())
    result["max_abs_diff_vs_torch"] = {
        name: float(np.abs(out.astype(np.float64) - reference).max()) / scale
        for name, out in outputs.items()
    }
    return result


def run(args) -> tuple[list[Row], dict]:
    rows, details = [], {}
    repeat = max(3, args.repeat)
    for name, case in CASES.items():
        block_size = args.block_size if name == "causal" else args.decode_block_size
        for dtype in (np.float32, np.float64):
            key = f"{name}/{np.dtype(dtype).name}"
            r = measure(case, dtype, block_size, repeat)
            details[key] = r
            label = f"{case['label']} {np.dtype(dtype).name}"
            torch_s = None if r["torch_s"] is None else r["torch_s"]["min"]
            paths = [
                (f"default (block_size=None: {r['default_path']})", r["default_s"], True),
                ('dense (block_size="dense")', r["dense_s"], False),
            ]
            if r["default_block_size"] != block_size:
                paths.append((f"blocked n={block_size}", r["blocked_s"], False))
            for path, timing, targeted in paths:
                seconds = timing["min"]
                ratio = None if torch_s is None else seconds / torch_s
                rows.append(
                    Row(
                        "3",
                        f"impl {path} time, {label}",
                        seconds,
                        "s",
                        anchor="torch SDPA (CPU)",
                        anchor_value=torch_s,
                        ratio=ratio,
                        ratio_of="impl/torch",
                        target=f"<= {TARGET}x torch" if targeted else "",
                        met=None if ratio is None or not targeted else ratio <= TARGET,
                    )
                )
            best = min(r["default_s"]["min"], r["dense_s"]["min"], r["blocked_s"]["min"])
            gflops = r["flops"] / best / 1e9
            matmul = r["flops"] / r["matmul_s"]["min"] / 1e9
            rows.append(
                Row(
                    "3",
                    f"impl GFLOP/s (faster path), {label}",
                    gflops,
                    "GFLOP/s",
                    anchor="numpy.matmul, same two products",
                    anchor_value=matmul,
                    ratio=gflops / matmul,
                    ratio_of="of matmul",
                    note="nominal 4*B*H*Tq*Tk*D FLOPs",
                )
            )
    return rows, details
