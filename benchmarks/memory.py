"""Section 4: peak extra memory of impl.attention, blocked against dense (tracemalloc).

float32, B=1, H=1, D=64, causal self-attention. The blocked path runs at T=16384; the dense
path would need several GiB there (a float32 score array of T*T*4 bytes is 1 GiB, plus its
masks and temporaries), so it runs at smaller T and its growth per doubling of T is reported,
with the peak it would reach at 16384 extrapolated as T**2. tracemalloc traces NumPy's array
allocations; the figure is the peak above what was allocated before the call (inputs excluded,
the returned output included).
"""

from __future__ import annotations

import time

import numpy as np

from attnprops.benchmarks._harness import Row
from attnprops.benchmarks._harness import peak_bytes

MIB = 2**20


def _inputs(T: int, D: int = 64):
    rng = np.random.default_rng(11)
    return tuple(rng.standard_normal((1, 1, T, D)).astype(np.float32) for _ in range(3))


def _measure(T: int, block_size: int | str) -> dict:
    from attnprops import impl

    q, k, v = _inputs(T)
    started = time.perf_counter()
    peak, _ = peak_bytes(lambda: impl.attention(q, k, v, is_causal=True, block_size=block_size))
    return {
        "T": T,
        "block_size": block_size,
        "peak_bytes": peak,
        "seconds": time.perf_counter() - started,
    }


def run(args) -> tuple[list[Row], dict]:
    T_big = args.memory_T
    small = [T for T in (1024, 2048, 4096) if T <= T_big]
    block_size = args.memory_block_size
    dense = [_measure(T, "dense") for T in small]
    blocked_small = [_measure(T, block_size) for T in small]
    blocked_big = _measure(T_big, block_size)
    # dense peak per (query, key) pair at the largest measured T, extrapolated as T**2
    last = dense[-1]
    per_pair = last["peak_bytes"] / last["T"] ** 2
    dense_big = per_pair * T_big**2
    growth = [b["peak_bytes"] / a["peak_bytes"] for a, b in zip(dense, dense[1:])]
    blocked_growth = [
        b["peak_bytes"] / a["peak_bytes"] for a, b in zip(blocked_small, blocked_small[1:])
    ]
    pairs = T_big * T_big
    details = {
        "dense": dense,
        "blocked": blocked_small + [blocked_big],
        "dense_peak_per_pair_bytes": per_pair,
        "dense_extrapolated_peak_bytes": dense_big,
        "dense_growth_per_doubling": growth,
        "blocked_growth_per_doubling": blocked_growth,
    }
    ratio = blocked_big["peak_bytes"] / dense_big
    # O(Tq * block_size): the scores of one tile, its visibility and temporaries are a few
    # bytes per (query, key) pair of one tile row; the output (T x D float32) is returned.
    rows = [
        Row(
            "4",
            f"blocked peak memory, T={T_big} D=64 H=1 float32 causal, block_size={block_size}",
            blocked_big["peak_bytes"] / MIB,
            "MiB",
            anchor=f"dense at T={T_big}, extrapolated T^2 from T={last['T']}",
            anchor_value=dense_big / MIB,
            ratio=ratio,
            ratio_of="blocked/dense",
            target="O(Tq*block_size): < 1/8 byte per (query, key) pair, linear growth",
            met=bool(
                blocked_big["peak_bytes"] < pairs / 8 and all(g < 2.5 for g in blocked_growth)
            ),
            note=f"{blocked_big['peak_bytes'] / pairs:.3f} bytes per (query, key) pair; "
            f"ran in {blocked_big['seconds']:.1f} s",
        ),
        Row(
            "4",
            f"dense peak memory growth per doubling of T ({', '.join(str(d['T']) for d in dense)})",
            growth[-1] if growth else None,
            "x",
            anchor="T^2 scaling",
            anchor_value=4.0,
            ratio=None,
            note=f"dense at T={last['T']}: {last['peak_bytes'] / MIB:.0f} MiB",
        ),
        Row(
            "4",
            "blocked peak memory growth per doubling of T "
            f"({', '.join(str(d['T']) for d in blocked_small)})",
            blocked_growth[-1] if blocked_growth else None,
            "x",
            anchor="linear scaling (Tq*block_size)",
            anchor_value=2.0,
            note=f"blocked at T={blocked_small[-1]['T']}: "
            f"{blocked_small[-1]['peak_bytes'] / MIB:.1f} MiB",
        ),
    ]
    return rows, details
