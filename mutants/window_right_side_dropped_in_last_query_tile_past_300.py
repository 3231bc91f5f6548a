"""Mutant: past 300 queries, the last partial 64-row query tile ignores the window's right side.

What is broken: when ``Tq > 300`` and ``Tq`` is not a multiple of 64, the rows of the last
(partial) query tile see every key after ``p`` (the window's right side ``p + right`` is not
applied; the left side and causality are). Only non-causal calls with a right side notice.

Real-world mistake: a kernel whose ragged last M-block takes the "even MN / no local mask"
template branch, so only the bounds check runs there, not the local (right) mask.
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES
THRESHOLD = 300
TILE = 64


class _Steps(impl.Attention):
    def _last_tile(self, call):
        Tq = call.shape[2]
        if call.window is None or call.window[1] is None or Tq <= THRESHOLD or Tq % TILE == 0:
            return None
        return Tq // TILE * TILE

    def window_hidden(self, call, rows, keys):
        hidden = super().window_hidden(call, rows, keys)
        t0 = self._last_tile(call)
        if hidden is None or t0 is None:
            return hidden
        p = call.query_start + np.arange(rows.start, rows.stop)[:, None]
        j = np.arange(keys.start, keys.stop)[None, :]
        left = call.window[0]
        loose = (
            np.zeros_like(hidden) if left is None else np.broadcast_to(j < p - left, hidden.shape)
        )
        in_last = np.arange(rows.start, rows.stop)[:, None] >= t0
        return np.where(in_last, loose, hidden)  # FAULT: no right side in the last tile

    def tile_key_range(self, call, rows, block_size):
        first, stop = super().tile_key_range(call, rows, block_size)
        if self._last_tile(call) is not None:
            Tk = call.shape[3]
            return 0, (min(Tk, call.query_start + rows.stop) if call.is_causal else Tk)
        return first, stop


MUTANT = Mutant(
    name="window_right_side_dropped_in_last_query_tile_past_300",
    description="past 300 queries the last partial 64-row tile ignores the window's right side",
    models="the ragged last query block taking the template branch without the local mask",
    killed_by=("test_kernel_sized_window_equals_its_mask",),
    steps=_Steps,
)
__all__ = MUTANT.export(globals())
