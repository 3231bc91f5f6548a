"""Kernel-sized cache runs: hundreds of appends of mixed chunk sizes (:func:`cache_runs`,
:func:`chunks_of`), rolling caches that wrap again and again (:func:`rolling_cache_runs`) and
page pools of a kernel's page sizes (:func:`paged_layouts`), for the cache properties of
``properties/test_kernel_sizes.py``, ``properties/test_kernel_serving.py`` and the quantized
cache's. Each draws a :class:`~properties.kernel_cases.KernelSpec` for ``subject`` and shrinks
to a short pattern or a small page, not to hundreds of draws."""

from __future__ import annotations

from hypothesis import strategies as st

from attnprops.properties.kernel_cases import draw_window
from attnprops.properties.kernel_cases import fit_dims
from attnprops.properties.kernel_cases import subject_kernel_specs
from attnprops.properties.sizes import TILES
from attnprops.properties.sizes import boundary_sizes
from attnprops.properties.sizes import capacity
from attnprops.properties.sizes import limits
from attnprops.properties.sizes import one_in
from attnprops.properties.sizes import past_powers

PAGE_SIZES = (*TILES, 512)  # page sizes of real paged KV caches
MAX_STEPS = 512  # single-token decode steps at the end of a cache run

__all__ = [
    "cache_runs",
    "chunk_patterns",
    "chunks_of",
    "paged_layouts",
    "rolling_cache_runs",
    "window_and_sinks",
]


@st.composite
def cache_runs(draw, subject, *, variants: bool = False):
    """``(spec, pattern, steps)``: causal self-attention of ``T`` positions, appended in
    chunks whose sizes repeat ``pattern`` (up to 8 sizes: single tokens, boundary sizes, and
    ``T``, the whole run, to which a pattern shrinks) until all but the last ``steps``
    positions are covered, then those one at a time
    (:func:`chunks_of`): a chunked prefill, then a decode of one token per step, as a server
    runs a sequence. ``steps`` is 0 one draw in two, else a boundary size up to
    :data:`MAX_STEPS` (at most ``T``), so a run makes hundreds of appends (a cache that goes
    wrong after a count of appends, not a size, fails) while Hypothesis shrinks (and the
    counterexample shows) a pattern and a count, not hundreds of draws. ``variants``: the
    window and the sinks ``subject`` declares, each half the time (:func:`window_and_sinks`),
    drawn last."""
    spec = draw(_prefills(subject))
    T = spec.key_len
    pattern, steps = draw(chunk_patterns(T))
    spec = spec._replace(is_causal=True, query_start=None, block_size=None)
    if variants:
        spec = draw(window_and_sinks(subject, spec, T + 1))
    return spec, pattern, steps


def _prefills(subject):
    """The causal prefill a cache run appends: lengths mostly long, up to ``max_appends``."""
    return subject_kernel_specs(
        subject, shapes=("prefill",), masks=False, max_len=limits().max_appends, long=True
    )


@st.composite
def chunk_patterns(draw, T: int):
    """``(pattern, steps)`` for a run of ``T`` positions (:func:`cache_runs`). A pattern's
    sizes are single tokens, boundary sizes and, one size in eight, ``T``: the whole run in
    one append, which a pattern shrinks to, so a fault that one append of every position
    shows shrinks to that run, not to ``T`` single-token appends (each a call: a ring of
    3098 slots took minutes to shrink that way)."""
    sizes = one_in(8, st.just(T), st.one_of(st.just(1), boundary_sizes(T)))
    pattern = draw(st.lists(sizes, min_size=1, max_size=8), label="chunk pattern")
    # drawn after the pattern, so that a run drawn before it existed keeps its draws
    steps = draw(st.one_of(st.just(0), boundary_sizes(min(T, MAX_STEPS))), label="decode steps")
    return pattern, steps


@st.composite
def window_and_sinks(draw, subject, spec, max_side: int, sides=None):
    """``spec`` (causal, queries from position 0) with the window and the sinks ``subject``
    declares, each half the time: a window's sides boundary sizes up to ``max_side``, 0 or
    None, or drawn from ``sides`` (Hugging Face's convention: a left count and
    ``right=None``); one sink logit per query head (:meth:`KernelSpec.build`)."""
    caps = subject.capabilities
    if caps.window and draw(st.booleans(), label="windowed"):
        spec = spec._replace(window=draw_window(draw, caps.window, max_side, lefts=sides))
    if caps.sinks and draw(st.booleans(), label="sinks"):
        spec = spec._replace(sinks=True)
    return spec


@st.composite
def rolling_cache_runs(draw, subject):
    """``(spec, pattern, steps, capacity)``: a :func:`cache_runs` sequence decoded through a
    rolling cache of ``capacity`` slots, with a window it can serve: ``left`` the capacity,
    one less (Hugging Face's ``sliding_window = capacity``), or a boundary size below it;
    ``right`` 0 or None; the subject's sinks half the time. The capacity is, one draw in
    three, a boundary size up to a third of ``T`` (the ring fills at least three times over;
    16-256 and past them, where kernels switch the ring's layout), else one past a power of
    two (:func:`~properties.sizes.past_powers`): the largest ring the profile's runs can
    fill (``max_appends - 2``: 3098 in ci, past a ring index that wraps at any smaller size)
    half the time, ``P + 1`` for the largest power of two ``P`` whose ring they can fill
    (``P + 3 <= max_appends``: 2049 in ci, 4097 in thorough) a third, else 257, 513, ...,
    the run then two positions longer than the ring (its head dims cut to keep ``max_kv``;
    at most ``T`` decode steps), so that the run shrinks with its ring. ``P + 1`` slots are
    one past every power of two up to ``P``, so a ring index that wraps at any of them
    (``t & (N - 1)``, a buffer sized for windows of at most ``N``) puts two held positions
    in one slot, and such a fault shrinks to ``N + 1`` slots (a ring that wraps at another
    size, to the first listed size past it). The chunk pattern and decode steps are drawn
    once the run's length is known (:func:`chunk_patterns`), so a pattern that shrinks to
    the whole run is one append of all of it. Shrinks towards the first kind."""
    spec = draw(_prefills(subject))
    lim = limits()
    ring = lim.max_appends - 2  # the largest ring a run can fill and wrap
    largest = capacity(ring)
    T = spec.key_len
    if largest is None:
        past = boundary_sizes(max(1, T - 2))
    else:
        past = past_powers(largest, beyond=ring if ring > largest + 1 else None)
    slots, wraps_once = draw(
        # the rings that wrap once, two draws in three: measured over random runs of 8 draws
        # (the property's ci examples), with one_of's even split and past_powers' 2049 as
        # often as 3098, 12 of 40 drew no ring past 2500, and a ring index that wraps at 2500
        # survived ci's 8
        one_in(
            3,
            boundary_sizes(max(1, T // 3)).map(lambda n: (n, False)),
            past.map(lambda n: (n, True)),
        ),
        label="capacity",
    )
    if wraps_once:  # a run that fills the ring and wraps: as long as its ring, and shrinks with it
        T = slots + 2
        spec = fit_dims(spec._replace(query_len=T, key_len=T))
    pattern, steps = draw(chunk_patterns(T))  # for the run's own length
    spec = spec._replace(is_causal=True, query_start=None, block_size=None)
    lefts = st.one_of(st.sampled_from(sorted({slots, max(0, slots - 1)})), boundary_sizes(slots))
    spec = draw(window_and_sinks(subject, spec, slots, sides=lefts))
    if spec.window is None:  # a rolling cache serves a window only
        right = None if subject.capabilities.window == "sliding_window" else 0
        spec = spec._replace(window=(slots, right))
    return spec, pattern, steps, slots


def chunks_of(T: int, pattern: list[int], steps: int = 0) -> list[int]:
    """Chunk sizes repeating ``pattern`` over the first ``T - steps`` positions (the last
    one cut to fit), then ``steps`` single positions."""
    chunks, left = [], T - steps
    while left:
        chunks.append(min(pattern[len(chunks) % len(pattern)], left))
        left -= chunks[-1]
    return chunks + [1] * steps


@st.composite
def paged_layouts(draw, subject):
    """``(spec, page_size, shortfalls, spare)``: a decode or chunk call at kernel sizes
    (causal, the queries the last positions, no mask), pages of a kernel's sizes (16-256, and
    512: FlashAttention 2's paged KV cache takes multiples of 256) or a boundary size up to 512
    (pages past 128 and past 256, where kernels first written for those go wrong, are drawn
    often), each sequence ``shortfalls[b]`` positions shorter than the longest (up to
    two pages: lengths end inside pages), and spare pages in the pool."""
    spec = draw(subject_kernel_specs(subject, shapes=("decode", "chunk"), masks=False))
    spec = spec._replace(is_causal=True, query_start=None, block_size=None)
    page_size = draw(st.one_of(st.sampled_from(PAGE_SIZES), boundary_sizes(512)), label="page size")
    room = spec.key_len - spec.query_len
    shortfalls = draw(
        st.lists(
            st.integers(0, min(room, 2 * page_size)), min_size=spec.batch, max_size=spec.batch
        ),
        label="shortfalls",
    )
    return spec, page_size, shortfalls, draw(st.integers(0, 2), label="spare pages")
