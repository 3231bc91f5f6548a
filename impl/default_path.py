"""Which path ``impl.attention(..., block_size=None)`` takes: dense or blocked, by size.

Dense for one key block (``Tk <= 128``) or fewer than ``2**15`` scores ``B * Hq * Tq * Tk``;
otherwise blocked with ``n = 128`` when causality hides at least a quarter of the keys from the
query tiles (causal self-attention from ``T = 256``), when the products read at least
``2**19`` K/V elements per key block (``B * Hq * 128 * (D + Dv)``: decode with 32 heads of
``D = 128``), or when the dense score array would pass ``2**24`` elements (64 MiB in
float32); dense otherwise. Reasons: the blocked path skips the key blocks a causal tile cannot
see (the dense path multiplies and exponentiates the hidden half), reads each K/V block once
while it is in cache (the dense path scans K and V for NaN in a pass of their own, then streams
them through both products) and holds one tile of scores; it pays about 10-20 NumPy calls per
key block, which small blocks (few heads, few query rows) do not amortize. Measured by
``python -m attnprops.benchmarks.default_path`` (dense and blocked timed in one process, best
of 7, 1 BLAS thread, float32 and float64, on a shared 2-core machine): blocked / dense about
0.45-0.6 for causal ``T = 1024..2048``, 0.55-0.7 for decode ``(Hq, Tk, D) = (32, 8192, 128)``,
0.55-0.85 for ``Tk = 1024``; 1.3-2.7 for one-head decode, ``Hq = 4`` decode and non-causal
calls of ``Tq <= 128`` query rows on one head; 1.0-1.3 for one key block. Shapes near a
threshold (``T = 256..300`` causal, ``2**18``-``2**19`` K/V elements per block, non-causal
``T = 1024``) measure within about 20% either way from run to run. ``n = 128`` was the fastest
of 64, 128, 256 and 512 on both benchmark shapes (causal ``(1, 8, 1024, 64)``, decode
``(1, 32, 1, 8192, 128)``); ``python -m attnprops.benchmarks --only numpy`` times the default
there against PyTorch. Every call of the property suite's value properties (``T <= 6``) takes
the dense path, bitwise as before (the kernel-sized properties reach both); ``block_size="dense"``
forces the dense path at any size.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DEFAULT_BLOCK_SIZE", "DENSE", "default_block_size"]

DEFAULT_BLOCK_SIZE = 128
DENSE = "dense"  # block_size=DENSE names the dense path
_MIN_SCORES = 1 << 15  # fewer scores: dense
_MAX_CAUSAL_SHARE = 0.75  # causal tiles seeing at most this share of the keys: blocked
_MIN_BLOCK_KV = 1 << 19  # K/V elements of one key block from which blocked pays for itself
_MAX_DENSE_SCORES = 1 << 24  # more scores: blocked (a 64 MiB float32 score array)


def default_block_size(
    query_shape: tuple[int, ...],
    key_shape: tuple[int, ...],
    value_shape: tuple[int, ...],
    is_causal: bool = False,
    query_start: int | None = None,
) -> int | None:
    """The block size ``block_size=None`` stands for: ``None`` (the dense path) or ``128``.

    Args: the 4-D shapes ``(B, Hq, Tq, D)``, ``(B, Hkv, Tk, D)``, ``(B, Hkv, Tk, Dv)`` of a
    valid call, its ``is_causal`` and ``query_start`` (``None``: ``Tk - Tq``). With
    ``n = 128``: blocked when ``Tk > n``, ``B * Hq * Tq * Tk >= 2**15`` and one of

    - causal, and the query tiles of ``n`` rows see at most 3/4 of the keys (the blocked
      path skips the key blocks a whole tile cannot see, where the dense path multiplies and
      exponentiates every hidden score): causal self-attention with ``Tq = Tk >= 256``;
    - ``B * Hq * n * (D + Dv) >= 2**19``: the K/V elements the two products read per key
      block (each query head reads its K/V head's block) are enough to pay for the Python
      steps of a block, and the blocked path reads each block while it is in cache, having
      just scanned it for NaN, where the dense path streams K and V once for the scan and
      then once per query head of a group for the products: decode with many heads;
    - ``B * Hq * Tq * Tk >= 2**24``: the dense score array would exceed 64 MiB in float32.

    Else dense: one key block (nothing for the online softmax to combine), few scores, or
    few rows and keys per block without causal skipping (the blocked path's steps per key
    block cost more than the dense path's extra passes). Measured as told in the module
    docstring. Raises nothing for valid shapes (the caller validates).
    """
    B, Hq, Tq, D = query_shape
    Tk = key_shape[2]
    Dv = value_shape[3]
    n = DEFAULT_BLOCK_SIZE
    scores = B * Hq * Tq * Tk
    if Tk <= n or scores < _MIN_SCORES:
        return None
    if B * Hq * n * (D + Dv) >= _MIN_BLOCK_KV or scores >= _MAX_DENSE_SCORES:
        return n
    if is_causal:
        start = Tk - Tq if query_start is None else query_start
        # keys seen by the query tiles [t0, t1): min(Tk, start + t1) each (the later blocks
        # are skipped), against Tk each on the dense path
        t1 = np.minimum(np.arange(n, Tq + n, n), Tq)
        seen = int(np.minimum(Tk, start + t1).sum())
        if seen <= _MAX_CAUSAL_SHARE * len(t1) * Tk:
            return n
    return None
