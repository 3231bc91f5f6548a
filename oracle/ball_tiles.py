"""Exact ``arb_mat`` tiles of the inputs for the ball-arithmetic reference (:mod:`oracle.ball`).

The reference multiplies a block of query rows by only the key tiles that one of its rows
sees (a causal, windowed or packed call then costs about its visible scores), and the
weights by the matching value tiles. Float inputs enter exactly (binary64 and narrower);
the tiles are padded with zero keys and a block with zero rows, which change no value.
"""

from __future__ import annotations

import numpy as np
from flint import arb_mat

__all__ = ["KEY_TILE", "PAD_FROM", "ROW_BLOCK", "Tiles", "matrix", "padded"]

KEY_TILE = 128  # keys per tile of K and V (the last padded with zero keys)
ROW_BLOCK = 64  # query rows per block
# FLINT multiplies arb matrices whose every dimension reaches about 52 (60 at 128 bits) by
# blocks of integers, about 4x faster per multiply-add than entry by entry (measured on the
# development machine with python-flint 0.9): a product of at least PAD_FROM[0] rows whose
# other dimensions reach PAD_FROM[1] is padded with zero rows to ROW_BLOCK.
PAD_FROM = (16, 64)


def matrix(x: np.ndarray) -> arb_mat:
    """``(m, n)`` float array as an exact ``arb_mat``."""
    m, n = x.shape
    return arb_mat(m, n, x.astype(np.float64).ravel().tolist())


class Tiles:
    """An ``(n, c)`` float array as exact ``arb_mat`` tiles of :data:`KEY_TILE` rows (keys),
    the last padded with zero rows, each converted on first use: ``tiles[t]`` is rows
    ``[t * KEY_TILE, (t + 1) * KEY_TILE)``, ``(KEY_TILE, c)`` (``transpose``: ``(c,
    KEY_TILE)``)."""

    def __init__(self, x: np.ndarray, transpose: bool = False):
        self.x, self.transpose, self.tiles = x, transpose, {}

    def __getitem__(self, t: int) -> arb_mat:
        if t not in self.tiles:
            tile = self.x[t * KEY_TILE : (t + 1) * KEY_TILE]
            tile = np.pad(tile, ((0, KEY_TILE - len(tile)), (0, 0)))
            self.tiles[t] = matrix(tile.T if self.transpose else tile)
        return self.tiles[t]


def padded(n: int, *dims: int) -> int:
    """Rows to give a product of ``n`` rows whose other dimensions are ``dims``: ``n``, or
    :data:`ROW_BLOCK` where FLINT's faster algorithm pays (:data:`PAD_FROM`)."""
    few, small = PAD_FROM
    return ROW_BLOCK if few <= n < ROW_BLOCK and min(dims) >= small else n
