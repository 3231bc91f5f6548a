"""Section 5: KV cache growth, impl.KVCache against an ``np.concatenate``-per-step baseline.

Shape per token (B, Hkv, 1, D) = (1, 8, 1, 64), float32; each step appends one key and one
value. The cache doubles its capacity when full (amortized O(1) copies per token), so the time
for 16,384 appends should be about twice the time for 8,192. The baseline re-allocates the
whole cache every step (O(T) copies per token, O(T^2) in total); at 16,384 steps it would copy
about 550 GB, so it runs for ``--kv-baseline-steps`` steps (default 4,096; its time grows 4x
per doubling) and is compared with the cache over the same number of steps, in the same run.
Both append the same pre-generated tokens.
"""

from __future__ import annotations

import time

import numpy as np

from attnprops.benchmarks._harness import Row

B, HKV, D = 1, 8, 64


def _tokens(n: int):
    rng = np.random.default_rng(5)
    keys = rng.standard_normal((n, B, HKV, 1, D)).astype(np.float32)
    return keys, keys[::-1].copy()


def cache_appends(n: int, keys, values) -> float:
    from attnprops import impl

    cache = impl.KVCache(B, HKV, D, dtype=np.float32)
    started = time.perf_counter()
    for t in range(n):
        cache.append(keys[t], values[t])
    seconds = time.perf_counter() - started
    assert len(cache) == n
    return seconds


def concat_appends(n: int, keys, values) -> float:
    k_all = np.zeros((B, HKV, 0, D), np.float32)
    v_all = np.zeros((B, HKV, 0, D), np.float32)
    started = time.perf_counter()
    for t in range(n):
        k_all = np.concatenate([k_all, keys[t]], axis=2)
        v_all = np.concatenate([v_all, values[t]], axis=2)
    seconds = time.perf_counter() - started
    assert k_all.shape[2] == n
    return seconds


def run(args) -> tuple[list[Row], dict]:
    n_big = args.kv_steps
    n_half = n_big // 2
    n_base = min(args.kv_baseline_steps, n_big)
    keys, values = _tokens(n_big)
    # Interleaved repeats, best of each: a load change on the shared machine hits all three.
    runs = {n_half: [], n_big: [], n_base: []}
    for _ in range(3):
        for n in runs:
            runs[n].append(cache_appends(n, keys, values))
    cache_half, cache_big, cache_base = min(runs[n_half]), min(runs[n_big]), min(runs[n_base])
    concat_base = concat_appends(n_base, keys, values)
    concat_quarter = concat_appends(n_base // 2, keys, values)
    growth = cache_big / cache_half
    speedup = concat_base / cache_base
    details = {
        "token_shape": [B, HKV, 1, D],
        "dtype": "float32",
        "cache_seconds": {n_half: cache_half, n_big: cache_big, n_base: cache_base},
        "concat_seconds": {n_base // 2: concat_quarter, n_base: concat_base},
    }
    rows = [
        Row(
            "5",
            f"KVCache: {n_big:,} single-token appends (B,Hkv,D)=(1,8,64) float32",
            cache_big,
            "s",
            anchor=f"{n_half:,} appends",
            anchor_value=cache_half,
            ratio=growth,
            ratio_of=f"{n_big:,}/{n_half:,}",
            target="linear: ratio ~2 (< 2.5)",
            met=growth < 2.5,
            note=f"{cache_big / n_big * 1e6:.1f} us per append",
        ),
        Row(
            "5",
            f"KVCache vs np.concatenate per step, {n_base:,} appends",
            cache_base,
            "s",
            anchor="np.concatenate-per-step baseline",
            anchor_value=concat_base,
            ratio=speedup,
            ratio_of="speed-up",
            target=">= 20x the baseline",
            met=speedup >= 20,
            note=f"baseline grows {concat_base / concat_quarter:.1f}x per doubling of steps "
            f"(quadratic), the cache ~2x: at {n_big:,} steps the gap would be "
            f"~{n_big // n_base}x larger",
        ),
    ]
    return rows, details
