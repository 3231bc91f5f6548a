"""A tiled, FlashAttention-style attention kernel in NumPy, for the mutants of the kernel kind.

Real kernels are right on small inputs and wrong past a tile, a split or a capacity. The
mutants that model them take :class:`TiledKernel` (an :class:`impl.Attention` whose
``attention`` runs this kernel past a size), override the one step that holds the fault and
set the sizes past which the kernel runs (below them, impl runs: a mutant is exactly impl on
every small case; ``attention_weights`` and ``cached_attention`` are impl's, the latter calling
the kernel). The correct kernel (no override) agrees with impl within the suite's
bounds (``ci/tests/test_tiled_kernel.py``). Shape legend as in :mod:`impl`; ``G = Hq // Hkv``.

The kernel (Dao et al. 2022, alg. 1; Milakov & Gimelshein 2018)::

    for each query tile [t0, t1) of q_tile rows:
        m, l, acc = -inf, 0, 0                                   # (.., n, 1), (.., n, Dv)
        for each split [s0, s1) of the keys (one split unless split_kv and Tk > split_kv):
            for each key tile [j0, j1) of k_tile keys in the split and in the tile's key
            range (all keys; a block-sparse kernel's narrower), that a causal row can see:
                s = scale * sum over head-dim chunks (q[.., d0:d1] @ k[.., d0:d1]^T) + bias
                s = -inf where hidden;  online-softmax step into (m_i, l_i, acc_i)
            merge the split: m = max(m, m_i); l, acc rescaled by exp(m_old - m), exp(m_i - m)
        lse = m + log(l)                                         # before the sink
        with sinks: merge (sigma_h, 1, 0) once more (the sink: one more key, value 0)
        out = acc / l

Validation is the rulebook's (:func:`oracle.rules.check_attention_inputs`, whose dense
visibility and bias the tiles read), so errors are impl's (but for the score-overflow rule,
which impl applies and this kernel does not: kernel-sized cases never reach it). float16 and
bfloat16 compute in float32.
"""

from __future__ import annotations

import numpy as np

from attnprops import impl
from attnprops.oracle.rules import AttentionProblem
from attnprops.oracle.rules import check_attention_inputs
from attnprops.oracle.rules import check_flag
from attnprops.oracle.rules import compute_dtype
from attnprops.oracle.rules import dense_visibility
from attnprops.oracle.rules import takes_options

__all__ = ["REFERENCE_PROPERTIES", "TILED_CAPABILITIES", "TiledKernel", "seen_as"]

# The kernel-sized properties that compare a call with the reference, one per shape kind: a
# kernel's arithmetic fault (a wrong accumulator, a lost rounding) shows in any of them.
REFERENCE_PROPERTIES = (
    "test_kernel_sized_prefill_matches_reference",
    "test_kernel_sized_decode_matches_reference",
    "test_kernel_sized_cross_matches_reference",
    "test_kernel_sized_chunk_matches_reference",
)

# What every mutant on this kernel declares (properties.subject): impl's dtypes, the 16-bit
# ones computed in float32 as in impl, so the error bounds hold it to float32 arithmetic; it
# takes sinks, local windows (impl's convention, offsets) and packed documents (both read
# from the rulebook's visibility, tile by tile) and returns the log-sum-exp. It also takes
# ``chunk_size`` (read the same way), which only the mutants of chunked attention declare, so
# that the properties' draws for the others stay as they were.
TILED_CAPABILITIES = {
    "dtypes": impl.ATTNPROPS_CAPABILITIES["dtypes"],
    "compute_dtypes": impl.ATTNPROPS_CAPABILITIES["compute_dtypes"],
    "sinks": True,
    "window": impl.ATTNPROPS_CAPABILITIES["window"],
    "segment_ids": True,
    "lse": True,
}


def seen_as(problem: AttentionProblem, **changes) -> AttentionProblem:
    """``problem`` as a kernel that reads the call with ``changes`` sees it: those call
    fields replaced (``window=None``, ``is_causal=False``, a mask or ``segments`` read
    wrong) and the visibility and bias derived from them again by the rulebook
    (:func:`oracle.rules.dense_visibility`), so the tiles read the changed call."""
    visible, bias = dense_visibility(problem.call._replace(**changes))
    return problem.replace(**changes, visible=visible, bias=bias)


class TiledKernel(impl.Attention):
    """impl's attention, computed in tiles once the call is large enough (see the module doc).

    Attributes (a mutant's thresholds): ``q_tile``/``k_tile`` rows and keys per tile;
    ``split_kv`` keys per split (None: no split); ``d_chunk`` head dims per chunk (None: one
    chunk); ``min_key_len``/``min_query_len``/``min_head_dim``: the kernel runs when the
    call reaches all three (else impl runs).
    """

    q_tile = 64
    k_tile = 64
    split_kv: int | None = None
    d_chunk: int | None = None
    min_key_len = 1
    min_query_len = 1
    min_head_dim = 1

    # -- dispatch ---------------------------------------------------------------------------
    def runs(self, problem: AttentionProblem) -> bool:
        """Whether this call takes the tiled kernel (else impl)."""
        _, _, Tq, D = problem.query.shape
        return (
            problem.key.shape[2] >= self.min_key_len
            and Tq >= self.min_query_len
            and D >= self.min_head_dim
        )

    # -- the steps a mutant overrides -------------------------------------------------------
    def key_range(self, problem: AttentionProblem, rows: slice) -> tuple[int, int]:
        """The keys ``[lo, hi)`` the query tile ``rows`` reads (a block-sparse kernel's range
        for the tile): all of them; the tiles' visibility hides the rest."""
        return 0, problem.key.shape[2]

    def key_tiles(self, start: int, stop: int) -> list[tuple[int, int]]:
        """Key tiles ``[j0, j1)`` covering ``[start, stop)``; the last one may be short."""
        return [(j, min(j + self.k_tile, stop)) for j in range(start, stop, self.k_tile)]

    def splits(self, stop: int) -> list[tuple[int, int]]:
        """Key splits ``[s0, s1)`` covering ``[0, stop)`` (split-KV, flash-decoding)."""
        if self.split_kv is None or stop <= self.split_kv:
            return [(0, stop)]
        return [(s, min(s + self.split_kv, stop)) for s in range(0, stop, self.split_kv)]

    def head_dim_chunks(self, D: int) -> list[tuple[int, int]]:
        """Head-dim chunks ``[d0, d1)`` covering ``[0, D)``."""
        step = self.d_chunk or D
        return [(d, min(d + step, D)) for d in range(0, D, step)]

    def skips(self, j0: int, last_row_position: int) -> bool:
        """Causal: a key tile starting at ``j0`` is skipped when no row of the query tile may
        see it, i.e. ``j0 > query_start + t1 - 1`` (the tile's last row position)."""
        return j0 > last_row_position

    def row_lse(self, state, splits) -> np.ndarray:
        """Each row's log-sum-exp ``(B, Hkv, G, n)`` from the merged ``(m, l, acc)`` (the sink
        not merged yet): ``m + log(l)`` (``-inf`` where no key was seen). ``splits``: each
        split's own ``(m_i, l_i)``, which a split-KV combine step reads."""
        m, l, _ = state
        with np.errstate(divide="ignore"):
            return (np.where(np.isneginf(m), 0, m) + np.log(l))[..., 0]

    def merge(self, state, part) -> None:
        """Fold a split's ``(m_i, l_i, acc_i)`` into the running ``(m, l, acc)``, in place:
        ``m = max(m, m_i)``, each side rescaled by ``exp(its max - m)``."""
        m, l, acc = state
        m_i, l_i, acc_i = part
        m_new = np.maximum(m, m_i)
        shift = np.where(np.isneginf(m_new), 0, m_new)
        a, a_i = np.exp(m - shift), np.exp(m_i - shift)
        l *= a
        l += a_i * l_i
        acc *= a
        acc += a_i * acc_i
        m[...] = m_new

    @staticmethod
    def _empty(problem, rows: int, compute):
        """``(m, l, acc)`` of nothing seen: ``-inf``, 0, 0, ``(B, Hkv, G, rows, 1)`` and
        ``(..., rows, Dv)``."""
        B, Hkv, G = problem.batch, problem.num_kv_heads, problem.group
        m = np.full((B, Hkv, G, rows, 1), -np.inf, compute)
        return m, np.zeros_like(m), np.zeros((B, Hkv, G, rows, problem.value.shape[3]), compute)

    def split_start(self, problem, rows: int, compute):
        """A split's initial ``(m, l, acc)``: nothing seen (``-inf``, 0, 0)."""
        return self._empty(problem, rows, compute)

    def sink_part(self, problem, rows: int, compute):
        """The sinks as one more part to merge, once per query tile: ``m = sigma_h``, ``l =
        1`` (``0`` for a sink of ``-inf``), ``acc = 0``; None without sinks."""
        if problem.sinks is None:
            return None
        m, l, acc = self._empty(problem, rows, compute)
        shape = (1, problem.num_kv_heads, problem.group, 1, 1)
        m[...] = problem.sinks.astype(compute).reshape(shape)
        l[...] = np.isfinite(m)
        return m, l, acc

    def online_step(self, m, l, acc, s, value) -> None:
        """Fold one key tile's scores ``s`` (``-inf`` where hidden) into ``(m, l, acc)``, in
        place: the new maximum, and what was summed under the old one rescaled by
        ``exp(m_old - m_new)`` (Milakov & Gimelshein 2018, alg. 3)."""
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
        shift = np.where(np.isneginf(m_new), 0, m_new)
        alpha = np.exp(m - shift)
        p = np.exp(s - shift)
        l *= alpha
        l += p.sum(axis=-1, keepdims=True)
        self.accumulate(acc, alpha, p, value)
        m[...] = m_new

    def accumulate(self, acc, alpha, p, value) -> None:
        """The output accumulator's update of :meth:`online_step`, in place: ``acc = acc *
        alpha + p @ value`` (``p`` the tile's ``exp(s - m_new)``, ``value`` its values)."""
        acc *= alpha
        acc += np.matmul(p, value)

    # -- the kernel -------------------------------------------------------------------------
    def tile_dots(self, q, k, rows, keys):
        """``q . k`` (scaled q) of query rows ``rows`` and keys ``keys``, summed over the
        head-dim chunks; broadcastable to ``(B, Hkv, G, n, nk)``."""
        s = 0
        for d0, d1 in self.head_dim_chunks(q.shape[-1]):
            s = s + np.matmul(q[:, :, :, rows, d0:d1], k[:, :, None, keys, d0:d1].swapaxes(-1, -2))
        return s

    def tile_scores(self, problem, q, k, rows, keys, compute):
        """Scores of query rows ``rows`` and keys ``keys``: ``(B, Hkv, G, n, nk)``."""
        s = self.tile_dots(q, k, rows, keys)
        B, Hkv, G = q.shape[:3]
        shape = (B, Hkv, G, rows.stop - rows.start, keys.stop - keys.start)
        s = np.broadcast_to(s, shape).copy()
        if problem.bias is not None:
            bias = problem.bias[:, :, rows, keys].astype(compute).reshape(shape)
            s += np.where(np.isneginf(bias), 0, bias)
        visible = problem.visible[:, :, rows, keys].reshape(shape)
        s[~visible] = -np.inf
        return s

    def tiled_output(self, problem: AttentionProblem) -> tuple[np.ndarray, np.ndarray]:
        """``(output (B, Hq, Tq, Dv), lse (B, Hq, Tq))`` in the compute dtype."""
        compute = compute_dtype(problem.dtype)
        B, Hq, Tq, D = problem.query.shape
        Hkv, Tk = problem.key.shape[1], problem.key.shape[2]
        G, Dv = problem.group, problem.value.shape[3]
        scale = 1.0 / np.sqrt(D) if problem.scale is None else problem.scale
        q = (problem.query.astype(compute) * compute.type(scale)).reshape(B, Hkv, G, Tq, D)
        k = problem.key.astype(compute)
        v = problem.value.astype(compute)
        out = np.empty((B, Hkv, G, Tq, Dv), compute)
        lse = np.empty((B, Hkv, G, Tq), compute)
        for t0 in range(0, Tq, self.q_tile):
            t1 = min(Tq, t0 + self.q_tile)
            rows = slice(t0, t1)
            state = (
                np.full((B, Hkv, G, t1 - t0, 1), -np.inf, compute),
                np.zeros((B, Hkv, G, t1 - t0, 1), compute),
                np.zeros((B, Hkv, G, t1 - t0, Dv), compute),
            )
            lo, hi = self.key_range(problem, rows)
            splits = []
            for s0, s1 in self.splits(Tk):
                m, l, acc = self.split_start(problem, t1 - t0, compute)
                for j0, j1 in self.key_tiles(max(s0, lo), min(s1, hi)):
                    if problem.is_causal and self.skips(j0, problem.query_start + t1 - 1):
                        continue
                    keys = slice(j0, j1)
                    s = self.tile_scores(problem, q, k, rows, keys, compute)
                    self.online_step(m, l, acc, s, v[:, :, None, keys])
                splits.append((m.copy(), l.copy()))
                self.merge(state, (m, l, acc))
            lse[:, :, :, rows] = self.row_lse(state, splits)
            sink = self.sink_part(problem, t1 - t0, compute)
            if sink is not None:
                self.merge(state, sink)
            out[:, :, :, rows] = state[2] / state[1]
        return out.reshape(B, Hq, Tq, Dv), lse.reshape(B, Hq, Tq)

    # -- the public API ---------------------------------------------------------------------
    @takes_options(without=("alibi_slopes", "softcap"))
    def attention(self, query, key, value, *, return_lse=False, **options):
        """Like :func:`impl.attention` (same arguments, rules and errors; without ALiBi or a
        cap); ``return_lse=True`` gives ``(output, lse)``, ``lse`` in the compute dtype, as
        impl's."""
        return_lse = check_flag(return_lse, "return_lse")
        problem = check_attention_inputs(query, key, value, **options)
        if not self.runs(problem):
            return super().attention(query, key, value, **options, return_lse=return_lse)
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            output, lse = self.tiled_output(problem)
        output = output.astype(problem.dtype)
        if problem.two_d:
            output, lse = output[0, 0], lse[0, 0]
        return (output, lse) if return_lse else output
