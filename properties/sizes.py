"""Sizes aimed at the places tiled attention kernels break, and how large each profile goes.

Kernels cut queries, keys and the head dim into tiles of 16-256, split long key sequences
across workers and merge the partial softmaxes (flash-decoding), dispatch to another code path
past a length, and grow caches past a capacity. Their bugs show at a tile's edge: a last
partial block, a tile that starts at an unaligned ``query_start``, one key past a split. So a
size is drawn mostly *at and around* a tile multiple (``k * t - 1``, ``k * t``, ``k * t + 1``
for ``t`` in :data:`TILES`), sometimes prime (no tile divides it), sometimes uniform, and
sometimes tiny.

Shrinking. A boundary size is drawn as ``(t, k, offset)``: Hypothesis shrinks ``t`` towards
16, ``k`` towards 1 and ``offset`` towards 0, so a failing size shrinks to the smallest tile
multiple (or its neighbour) that still fails, and the counterexample names the boundary
(``key_len=129``: one key past 128). The branches of :func:`boundary_sizes` are ordered so that
a failure that needs no large size shrinks to a tiny one.

Limits. :func:`limits` gives the largest sizes the current Hypothesis profile draws
(:data:`LIMITS`); ``ATTNPROPS_MAX_LEN`` (and ``ATTNPROPS_MAX_DECODE_LEN``) raise them for a
nightly run, e.g. ``ATTNPROPS_MAX_LEN=4096 ATTNPROPS_MAX_DECODE_LEN=32768``.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from hypothesis import settings
from hypothesis import strategies as st

TILES = (16, 32, 64, 128, 256)  # tile sizes of real kernels (FlashAttention, xFormers, cuDNN)
HEAD_DIMS = (64, 59, 80, 96, 111, 128, 256)  # FlashAttention's test grid and common models
OFFSETS = (0, 1, -1)  # at, one past, one short of a tile multiple


class Limits(NamedTuple):
    """Largest sizes drawn: prefill ``Tq``/``Tk`` (``max_len``), decode ``Tk``
    (``max_decode_len``), score elements ``B * Hq * Tq * Tk`` per call (``max_scores``), K/V
    elements ``B * Hkv * Tk * (D + Dv)`` (``max_kv``: what a reference call converts to
    exact numbers), and appends of a growing cache (``max_appends``)."""

    max_len: int
    max_decode_len: int
    max_scores: int
    max_kv: int
    max_appends: int


# Per profile. ci stays inside pytest -n auto's 60 s on two cores; thorough goes larger.
LIMITS = {
    "dev": Limits(max_len=300, max_decode_len=2100, max_scores=1 << 19, max_kv=1 << 19,
                  max_appends=300),
    "ci": Limits(max_len=1100, max_decode_len=8200, max_scores=1 << 20, max_kv=1 << 20,
                 max_appends=600),
    "thorough": Limits(max_len=2100, max_decode_len=16500, max_scores=1 << 23, max_kv=1 << 23,
                       max_appends=1200),
}
LIMITS["mutation"] = LIMITS["ci"]
LEN_ENV_VAR = "ATTNPROPS_MAX_LEN"
DECODE_ENV_VAR = "ATTNPROPS_MAX_DECODE_LEN"


def _env_int(name: str) -> int | None:
    text = os.environ.get(name)
    if text is None or not text.strip():
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: must be a positive integer") from None
    if value < 1:
        raise ValueError(f"{name}={text!r}: must be a positive integer")
    return value


def limits(profile: str | None = None) -> Limits:
    """The sizes of ``profile`` (default: the loaded Hypothesis profile, ``ci`` when it has
    none of its own), raised (never lowered) by ``ATTNPROPS_MAX_LEN`` /
    ``ATTNPROPS_MAX_DECODE_LEN``; a longer ``max_len`` scales ``max_scores`` with its square.

    Raises:
        ValueError: an environment variable that is not a positive integer.
    """
    if profile is None:
        get_name = getattr(settings, "get_current_profile_name", None)  # Hypothesis >= 6.135
        profile = get_name() if get_name else getattr(settings, "_current_profile", None)
    name = profile or "ci"
    base = LIMITS.get(name, LIMITS["ci"])
    max_len = max(base.max_len, _env_int(LEN_ENV_VAR) or 0)
    decode = max(base.max_decode_len, _env_int(DECODE_ENV_VAR) or 0)
    grow = (max_len / base.max_len) ** 2
    return Limits(max_len, decode, int(base.max_scores * grow),
                  int(base.max_kv * max(grow, decode / base.max_decode_len)),
                  max(base.max_appends, max_len // 2))


def primes_up_to(n: int) -> list[int]:
    """Primes ``<= n`` (a sieve); lengths no tile divides."""
    sieve = bytearray([1]) * (n + 1)
    sieve[:2] = b"\0\0"
    for p in range(2, int(n**0.5) + 1):
        if sieve[p]:
            sieve[p * p::p] = bytearray(len(sieve[p * p::p]))
    return [p for p in range(n + 1) if sieve[p]]


def boundary_sizes(max_size: int, *, min_size: int = 1) -> st.SearchStrategy[int]:
    """Sizes in ``[min_size, max_size]``, mostly at and around multiples of :data:`TILES`.

    Two branches (Hypothesis shrinks towards the first): tiny, ``[min_size, 8]``, one draw in
    eight; and ``k * t + offset`` with ``t`` in TILES (shrinks to 16), ``k >= 1`` (shrinks to 1) and
    ``offset`` in OFFSETS (``0, 1, -1``; two draws in three) or anywhere in ``[-t/2, t/2]``
    (so primes and every other size occur too), shrinking towards 0. A failing size so
    shrinks to the smallest length next to a tile multiple that still fails: a fault past 128
    that needs a partial 64-block shrinks to 129. Example draws: ``1``, ``129``, ``255``,
    ``1024``, ``113``, ``797``.
    """
    if not 1 <= min_size <= max_size:
        raise ValueError(f"min_size={min_size}, max_size={max_size}: need 1 <= min_size <= max_size")
    tiny = st.integers(min_size, max(min_size, min(8, max_size)))
    tiles = [t for t in TILES if t // 2 <= max_size] or [TILES[0]]

    def near(t: int) -> st.SearchStrategy[int]:
        offsets = st.one_of(st.sampled_from(OFFSETS), st.sampled_from(OFFSETS),
                            st.integers(-(t // 2), t // 2))
        return st.builds(lambda k, off: k * t + off, st.integers(1, max(1, (max_size + t) // t)),
                         offsets)

    # Clamped, not filtered: near a small max_size most k * t + offset fall outside.
    boundary = st.sampled_from(tiles).flatmap(near).map(lambda n: min(max(n, min_size), max_size))
    if max_size <= 8:
        return tiny
    return st.one_of(tiny, *[boundary] * 7)


def head_dims(max_dim: int = 256) -> st.SearchStrategy[int]:
    """Head dims up to ``max_dim``: :data:`HEAD_DIMS` (shrinks to 64) or tiny ``[1, 8]``;
    when no listed dim fits, any of ``[1, max_dim]``."""
    listed = [d for d in HEAD_DIMS if d <= max_dim]
    if not listed:
        return st.integers(1, max_dim)
    return st.one_of(st.sampled_from(listed), st.integers(1, min(8, max_dim)))
