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

import functools
import os
from typing import NamedTuple

from hypothesis import settings
from hypothesis import strategies as st

TILES = (16, 32, 64, 128, 256)  # tile sizes of real kernels (FlashAttention, xFormers, cuDNN)
# FlashAttention's test grid and common models (59 and 111: no tile divides them), and the
# dims its kernels are built for between 128 and 256 (160; 192, DeepSeek MLA's query-key dim):
# a kernel that splits the head dim at 128, or pads it to the next build, goes wrong there
HEAD_DIMS = (64, 59, 80, 96, 111, 128, 160, 192, 256)
OFFSETS = (0, 1, -1)  # at, one past, one short of a tile multiple


class Limits(NamedTuple):
    """Largest sizes drawn: prefill ``Tq``/``Tk`` (``max_len``), decode ``Tk``
    (``max_decode_len``), score elements ``B * Hq * Tq * Tk`` per call (``max_scores``), K/V
    elements ``B * Hkv * Tk * (D + Dv)`` (``max_kv``: what a reference call converts to
    exact numbers, about 0.2 us each, the largest part of a long decode's reference: ci's
    lets one K/V head reach ``D = Dv = 64`` at 8192 keys and ``D = Dv = 128`` at 4096;
    thorough's ``256`` at 16384), and the positions
    a growing cache is appended to (``max_appends``: in ci well past 2048, the second
    doubling of a 1024-slot buffer)."""

    max_len: int
    max_decode_len: int
    max_scores: int
    max_kv: int
    max_appends: int


# Per profile. ci stays inside pytest -n auto's 60 s on two cores; thorough goes larger.
LIMITS = {
    "dev": Limits(
        max_len=300, max_decode_len=2100, max_scores=1 << 19, max_kv=1 << 20, max_appends=1100
    ),
    "ci": Limits(
        max_len=1100, max_decode_len=8200, max_scores=1 << 20, max_kv=1 << 20, max_appends=3100
    ),
    "thorough": Limits(
        max_len=2100, max_decode_len=16500, max_scores=1 << 23, max_kv=1 << 23, max_appends=6200
    ),
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
    ``ATTNPROPS_MAX_DECODE_LEN``. Raised lengths raise (never lower) the budgets to values
    of the lengths alone: scores for two (batch, head) pairs at the full length,
    ``2 max_len**2`` (only when ``max_len`` is raised); K/V for two pairs of ``D = Dv = 128``
    at the longest length, ``512 max(max_len, max_decode_len)`` (or the profile's, if
    larger); cache runs over ``max_len`` positions (or the profile's, if more).

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
    if (max_len, decode) == (base.max_len, base.max_decode_len):
        return base
    raised_len = max_len > base.max_len  # a raised decode length alone leaves prefill's
    return Limits(
        max_len,
        decode,
        max(base.max_scores, 2 * max_len**2) if raised_len else base.max_scores,
        max(base.max_kv, 512 * max(max_len, decode)),
        max(base.max_appends, max_len) if raised_len else base.max_appends,
    )


def describe_limits(lim: Limits) -> str:
    """``lim`` in one line, for a run's header (so a raised length can be seen to apply)."""
    return (
        f"prefill/cross Tq, Tk <= {lim.max_len}, decode Tk <= {lim.max_decode_len}, "
        f"scores <= {lim.max_scores}, K/V elements <= {lim.max_kv}, cache appends <= "
        f"{lim.max_appends} (raise the lengths: {LEN_ENV_VAR}, {DECODE_ENV_VAR})"
    )


# Strategies are built once per distinct (hashable) argument tuple and reused: Hypothesis
# works out a new strategy object's properties (emptiness, labels, reusable values) on its
# first draw, which cost about a tenth of the suite's time, and seconds of each kernel
# mutant's shrink, when every draw built its own. Reuse changes nothing a draw produces.
cached_strategy = functools.lru_cache(maxsize=8192)


def primes_up_to(n: int) -> list[int]:
    """Primes ``<= n`` (a sieve); lengths no tile divides."""
    sieve = bytearray([1]) * (n + 1)
    sieve[:2] = b"\0\0"
    for p in range(2, int(n**0.5) + 1):
        if sieve[p]:
            sieve[p * p :: p] = bytearray(len(sieve[p * p :: p]))
    return [p for p in range(n + 1) if sieve[p]]


def one_in(n: int, first: st.SearchStrategy, other: st.SearchStrategy) -> st.SearchStrategy:
    """``first`` one draw in ``n`` (nominally: Hypothesis favours the branch draw 0), else
    ``other``; shrinks towards ``first``. An explicit branch draw, not
    ``one_of(first, *[other] * (n - 1))``: one_of merges equal branches, which made tiny
    sizes half the draws. A mapped tuple, not ``st.builds``: a counterexample then shows the
    size itself (``key_len=64``) where the explain phase (``thorough``) printed the builds
    call, ``(lambda branch, a, b: ...)(0, <...>, 64)``."""
    return st.tuples(st.integers(0, n - 1), first, other).map(_pick)


def _pick(drawn: tuple) -> object:
    """:func:`one_in`'s choice: the first value for branch 0, else the other."""
    branch, first, other = drawn
    return first if branch == 0 else other


@cached_strategy
def boundary_sizes(max_size: int, *, min_size: int = 1) -> st.SearchStrategy[int]:
    """Sizes in ``[min_size, max_size]``, mostly at and around multiples of :data:`TILES`.

    Two branches (Hypothesis shrinks towards the first): tiny, ``[min_size, 8]``, one draw in
    eight; and ``k * t + offset`` with ``t`` in TILES (shrinks to 16), ``k`` among the
    multiples that fit (shrinks to 1: the size falls tile by tile) and ``offset`` in OFFSETS
    (``0, 1, -1``; two draws in three) or anywhere in ``[-t/2, t/2]`` (so primes and every
    other size occur too), shrinking towards 0. A failing size so shrinks to the smallest
    length next to a tile multiple that still fails: a fault past 128 that needs a partial
    64-block shrinks to 129, a fault from 512 keys on to 512. Example draws: ``1``, ``129``,
    ``255``, ``1024``, ``113``, ``797``.
    """
    if not 1 <= min_size <= max_size:
        raise ValueError(
            f"min_size={min_size}, max_size={max_size}: need 1 <= min_size <= max_size"
        )
    tiny = st.integers(min_size, max(min_size, min(8, max_size)))
    if max_size <= 8:
        return tiny
    tiles = [t for t in TILES if t // 2 <= max_size] or [TILES[0]]
    widest = max(tiles) // 2

    @st.composite
    def boundary(draw) -> int:
        t = draw(st.sampled_from(tiles))
        # k ranges over the multiples of t that fit: one integer per size (no two draws of
        # k give one size, so no shrink pass trades k against a later draw step by step)
        k = draw(st.integers(1, max(1, (max_size + t // 2) // t)))
        offset = draw(
            st.one_of(
                st.sampled_from(OFFSETS), st.sampled_from(OFFSETS), st.integers(-widest, widest)
            )
        )
        if abs(offset) > 1:  # the anywhere branch, scaled to [-t/2, t/2]
            offset = int(offset * t / (2 * widest))
        return min(max(k * t + offset, min_size), max_size)  # clamped, not filtered

    return one_in(8, tiny, boundary())


@cached_strategy
def long_sizes(max_size: int, *, min_size: int = 1) -> st.SearchStrategy[int]:
    """Boundary sizes for a regime that is about length (a decode against a long cache, a
    cache grown past its capacities): the larger of two :func:`boundary_sizes` of the whole
    range, so long sizes are drawn more often (measured over 4000 draws of ``long_sizes(8200)``:
    median 3864, 48% at 4096 or more, 35% below 2048, 8% tiny) and every draw is still a tile
    boundary.

    Why the larger of two, not a branch for the long sizes: Hypothesis shrinks each of the two
    step by step while the other holds the maximum, so a failure shrinks to the smallest
    boundary size that still fails, wherever it was found: a fault from 600 keys on to 608, one
    past 1000 keys in a partial 80-key tile to 1008 (``find`` with seeds 0-5: 1008 five times,
    1024 once). The earlier form, ``low + n`` three draws in four (``low`` the multiple of 256
    at or below a quarter of ``max_size``), kept a failure found in that branch at ``low + 1``
    (2049 in ci for a fault from 600 keys on): leaving the branch takes two draws changed at
    once, which no shrink pass tries."""
    anywhere = boundary_sizes(max_size, min_size=min_size)
    return st.tuples(anywhere, anywhere).map(max)


def capacity(max_size: int) -> int | None:
    """The largest power of two ``P >= 256`` with ``P + 1 <= max_size`` (None if there is
    none): where a kernel's preallocated capacity ends (a workspace of ``P`` keys, at most
    ``P / s`` splits of ``s`` keys, a buffer doubled up to ``P``)."""
    if max_size < 257:
        return None
    return 1 << ((max_size - 1).bit_length() - 1)


@cached_strategy
def past_powers(
    cap: int, *, within: bool = False, beyond: int | None = None
) -> st.SearchStrategy[int]:
    """``cap + 1`` (``within``: ``cap`` or ``cap + 1``) three draws in four, else one past a
    smaller power of two from 256 (``257, 513, ...``), for ``cap`` a power of two >= 256
    (:func:`capacity`): the first size past a capacity a kernel may have preallocated (a
    ring of ``p`` slots, a workspace of ``p`` keys, a buffer doubled up to ``p``).
    ``beyond`` (larger than ``cap + 1``): also that size, half the draws (``cap + 1`` a
    third), past every capacity below it that is not a power of two (a ring of 2500 slots):
    the one size that exposes every such fault up to it, so the most drawn.

    One sampled index, the sizes in increasing order (``cap`` before ``cap + 1``), so it
    shrinks step by step towards 257: a fault from a capacity of 1024 on shrinks to 1025,
    not to ``cap + 1``; one wrong only past ``cap`` stays at ``cap + 1`` (and ``within``,
    one wrong at ``cap`` too, at ``cap``); one past another capacity shrinks to the first
    listed size past it (1500: 2049). ci: ``past_powers(8192, within=True)`` draws 8193 half
    the time, 8192 a quarter, and 257, 513, 1025, 2049 or 4097 otherwise.

    Raises:
        ValueError: ``cap`` not a power of two >= 256, or ``beyond`` not past ``cap + 1``.
    """
    if cap < 256 or cap & (cap - 1):
        raise ValueError(f"cap={cap}: need a power of two >= 256")
    if beyond is not None and beyond <= cap + 1:
        raise ValueError(f"beyond={beyond}: need more than cap + 1 = {cap + 1}")
    below = [(1 << e) + 1 for e in range(8, cap.bit_length() - 1)]
    n = max(1, len(below))
    if beyond is not None:
        return st.sampled_from(below + [cap + 1] * (2 * n) + [beyond] * (3 * n))
    top = [cap] * n + [cap + 1] * (2 * n) if within else [cap + 1] * (3 * n)
    return st.sampled_from(below + top)


@cached_strategy
def capacity_sizes(max_size: int) -> st.SearchStrategy[int]:
    """``P`` or ``P + 1`` for ``P = capacity(max_size)``, and one past each smaller power of
    two from 256 (:func:`past_powers` ``within``): the last size within a capacity and the
    first past it, where a kernel that never reads past its capacity goes wrong; a fault
    past a smaller capacity shrinks to one past it. :func:`long_sizes` of ci's decode
    lengths (up to 8200) go past 8192 in about 1 draw in 90 (46 of 4000); these sizes are there by
    design. ``max_size`` below 257: a :func:`boundary_sizes` instead."""
    cap = capacity(max_size)
    if cap is None:
        return boundary_sizes(max_size)
    return past_powers(cap, within=True)


@cached_strategy
def head_dims(max_dim: int = 256) -> st.SearchStrategy[int]:
    """Head dims up to ``max_dim``: :data:`HEAD_DIMS` (shrinks to 64), or tiny ``[1, 8]`` one
    draw in four (shrinks there first); when no listed dim fits, any of ``[1, max_dim]``."""
    listed = [d for d in HEAD_DIMS if d <= max_dim]
    if not listed:
        return st.integers(1, max_dim)
    return one_in(4, st.integers(1, min(8, max_dim)), st.sampled_from(listed))
