"""impl's dense path (``block_size="dense"``): the whole ``(B, Hq, Tq, Tk)`` score array,
masked in place and normalized in place.

Its results are bitwise those of the straightforward formula (Vaswani et al. 2017, eq. 1:
``softmax(scale * q @ k^T + mask) @ v`` with the row maximum subtracted;
``impl/tests/test_blocked.py`` checks this). :class:`DensePath` is a mixin of
:class:`impl.attention.Attention`: each step is a method, and the steps it shares with the
blocked path (scaling, masking) are :class:`impl.scores.Scores`'. Shape legend as in
:mod:`impl`; ``G = Hq // Hkv``.
"""

from __future__ import annotations

import numpy as np

from attnprops.oracle.rules import AttentionCall

__all__ = ["DensePath"]


class DensePath:
    """The dense path, one method per step."""

    def key_transposed(self, call: AttentionCall, compute: np.dtype) -> np.ndarray:
        """``key^T`` ``(B, Hkv, 1, D, Tk)`` in the compute dtype: the last two axes swapped, a
        group axis added (query head ``h`` reads K/V head ``h // G``)."""
        return call.key.astype(compute, copy=False)[:, :, None].swapaxes(-1, -2)

    def dense_scores(self, call: AttentionCall, compute: np.dtype) -> np.ndarray:
        """Scaled scores plus float mask, ``-inf`` where a key is hidden: ``(B, Hq, Tq, Tk)``
        in the compute dtype (before the softmax). Raises ScoreOverflowError when a visible
        score overflows."""
        B, Hq, Tq, Tk = call.shape
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            scores = np.matmul(
                self.scaled_query(call, compute), self.key_transposed(call, compute)
            )  # (B, Hkv, G, Tq, Tk)
        scores = scores.reshape(B, Hq, Tq, Tk)
        in_range = self.scores_in_range(call, compute)
        self.mask_scores(scores, call, compute, slice(0, Tq), slice(0, Tk), in_range)
        return scores

    def softmax(self, scores: np.ndarray) -> np.ndarray:
        """Softmax along keys of masked scores ``(B, Hq, Tq, Tk)``, in place (returned):
        every row has a visible (finite) score, so the row max is finite and
        ``exp(-inf - max) == 0`` for hidden keys. ``s - max`` overflows to ``-inf`` only
        where the scores span more than the dtype's range (a float mask of ``-1e308`` and
        ``1e308`` in one row), and ``exp`` of it is 0, as ``exp`` of the exact difference
        underflows to: the overflow is ignored, as the underflow is."""
        with np.errstate(under="ignore", over="ignore"):
            row_max = scores.max(axis=-1, keepdims=True)
            np.subtract(scores, row_max, out=scores)
            np.exp(scores, out=scores)
            total = scores.sum(axis=-1, keepdims=True)
            np.divide(scores, total, out=scores)
        return scores

    def softmax_with_sinks(
        self, scores: np.ndarray, call: AttentionCall, compute: np.dtype
    ) -> np.ndarray:
        """Softmax of masked scores ``(B, Hq, Tq, Tk)`` whose denominators also hold each
        head's sink (:mod:`oracle.rules.sinks`): the sink is one more key column, of score
        ``sigma_h`` in the compute dtype (:meth:`sink_logits`), through :meth:`softmax`, and its column is dropped.
        A row that sees no key has weights 0 there (its finite sink is its maximum)."""
        B, Hq, Tq, Tk = scores.shape
        sink = self.sink_logits(call, compute)[:, None, None]
        sink = np.broadcast_to(sink, (B, Hq, Tq, 1))
        return self.softmax(np.concatenate([scores, sink], axis=-1))[..., :Tk]

    def log_sum_exp(self, scores: np.ndarray) -> np.ndarray:
        """``log sum_j exp(s_j)`` of each row of masked scores ``(B, Hq, Tq, Tk)``, as ``m +
        log sum_j exp(s_j - m)`` with ``m`` the row's maximum (Blanchard, Higham & Higham
        2021, alg. 2.1): ``(B, Hq, Tq)`` in the scores' dtype, ``-inf`` for a row with no
        visible key (the sink not counted). An overflow of ``s - m`` to ``-inf`` is ignored
        (:meth:`softmax`)."""
        with np.errstate(under="ignore", over="ignore", divide="ignore", invalid="ignore"):
            row_max = scores.max(axis=-1, keepdims=True)
            shift = np.where(np.isneginf(row_max), scores.dtype.type(0), row_max)
            total = np.exp(scores - shift).sum(axis=-1, keepdims=True)
            return (shift + np.log(total))[..., 0]

    def dense_weights(
        self, call: AttentionCall, compute: np.dtype, lse: np.ndarray | None = None
    ) -> np.ndarray:
        """Attention weights ``(B, Hq, Tq, Tk)`` in the compute dtype (with the sinks in the
        denominators when the call has them, :meth:`softmax_with_sinks`); ``lse``: an array
        ``(B, Hq, Tq)`` to fill with :meth:`log_sum_exp` of the scores, or None."""
        scores = self.dense_scores(call, compute)
        if lse is not None:
            lse[...] = self.log_sum_exp(scores)
        if call.sinks is None:
            return self.softmax(scores)
        return self.softmax_with_sinks(scores, call, compute)

    def weighted_values(
        self, weights: np.ndarray, call: AttentionCall, compute: np.dtype
    ) -> np.ndarray:
        """``weights @ value`` ``(B, Hq, Tq, Dv)`` in the compute dtype; query heads grouped
        by a reshape (never repeated)."""
        B, Hq, Tq, Tk = call.shape
        Hkv, Dv = call.key.shape[1], call.value.shape[3]
        grouped = weights.reshape(B, Hkv, Hq // Hkv, Tq, Tk)  # (B, Hkv, G, Tq, Tk)
        value = call.value.astype(compute, copy=False)[:, :, None]  # (B, Hkv, 1, Tk, Dv)
        with np.errstate(over="ignore", invalid="ignore"):  # non-finite: Attention.rescaled_output
            return np.matmul(grouped, value).reshape(B, Hq, Tq, Dv)

    def dense_output(
        self, call: AttentionCall, compute: np.dtype, lse: np.ndarray | None = None
    ) -> np.ndarray:
        """``softmax(scores) @ value`` ``(B, Hq, Tq, Dv)`` in the compute dtype, from the
        whole ``(B, Hq, Tq, Tk)`` weight array; fills ``lse`` ``(B, Hq, Tq)`` with the rows'
        log-sum-exp when given (:meth:`dense_weights`)."""
        return self.weighted_values(self.dense_weights(call, compute, lse), call, compute)
