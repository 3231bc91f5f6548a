"""Vectorized NumPy scaled dot-product attention (the project's default subject).

Formula (Vaswani et al. 2017, "Attention Is All You Need", eq. 1)::

    scores  = scale * query @ key^T  (+ float attn_mask)       # (B, Hq, Tq, Tk)
    weights = softmax(scores masked to -inf, axis=keys)        # (B, Hq, Tq, Tk)
    output  = weights @ value                                  # (B, Hq, Tq, Dv)

Shape legend: B batch, Hq query heads, Hkv key/value heads, G = Hq // Hkv, Tq query
positions, Tk key positions, D head_dim, Dv value head dim. Query head ``h`` reads K/V head
``h // G``; K/V are never repeated to Hq (the query heads are grouped by a reshape instead).
The softmax subtracts the row maximum of the visible scores (no overflow in ``exp``) and masked
keys get weight exactly 0. float16 inputs are computed in float32 and the result is rounded
back to float16. Every rule on inputs is in :mod:`oracle.rules`; this module applies it.

Two paths compute :func:`attention`:

- ``block_size="dense"``, the *dense* path: the whole ``(B, Hq, Tq, Tk)`` score array,
  masked in place and normalized in place. Its results are bitwise those of the straightforward
  formula (``mutants._common.Pipeline`` mirrors it step by step).
- ``block_size=n``, the *blocked* path: tiles of ``n`` queries by ``n`` keys with an online
  softmax (Milakov & Gimelshein 2018, "Online normalizer calculation for softmax"; Dao et al.
  2022, "FlashAttention"): a running row maximum ``m`` and running sum ``l``, and the running
  output is rescaled by ``exp(m_old - m_new)`` whenever the maximum grows. Peak extra memory
  is O(B Hq n (n + Dv)) instead of O(B Hq Tq Tk), and each tile's scores stay in cache. Key
  blocks that no query of a tile may see (causal) are skipped, and query rows that see nothing
  of a key block are left out of it. Masks are read one block at a time, never broadcast to
  ``(B, Hq, Tq, Tk)``. Same rules, same errors; results agree with the dense path up to
  rounding (within the suite's error bounds).

The default, ``block_size=None``, picks the faster path by size (:func:`_default_block_size`):
dense for one key block (``Tk <= 128``) or fewer than ``2**15`` scores ``B * Hq * Tq * Tk``;
otherwise blocked with ``n = 128`` when causality hides at least a quarter of the keys from the
query tiles (causal self-attention from ``T = 256``), when the products read at least
``2**19`` K/V elements per key block (``B * Hq * 128 * (D + Dv)``: decode with 32 heads of
``D = 128``), or when the dense score array would pass ``2**24`` elements (64 MiB in
float32); dense otherwise. Reasons: the blocked path skips the key blocks a causal tile cannot
see (the dense path multiplies and exponentiates the hidden half), reads each K/V block once
while it is in cache (the dense path scans K and V for NaN in a pass of their own, then streams
them through both products) and holds one tile of scores; it pays about 10-20 NumPy calls per
key block, which small blocks (few heads, few query rows) do not amortize. Measured by
``python -m attnprops.benchmarks.default_path`` (dense and blocked timed in one process, best of 7, 1
BLAS thread, float32 and float64, on a shared 2-core machine): blocked / dense about 0.45-0.6
for causal ``T = 1024..2048``, 0.55-0.7 for decode ``(Hq, Tk, D) = (32, 8192, 128)``, 0.55-0.85
for ``Tk = 1024``; 1.3-2.7 for one-head decode, ``Hq = 4`` decode and non-causal calls of
``Tq <= 128`` query rows on one head; 1.0-1.3 for one key block. Shapes near a threshold
(``T = 256..300`` causal, ``2**18``-``2**19`` K/V elements per block, non-causal ``T = 1024``)
measure within about 20% either way from run to run. ``n = 128`` was the fastest of 64, 128,
256 and 512 on both benchmark shapes (causal ``(1, 8, 1024, 64)``, decode
``(1, 32, 1, 8192, 128)``); ``python -m attnprops.benchmarks --only numpy`` times the default there
against PyTorch. Every call of the property suite's value properties (``T <= 6``) takes the
dense path, bitwise as before (the kernel-sized properties reach both); ``block_size="dense"``
forces the dense path at any size.

Validation does not build a ``(B, Hq, Tq, Tk)`` visibility array either: every rule but one
is :func:`oracle.rules.check_attention_call` (the rulebook's array-free checks, shared with
:func:`oracle.rules.check_attention_inputs`), and the "fully masked row" rule is checked one
key block at a time by :func:`_check_rows` (``impl/tests/test_blocked.py`` checks that both
paths raise what the rulebook raises).
"""

from __future__ import annotations

import numpy as np

from attnprops.oracle.rules import (
    AttentionCall,
    AttentionInputError,
    FullyMaskedRowError,
    check_attention_call,
    check_block_size,
    check_float_array,
    compute_dtype,
    raise_score_overflow,
)

# Keys per chunk for the fully-masked-row check when the call itself is not blocked.
_ROW_CHECK_ELEMENTS = 1 << 22

# The default path (block_size=None), see the module docstring and _default_block_size.
_DEFAULT_BLOCK_SIZE = 128
_MIN_SCORES = 1 << 15  # fewer scores: dense
_MAX_CAUSAL_SHARE = 0.75  # causal tiles seeing at most this share of the keys: blocked
_MIN_BLOCK_KV = 1 << 19  # K/V elements of one key block from which blocked pays for itself
_MAX_DENSE_SCORES = 1 << 24  # more scores: blocked (a 64 MiB float32 score array)
DENSE = "dense"  # block_size=DENSE names the dense path


def _default_block_size(
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
    n = _DEFAULT_BLOCK_SIZE
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


def _mask_block(call: AttentionCall, rows: slice, keys: slice) -> np.ndarray | None:
    """The mask entries of query rows ``rows`` and keys ``keys``: a view of the caller's mask,
    still broadcastable (axes of length 1 stay 1). ``None`` without a mask."""
    mask = call.mask
    if mask is None:
        return None
    return mask[
        :, :, rows if mask.shape[2] > 1 else slice(None), keys if mask.shape[3] > 1 else slice(None)
    ]


def _causal_hidden(call: AttentionCall, rows: slice, keys: slice) -> np.ndarray | None:
    """Bool ``(r, keys)`` for the first ``r <= len(rows)`` rows of the block: True where
    causality hides key ``j`` from local query ``i`` (``j > query_start + i``). The rows after
    the first ``r`` see every key of the block. ``None`` when nothing in the block is hidden."""
    if not call.is_causal:
        return None
    # Query i sees the whole block iff keys.stop - 1 <= query_start + i.
    stop = min(rows.stop, max(rows.start, keys.stop - 1 - call.query_start))
    if stop == rows.start:
        return None
    i = np.arange(rows.start, stop)[:, None]
    j = np.arange(keys.start, keys.stop)[None, :]
    return j > call.query_start + i


def _visible_block(call: AttentionCall, rows: slice, keys: slice) -> np.ndarray | bool:
    """Visibility of a block (mask AND causality), broadcastable to the block's shape."""
    visible = True
    mask = _mask_block(call, rows, keys)
    if mask is not None:
        visible = mask if mask.dtype == np.bool_ else ~np.isneginf(mask)
    hidden = _causal_hidden(call, rows, keys)
    if hidden is not None:
        below = np.zeros((rows.stop - rows.start - hidden.shape[0], hidden.shape[1]), bool)
        visible = visible & ~np.concatenate([hidden, below])
    return visible


def _check_rows(call: AttentionCall, block_size: int | None = None) -> None:
    """The rulebook's "fully masked row" rule (same message), one key block at a time.

    Without a mask every row sees a key: key 0 is causally visible to every query because
    ``query_start >= 0`` whenever ``is_causal``.
    """
    if call.mask is None:
        return
    B, Hq, Tq, Tk = call.shape
    mb, mh = call.mask.shape[:2]
    if block_size is None:
        block_size = max(1, _ROW_CHECK_ELEMENTS // (mb * mh * Tq))
    seen = np.zeros((mb, mh, Tq if call.is_causal else call.mask.shape[2]), dtype=bool)
    last = min(Tk, call.query_start + Tq) if call.is_causal else Tk
    span = Tk if call.mask.shape[3] == 1 and not call.is_causal else block_size
    all_rows = slice(0, Tq)
    for j0 in range(0, last, span):
        keys = slice(j0, min(j0 + span, last))
        seen |= np.any(_visible_block(call, all_rows, keys), axis=-1)
        if seen.all():
            return
    empty = ~np.broadcast_to(seen, (B, Hq, Tq))
    if empty.any():
        b, h, i = (int(n) for n in np.argwhere(empty)[0])
        raise FullyMaskedRowError(
            f"attn_mask/is_causal: query row (batch={b}, head={h}, query={i}) has no "
            f"visible key ({int(empty.sum())} such rows); every query must see at least "
            "one key"
        )


def _scaled_query(call: AttentionCall, compute: np.dtype) -> np.ndarray:
    """``query * scale`` in the compute dtype, grouped ``(B, Hkv, G, Tq, D)``.

    The query is scaled before the product, so a dot product that only the scale brings back
    into range does not overflow (left: partial sums beyond the range)."""
    B, Hq, Tq, D = call.query.shape
    Hkv = call.key.shape[1]
    scale = 1.0 / np.sqrt(D) if call.scale is None else call.scale
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        query = call.query.astype(compute, copy=False) * compute.type(scale)  # (B, Hq, Tq, D)
    return query.reshape(B, Hkv, Hq // Hkv, Tq, D)


def _scores_in_range(call: AttentionCall, compute: np.dtype) -> bool:
    """True when no visible scaled score plus mask entry can overflow ``compute``, so the per-block
    overflow scan can be skipped: ``|s_ij| <= scale * D * max|q| * max|k|``, plus the largest
    ``|mask|``, stays below half the dtype's maximum. Costs a few reductions over query and
    key, so it is only tried when the scores are much larger than the inputs; NaN, infinity or
    a ``-inf`` mask entry give False (the scan then runs)."""
    B, Hq, Tq, Tk = call.shape
    if B * Hq * Tq * Tk < 4 * (call.query.size + call.key.size):
        return False
    D = call.query.shape[3]
    scale = 1.0 / np.sqrt(D) if call.scale is None else call.scale
    with np.errstate(all="ignore"):
        bound = (
            scale
            * D
            * max(float(call.query.max()), -float(call.query.min()))
            * max(float(call.key.max()), -float(call.key.min()))
        )
        if call.float_mask:
            bound += max(abs(float(call.mask.min())), abs(float(call.mask.max())))
    return bool(bound < 0.5 * float(np.finfo(compute).max))  # NaN compares False


def _mask_scores(
    scores: np.ndarray,
    call: AttentionCall,
    compute: np.dtype,
    rows: slice,
    keys: slice,
    in_range: bool = False,
) -> None:
    """In place on ``scores`` ``(B, Hq, len(rows), len(keys))``: add the float mask, raise on
    a visible score that overflows (not scanned when ``in_range``, see
    :func:`_scores_in_range`), set hidden keys to ``-inf``. Visible entries get exactly
    ``scores + mask.astype(compute)``."""
    mask = _mask_block(call, rows, keys)
    with np.errstate(over="ignore", invalid="ignore"):
        if mask is not None and mask.dtype != np.bool_:
            np.add(scores, mask.astype(compute, copy=False), out=scores)
        if not in_range:
            finite = np.isfinite(scores)
            if not finite.all():
                if np.any(~finite & _visible_block(call, rows, keys)):
                    raise_score_overflow(call)
                np.copyto(scores, compute.type(-np.inf), where=~finite)  # only hidden keys
    # A float mask's -inf entries are -inf in the scores already (finite + -inf).
    if mask is not None and mask.dtype == np.bool_:
        np.copyto(scores, compute.type(-np.inf), where=~mask)
    hidden = _causal_hidden(call, rows, keys)
    if hidden is not None:
        np.copyto(scores[:, :, : hidden.shape[0]], compute.type(-np.inf), where=hidden)


def _dense_scores(call: AttentionCall, compute: np.dtype) -> np.ndarray:
    """Scaled scores plus float mask, ``-inf`` where a key is hidden: ``(B, Hq, Tq, Tk)`` in
    the compute dtype (the dense path, before its softmax). Raises ScoreOverflowError when a
    visible score overflows."""
    B, Hq, Tq, Tk = call.shape
    key = call.key.astype(compute, copy=False)[:, :, None]  # (B, Hkv, 1, Tk, D)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        scores = np.matmul(
            _scaled_query(call, compute), key.swapaxes(-1, -2)
        )  # (B, Hkv, G, Tq, Tk)
    scores = scores.reshape(B, Hq, Tq, Tk)
    _mask_scores(scores, call, compute, slice(0, Tq), slice(0, Tk), _scores_in_range(call, compute))
    return scores


def _dense_weights(call: AttentionCall, compute: np.dtype) -> np.ndarray:
    """Attention weights ``(B, Hq, Tq, Tk)`` in the compute dtype (the dense path)."""
    scores = _dense_scores(call, compute)
    # Softmax along keys, in place: every row has a visible (finite) score, so the row max is
    # finite and exp(-inf - max) == 0 for hidden keys.
    with np.errstate(under="ignore"):
        row_max = scores.max(axis=-1, keepdims=True)
        np.subtract(scores, row_max, out=scores)
        np.exp(scores, out=scores)
        total = scores.sum(axis=-1, keepdims=True)
        np.divide(scores, total, out=scores)
    return scores


def _key_block_starts(stop: int, block_size: int) -> range:
    """First key of each block: ``0, n, 2n, ...`` below ``stop``; the last block may be short."""
    return range(0, stop, block_size)


def _online_softmax_step(
    m: np.ndarray, l: np.ndarray, acc: np.ndarray, s: np.ndarray, value: np.ndarray
) -> None:
    """Fold one key block into the running state, in place.

    ``m``, ``l`` ``(..., n, 1)``: running max and running sum of ``exp(s - m)``; ``acc``
    ``(..., n, Dv)``: running sum of ``exp(s - m) * v``; ``s`` ``(..., n, nk)``: the block's
    masked scores (``-inf`` where hidden; overwritten); ``value`` ``(..., nk, Dv)``. When the
    maximum grows from ``m`` to ``m_new``, what was summed under ``m`` is rescaled by
    ``exp(m - m_new)`` (Milakov & Gimelshein 2018, alg. 3; Dao et al. 2022, alg. 1).
    """
    m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
    # A row that has seen no visible key yet keeps m = -inf; subtract 0 there (-inf stays).
    shift = np.where(m_new == -np.inf, s.dtype.type(0), m_new)
    alpha = np.exp(m - shift)  # <= 1; 0 while the row had seen nothing
    p = np.exp(np.subtract(s, shift, out=s), out=s)  # exp(-inf) == 0 for hidden keys
    l *= alpha
    l += p.sum(axis=-1, keepdims=True)
    acc *= alpha
    acc += np.matmul(p, value)
    m[...] = m_new


def _blocked_output(call: AttentionCall, compute: np.dtype, block_size: int) -> np.ndarray:
    """``softmax(scores) @ value`` ``(B, Hq, Tq, Dv)`` in the compute dtype, in tiles of
    ``block_size`` queries by ``block_size`` keys with an online softmax (running max ``m``,
    running sum ``l`` per query row). Peak extra memory O(B Hq (block_size**2 + Tq Dv)).

    Also applies the finiteness rule to query, key and value, which ``call`` was validated
    without: each key/value block is scanned when it is first used (while it is in cache),
    the keys no query sees at the end. Raises NonFiniteInputError on the first bad block (the
    caller then reruns the full validation for the rulebook's first error)."""
    B, Hq, Tq, Tk = call.shape
    Hkv, Dv = call.key.shape[1], call.value.shape[3]
    G = Hq // Hkv
    start = call.query_start
    check_float_array(call.query, "query")
    query = _scaled_query(call, compute)  # (B, Hkv, G, Tq, D)
    key = call.key.astype(compute, copy=False)  # (B, Hkv, Tk, D)
    value = call.value.astype(compute, copy=False)  # (B, Hkv, Tk, Dv)
    out = np.empty((B, Hkv, G, Tq, Dv), dtype=compute)
    in_range = _scores_in_range(call, compute)
    scanned = 0  # keys/values [0, scanned) are known to be finite

    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        for t0 in range(0, Tq, block_size):  # one tile of query rows at a time
            t1 = min(Tq, t0 + block_size)
            m = np.full((B, Hkv, G, t1 - t0, 1), -np.inf, dtype=compute)  # running max
            l = np.zeros((B, Hkv, G, t1 - t0, 1), dtype=compute)  # running sum of exp(s - m)
            acc = np.zeros((B, Hkv, G, t1 - t0, Dv), dtype=compute)  # running sum of exp(s - m) v
            # Causal: keys after the tile's last query position are seen by none of its rows.
            last = min(Tk, start + t1) if call.is_causal else Tk
            for j0 in _key_block_starts(last, block_size):
                keys = slice(j0, min(j0 + block_size, last))
                fresh = slice(scanned, keys.stop)  # first use of these keys: scan them
                if fresh.stop > fresh.start:  # (each block right before its product reads it)
                    check_float_array(call.key[:, :, fresh], "key")
                # Causal: query i sees key j0 iff j0 <= start + i; earlier rows skip the block.
                i0 = min(t1, max(t0, j0 - start)) if call.is_causal else t0
                rows, local = slice(i0, t1), slice(i0 - t0, t1 - t0)
                k_t = key[:, :, None, keys].swapaxes(-1, -2)  # (B, Hkv, 1, D, nk)
                s = np.matmul(query[:, :, :, rows], k_t)  # (B, Hkv, G, n, nk)
                _mask_scores(s.reshape(B, Hq, t1 - i0, -1), call, compute, rows, keys, in_range)
                if fresh.stop > fresh.start:
                    check_float_array(call.value[:, :, fresh], "value")
                    scanned = fresh.stop
                _online_softmax_step(
                    m[:, :, :, local],
                    l[:, :, :, local],
                    acc[:, :, :, local],
                    s,
                    value[:, :, None, keys],
                )
            # every row has a visible key (checked), so l >= 1
            np.divide(acc, l, out=out[:, :, :, t0:t1])
    if scanned < Tk:  # keys that no query sees are inputs too: the rule covers them
        check_float_array(call.key[:, :, scanned:], "key")
        check_float_array(call.value[:, :, scanned:], "value")
    return out.reshape(B, Hq, Tq, Dv)


def _dense_output(call: AttentionCall, compute: np.dtype) -> np.ndarray:
    """``softmax(scores) @ value`` ``(B, Hq, Tq, Dv)`` in the compute dtype ``compute``, from the
    whole ``(B, Hq, Tq, Tk)`` weight array; query heads grouped by a reshape (never repeated)."""
    B, Hq, Tq, Tk = call.shape
    Hkv, Dv = call.key.shape[1], call.value.shape[3]
    weights = _dense_weights(call, compute)  # (B, Hq, Tq, Tk)
    grouped = weights.reshape(B, Hkv, Hq // Hkv, Tq, Tk)  # (B, Hkv, G, Tq, Tk)
    value = call.value.astype(compute, copy=False)[:, :, None]  # (B, Hkv, 1, Tk, Dv)
    with np.errstate(over="ignore", invalid="ignore"):  # non-finite: see _rescaled_output
        return np.matmul(grouped, value).reshape(B, Hq, Tq, Dv)


def _rescaled_output(call: AttentionCall, compute: np.dtype, block_size: int | None) -> np.ndarray:
    """The output recomputed with ``value`` scaled by ``2**-k``, for calls whose output came
    out non-finite although every input is finite; the caller takes from it only the elements
    that came out non-finite.

    Each output is a convex combination of values, so ``|output| <= max|value|`` always fits
    the dtype; but with values near the dtype's maximum the sums on the way overflow: the
    blocked path's running sum of ``exp(s - m) * v`` over up to ``Tk`` terms before dividing,
    and the dense path's ``weights @ value`` when the rounded weights sum to slightly more
    than 1. Scaling by a power of two is exact (barring values that become subnormal, which
    are below ``2**(k - 1022)`` in float64); ``k`` leaves room for ``Tk`` terms. The result is
    scaled back and clipped to ``[-max|value|, max|value|]``, which contains every exact
    output, so rounding at the top of the range cannot produce infinity.

    Only the non-finite elements are replaced: an element overflows only when its own column
    of values reaches near the maximum, so the scaling costs it nothing (values ``2**k``
    below the maximum and smaller contribute at most ``2**(k - 1074)`` of error), whereas an
    element whose visible values are all tiny would lose digits to the subnormal range
    (``5e-324`` scaled by ``2**-k`` is 0). Overflow on the way never comes back finite
    (``inf`` stays ``inf`` or turns into NaN), so every finite element is already right.
    """
    value = call.value.astype(compute, copy=False)
    vmax = np.abs(value).max()
    Tk = call.shape[3]
    k = max(
        1,
        int(np.ceil(np.log2(float(vmax))))
        + int(np.ceil(np.log2(Tk + 1)))
        + 1
        - int(np.finfo(compute).maxexp),
    )
    scaled = call._replace(value=np.ldexp(value, -k).astype(compute, copy=False))
    if block_size is None:
        output = _dense_output(scaled, compute)
    else:
        output = _blocked_output(scaled, compute, block_size)
    with np.errstate(over="ignore"):
        output = np.ldexp(output, k).astype(compute, copy=False)
    return np.clip(output, -vmax, vmax)


def attention_weights(
    query, key, *, attn_mask=None, is_causal=False, query_start=None, scale=None
) -> np.ndarray:
    """Attention weights ``softmax(scale * query @ key^T + mask)`` along the key axis.

    Args:
        query: ``(B, Hq, Tq, D)`` or ``(Tq, D)``; float16, float32 or float64.
        key: ``(B, Hkv, Tk, D)`` or ``(Tk, D)``, same dtype, ``Hq % Hkv == 0``.
        attn_mask: ``None``; bool broadcastable to ``(B, Hq, Tq, Tk)``, True = may attend; or
            float of the same shapes added to the scaled scores (finite or ``-inf``).
        is_causal: key ``j`` visible to local query ``i`` iff ``j <= query_start + i``.
        query_start: absolute position of the first query (``None``: ``Tk - Tq``).
        scale: finite float > 0; ``None`` means ``1/sqrt(D)``.

    Returns:
        ``(B, Hq, Tq, Tk)`` (or ``(Tq, Tk)``) in the input dtype; rows sum to 1, hidden keys
        are exactly 0.

    Raises:
        oracle.rules.AttentionInputError (a ValueError) for any broken rule, including a
        query row with no visible key and scaled scores that overflow. Inputs are not
        modified. Source: Vaswani et al. 2017, eq. 1.
    """
    call = check_attention_call(
        query,
        key,
        None,
        attn_mask=attn_mask,
        is_causal=is_causal,
        query_start=query_start,
        scale=scale,
        needs_value=False,
    )
    _check_rows(call)
    weights = _dense_weights(call, compute_dtype(call.dtype)).astype(call.dtype)
    return weights[0, 0] if call.two_d else weights


def attention(
    query,
    key,
    value,
    *,
    attn_mask=None,
    is_causal=False,
    query_start=None,
    scale=None,
    block_size=None,
) -> np.ndarray:
    """Scaled dot-product attention ``softmax(scale * query @ key^T + mask) @ value``.

    Args:
        query: ``(B, Hq, Tq, D)`` or ``(Tq, D)``; float16, float32 or float64.
        key: ``(B, Hkv, Tk, D)`` or ``(Tk, D)``, same dtype, ``Hq % Hkv == 0``.
        value: ``(B, Hkv, Tk, Dv)`` or ``(Tk, Dv)``, same dtype.
        attn_mask, is_causal, query_start, scale: as in :func:`attention_weights`.
        block_size: which path computes the call; the result differs between paths by
            rounding only, and every path follows the same rules with the same errors.

            - ``None`` (default): the faster path for the call's size
              (:func:`_default_block_size`; the reasons and how they were measured: the
              module docstring): dense when ``Tk <= 128`` or ``B * Hq * Tq * Tk < 2**15``;
              else blocked with ``n = 128`` for causal calls whose query tiles see at most
              3/4 of the keys, for ``B * Hq * 128 * (D + Dv) >= 2**19`` and for
              ``B * Hq * Tq * Tk >= 2**24``; else dense. Small calls are dense, bitwise.
            - ``"dense"``: the dense path, one ``(B, Hq, Tq, Tk)`` score array; bitwise the
              formula ``mutants._common.Pipeline`` mirrors.
            - an int ``n >= 1``: tiles of ``n`` queries by ``n`` keys with an online softmax,
              peak extra memory O(B Hq n (n + Dv)) (Milakov & Gimelshein 2018; Dao et al.
              2022).

    Returns:
        ``(B, Hq, Tq, Dv)`` (or ``(Tq, Dv)``) in the input dtype (float16 is computed in
        float32); always finite: should values near the dtype's maximum make a sum on the way
        overflow, the output is recomputed with the values scaled by a power of two
        (:func:`_rescaled_output`).

    Raises:
        oracle.rules.AttentionInputError for any broken rule (see :mod:`oracle.rules`), the
        first one in the rulebook's order whichever the path. ``block_size`` other than
        ``"dense"`` is checked by :func:`oracle.rules.check_block_size` (``None`` or an int
        >= 1, else ShapeError; the name ``"dense"`` is this module's and is read before that
        check). Inputs are not modified. Source: Vaswani et al. 2017, eq. 1; GQA grouping
        from Ainslie et al. 2023.
    """
    dense = isinstance(block_size, str) and block_size == DENSE
    block_size = None if dense else check_block_size(block_size)
    options = dict(attn_mask=attn_mask, is_causal=is_causal, query_start=query_start, scale=scale)
    # Every rule but finiteness first (array-free, the same for both paths); then the dense
    # path scans query, key and value whole, the blocked path block by block as it reads them
    # (one pass over K and V instead of two). Should any rule fail, the full validation reruns
    # first, so the error is the rulebook's first broken rule.
    try:
        call = check_attention_call(query, key, value, **options, scan=False)
        if block_size is None and not dense:
            block_size = _default_block_size(
                call.query.shape, call.key.shape, call.value.shape, call.is_causal, call.query_start
            )
        if block_size is None:
            for name in ("query", "key", "value"):
                check_float_array(getattr(call, name), name)
            _check_rows(call)
            output = _dense_output(call, compute_dtype(call.dtype))
        else:
            _check_rows(call, block_size)
            output = _blocked_output(call, compute_dtype(call.dtype), block_size)
        error = None
    except AttentionInputError as exc:
        error = exc
    if error is not None:
        check_attention_call(query, key, value, **options)
        raise error
    finite = np.isfinite(output)
    if not finite.all():  # values near the dtype's max: see _rescaled_output
        output = np.where(
            finite, output, _rescaled_output(call, compute_dtype(call.dtype), block_size)
        )
    output = output.astype(call.dtype)
    return output[0, 0] if call.two_d else output
