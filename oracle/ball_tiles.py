"""Exact ``arb_mat`` tiles of the inputs for the ball-arithmetic reference (:mod:`oracle.ball`).

The reference multiplies a block of query rows by only the key tiles that one of its rows
sees (a causal, windowed or packed call then costs about its visible scores), and the
weights by the matching value tiles. Float inputs enter exactly (binary64 and narrower);
the tiles are padded with zero keys and a block with zero rows, which change no value.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
from flint import arb_mat

__all__ = ["KEY_TILE", "KEPT_ENTRIES", "PAD_FROM", "ROW_BLOCK", "Tiles", "matrix", "padded"]

KEY_TILE = 128  # keys per tile of K and V (the last padded with zero keys)
ROW_BLOCK = 64  # query rows per block
# FLINT multiplies arb matrices whose every dimension reaches about 52 (60 at 128 bits) by
# blocks of integers, about 4x faster per multiply-add than entry by entry (measured on the
# development machine with python-flint 0.9): a product of at least PAD_FROM[0] rows whose
# other dimensions reach PAD_FROM[1] is padded with zero rows to ROW_BLOCK.
PAD_FROM = (16, 64)
# Converting a float to an arb entry costs about 170 ns, most of a decode call's time
# against a long cache; the tiles converted last are kept across calls (a cache's keys are
# converted once, not once per append). Measured: 58 bytes an entry with its key, so
# 1 << 22 entries take about 230 MiB per process (a pytest -n 8 run: up to 1.8 GiB). The K
# and V of any ci-profile kernel-sized call fit (properties.sizes: max_kv = 1 << 20 in all);
# thorough's largest (1 << 23) do not, and their long decodes convert older tiles again.
KEPT_ENTRIES = 1 << 22
_kept: OrderedDict[tuple, arb_mat] = OrderedDict()  # (shape, bytes) -> tile, oldest first
_kept_entries = 0


def matrix(x: np.ndarray) -> arb_mat:
    """``(m, n)`` float array as an exact ``arb_mat``."""
    m, n = x.shape
    return arb_mat(m, n, x.astype(np.float64).ravel().tolist())


def _tile(x: np.ndarray) -> arb_mat:
    """:func:`matrix` of ``x``, reused when the same values were converted lately (keyed by
    shape and bytes, compared exactly; the :data:`KEPT_ENTRIES` used last are kept). The
    reference only reads its tiles, so one ``arb_mat`` may serve several calls."""
    global _kept_entries
    x = np.ascontiguousarray(x, dtype=np.float64)
    key = (x.shape, x.tobytes())
    tile = _kept.get(key)
    if tile is not None:
        _kept.move_to_end(key)
        return tile
    tile = _kept[key] = matrix(x)
    _kept_entries += x.size
    while _kept_entries > KEPT_ENTRIES:
        (shape, _), _ = _kept.popitem(last=False)
        _kept_entries -= int(np.prod(shape))
    return tile


class Tiles:
    """An ``(n, c)`` float array as exact ``arb_mat`` tiles of ``size`` rows (keys; the
    reference uses :data:`KEY_TILE`, or ``n`` when that is fewer), the last padded with
    zero rows, each converted on first use (or reused, :func:`_tile`): ``tiles[t]`` is rows
    ``[t * size, (t + 1) * size)``, ``(size, c)`` (``transpose``: ``(c, size)``)."""

    def __init__(self, x: np.ndarray, size: int, transpose: bool = False):
        self.x, self.size, self.transpose, self.tiles = x, size, transpose, {}

    def __getitem__(self, t: int) -> arb_mat:
        if t not in self.tiles:
            tile = self.x[t * self.size : (t + 1) * self.size]
            tile = np.pad(tile, ((0, self.size - len(tile)), (0, 0)))
            self.tiles[t] = _tile(tile.T if self.transpose else tile)
        return self.tiles[t]


def padded(n: int, *dims: int) -> int:
    """Rows to give a product of ``n`` rows whose other dimensions are ``dims``: ``n``, or
    :data:`ROW_BLOCK` where FLINT's faster algorithm pays (:data:`PAD_FROM`)."""
    few, small = PAD_FROM
    return ROW_BLOCK if few <= n < ROW_BLOCK and min(dims) >= small else n
