"""``python -m attnprops.benchmarks.default_path``: the measurement behind impl.attention's default path.

``impl.attention(..., block_size=None)`` takes the dense path or the blocked path with
``n = 128`` by the call's size (``impl.default_path.default_block_size``). This script times
both paths on shapes on either side of each condition of that rule, in one process with the
same BLAS threads (``--threads``, default 1), best of ``--repeat`` runs, and prints for each
shape the dense time, blocked time / dense time, the default's pick and the default's time /
the faster path's time (1.00: the rule picked the faster path). Random standard-normal
inputs, ``B = 1``, ``Dv = D``. Not part of ``python -m attnprops.benchmarks`` (it takes a few minutes);
section 3 there times the default call against PyTorch on the two benchmark shapes.

On a shared machine a ratio within about 10-20% of 1 is noise; the rule's conditions sit
where the ratio was clearly below 1 (blocked) or above (dense) in repeated runs.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from attnprops.benchmarks._harness import best_of
from attnprops.benchmarks._harness import load_average
from attnprops.benchmarks._harness import set_threads

# (Hq, Hkv, Tq, Tk, D, is_causal, what the row probes)
SHAPES = [
    (8, 8, 64, 64, 64, True, "one key block"),
    (8, 8, 128, 128, 64, True, "one key block"),
    (8, 8, 256, 256, 64, True, "causal, tiles see 3/4 of the keys"),
    (8, 8, 300, 300, 64, True, "causal, tiles see 76% of the keys"),
    (8, 8, 1024, 1024, 64, True, "causal benchmark shape"),
    (1, 1, 512, 512, 64, True, "causal, one head"),
    (1, 1, 2048, 2048, 64, True, "causal, one head"),
    (8, 8, 256, 4096, 64, True, "causal chunk: tiles see 98% of the keys"),
    (8, 8, 2048, 4096, 64, True, "causal chunk, 77% seen; 2**26 scores"),
    (8, 8, 256, 256, 64, False, "no causality"),
    (8, 8, 1024, 1024, 64, False, "no causality"),
    (1, 1, 64, 2048, 64, False, "few rows per tile"),
    (1, 1, 128, 2048, 64, False, "few rows per tile"),
    (32, 32, 512, 512, 64, False, "K/V per block 2**19"),
    (8, 8, 2048, 2048, 64, False, "2**25 scores"),
    (32, 32, 1, 256, 128, False, "decode, 8192 scores"),
    (32, 32, 1, 1024, 128, False, "decode, K/V per block 2**20"),
    (32, 32, 1, 8192, 128, False, "decode benchmark shape"),
    (32, 8, 1, 8192, 128, False, "decode GQA, K/V per block 2**20"),
    (32, 32, 1, 4096, 64, False, "decode, K/V per block 2**19"),
    (16, 16, 1, 4096, 64, False, "decode, K/V per block 2**18"),
    (8, 8, 1, 4096, 128, False, "decode, K/V per block 2**18"),
    (4, 4, 1, 4096, 128, False, "decode, K/V per block 2**17"),
    (1, 1, 1, 65536, 128, False, "decode, one head"),
]


def measure(shape, dtype, repeat: int) -> dict:
    from attnprops import impl
    from attnprops.impl.default_path import default_block_size

    Hq, Hkv, Tq, Tk, D, causal, what = shape
    rng = np.random.default_rng(7)
    q = rng.standard_normal((1, Hq, Tq, D)).astype(dtype)
    k = rng.standard_normal((1, Hkv, Tk, D)).astype(dtype)
    v = rng.standard_normal((1, Hkv, Tk, D)).astype(dtype)
    pick = default_block_size(q.shape, k.shape, v.shape, causal)
    times = {
        path: best_of(
            lambda: impl.attention(q, k, v, is_causal=causal, block_size=path), repeat=repeat
        )["min"]
        for path in ("dense", 128)
    }
    chosen = times["dense" if pick is None else 128]
    return {
        "shape": shape[:6],
        "what": what,
        "dtype": np.dtype(dtype).name,
        "default": "dense" if pick is None else f"blocked n={pick}",
        "dense_s": times["dense"],
        "blocked_s": times[128],
        "blocked_over_dense": times[128] / times["dense"],
        "default_over_best": chosen / min(times.values()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m attnprops.benchmarks.default_path", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    args = parser.parse_args(argv)
    threads = set_threads(args.threads)
    print(f"threads {threads}; load average {load_average()}")
    print(
        "| dtype | Hq | Hkv | Tq | Tk | D | causal | probes | dense | blocked/dense | "
        "default | default/best |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for dtype in args.dtypes:
        for shape in SHAPES:
            r = measure(shape, np.dtype(dtype), args.repeat)
            Hq, Hkv, Tq, Tk, D, causal = r["shape"]
            print(
                f"| {dtype} | {Hq} | {Hkv} | {Tq} | {Tk} | {D} | {causal} | {r['what']} | "
                f"{r['dense_s'] * 1e3:.3g} ms | {r['blocked_over_dense']:.2f} | "
                f"{r['default']} | {r['default_over_best']:.2f} |",
                flush=True,
            )
    print(f"load average at end {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
