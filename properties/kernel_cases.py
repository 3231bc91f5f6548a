"""Kernel-sized attention calls: sizes at tile boundaries, values from a seed.

A :class:`KernelSpec` is what Hypothesis draws and shrinks: sizes (from
:mod:`properties.sizes`), causality and ``query_start``, a mask kind, dtype, value regime,
scale, and a seed; :meth:`KernelSpec.build` turns it into an
:class:`~properties.strategies.AttentionCase` with NumPy's ``default_rng(seed)``. Drawing
thousands of elements one by one would cost Hypothesis seconds per case; a seed costs nothing,
and the counterexample reads as sizes (``KernelSpec(..., key_len=129, head_dim=64, ...)``).
Shrinking then acts on the sizes (towards the smallest tile boundary that still fails, see
:mod:`properties.sizes`), the flags and the seed, not on single elements.

Shape kinds drawn (shape legend as in :mod:`properties.strategies`):

``prefill``  ``Tq = Tk`` (self-attention), causal or not.
``decode``   ``Tq`` in 1..4 (a token, a short speculative-decoding draft) or, one draw in
             two, 1..64 (a longer draft or draft tree verified in one call, as vLLM's and
             EAGLE's do: one 64-row query tile)
             against ``Tk`` up to the profile's decode length, mostly long (the larger of
             two boundary sizes: flash-decoding's split-KV regime;
             :func:`~properties.sizes.long_sizes`),
             causal at ``Tk - Tq`` (the drafts are causal among themselves), or, for the
             properties about decodes (``noncausal_decodes``), one draw in two not causal
             (one query's call is the same; a kernel may route it elsewhere: Hugging Face's
             SDPA path passes ``is_causal=False`` for one query).
``chunk``    chunked prefill: ``Tq < Tk``, causal with the default ``Tk - Tq``, 0 or a drawn
             ``query_start`` (a boundary size: at, one past or one short of a tile multiple,
             or anywhere). ``Tq`` is a boundary size one draw in two, else one query (one
             draw in four) or a decode's few (:data:`MAX_DECODE_QUERIES`): a decode step at
             an explicit position of a preallocated (static) cache, whose slots past it are
             not written yet (Hugging Face's ``StaticCache``, JAX's fixed-size decode
             caches), where a kernel that treats one query as the last position (causality
             a no-op) reads them.
``cross``    ``Tq != Tk`` either way, not causal.

Masks and the arrays: :mod:`properties.kernel_spec`. :func:`many_head_specs` draws the
decodes and chunks of 17 to 128 query heads that the others (at most 16) never reach.
"""

from __future__ import annotations

from hypothesis import strategies as st

from attnprops.properties import DEFAULT_DTYPES
from attnprops.properties.kernel_spec import MASK_KINDS
from attnprops.properties.kernel_spec import PADDING_KINDS
from attnprops.properties.kernel_spec import PER_HEAD_MASK
from attnprops.properties.kernel_spec import KernelSpec
from attnprops.properties.sizes import HEAD_DIMS
from attnprops.properties.sizes import boundary_sizes
from attnprops.properties.sizes import cached_strategy
from attnprops.properties.sizes import capacity_sizes
from attnprops.properties.sizes import head_dims
from attnprops.properties.sizes import limits
from attnprops.properties.sizes import long_sizes
from attnprops.properties.sizes import one_in
from attnprops.properties.strategies import subject_declared
from attnprops.properties.variant_draws import fit_window

SHAPE_KINDS = ("prefill", "decode", "chunk", "cross")
# Query heads per K/V head (shrinks to 1: MHA): every group up to 8, the powers of two first;
# 5, 6 and 7 are real (Qwen2's 28 / 4 heads: 7), and a kernel that rounds a group up to a
# power of two, or specialises 1, 2, 4 and 8, is wrong there.
GROUPS = (1, 2, 4, 8, 3, 5, 6, 7)
# The many-heads draws (many_head_specs): K/V heads (shrinks to 1, multi-query attention),
# and query heads from one past 16 (the most the other draws give) to DeepSeek V3's 128.
MANY_HEADS_KV = (1, 8, 2, 4, None)  # None: as many as the query heads (multi-head attention)
MANY_HEADS = (17, 128)
# Decode's most queries: a token, a speculative draft or a verified draft tree, up to one
# 64-row query tile (split-KV decode paths take such short query blocks against long caches;
# at the earlier most, 16, a causal mask dropped for 17 to 64 queries went unseen).
MAX_DECODE_QUERIES = 64
# Strategies drawn in every spec, built once (see properties.sizes.cached_strategy).
_BOOLEANS = st.booleans()
_ONE_OR_TWO = st.integers(1, 2)
_TWO = st.just(2)
_GROUPS = st.sampled_from(GROUPS)
_GROUPED = st.sampled_from(GROUPS[1:])
MAGNITUDES = ("unit", "ties", "large")
_REGIMES = cached_strategy(st.sampled_from)  # value regimes, one strategy per tuple
_SCALES = st.one_of(st.none(), st.sampled_from([0.125, 0.3, 1.0, 2.0]))
_SEEDS = st.integers(0, 2**32 - 1)
_CHUNK_QUERIES = st.sampled_from(("chunk", "chunk", "one", "decode"))


@st.composite
def kernel_specs(
    draw,
    *,
    dtypes=DEFAULT_DTYPES,
    float_masks: bool = True,
    shapes=SHAPE_KINDS,
    masks: bool | tuple[str, ...] = True,
    block_sizes: bool = False,
    max_len: int | None = None,
    max_decode_len: int | None = None,
    max_scores: int | None = None,
    long: bool = False,
    at_capacity: bool = False,
    magnitudes: tuple[str, ...] = MAGNITUDES,
    windows: str | None = None,
    sinks: bool = False,
    alibi: bool = False,
    softcap: bool = False,
    documents: bool = False,
    chunks: bool = False,
    grouped: bool = False,
    noncausal_decodes: bool = False,
) -> KernelSpec:
    """A :class:`KernelSpec` within the profile's :func:`~properties.sizes.limits` (or the
    ``max_*`` given). ``dtypes`` shrinks towards its last entry; ``block_sizes`` also draws
    a ``block_size`` (a boundary size up to ``Tk + 1``) for subjects with a blocked path;
    ``long`` draws prefill lengths mostly long, the larger of two boundary sizes up to
    ``max_len`` (:func:`~properties.sizes.long_sizes`: cache runs, whose point is their length);
    ``masks``: the mask kinds drawn (True: :data:`~properties.kernel_spec.MASK_KINDS`; False:
    none; or a tuple of kinds). ``at_capacity`` draws decode lengths at the largest capacity
    within the decode length (:func:`~properties.sizes.capacity_sizes`: 8192 or 8193 in ci).
    ``magnitudes``: the value regimes drawn (``unit``, ``ties``, ``large``, or ``positive``, as
    :meth:`~properties.kernel_spec.KernelSpec.build` fills them; shrinks towards the first).
    ``windows`` (``"offsets"`` or ``"sliding_window"``, a subject's convention) draws a local
    window whose sides are tile-boundary sizes, 0 or None (no key-padding masks then: a
    window past a row's padding would leave it no key; ``"sliding_window"``: causal shapes
    only, ``right=None``). ``sinks``: the call has one sink logit per query head
    (:meth:`KernelSpec.build`); ``alibi`` and ``softcap``: each drawn or not, ALiBi's slopes
    and a cap of 50, 30 or 5 (Gemma 2's two, and one the ``large`` scores pass far).
    ``documents``: packed documents (:meth:`KernelSpec.segment_ids`) starting at up to four
    tile-boundary key positions, one of them drawn twice now and then (a document of length
    zero), one of them among the queries half the time in a decode or chunk (a draft whose
    rows straddle a boundary), and batch elements packed apart half the time when ``B > 1``
    (2-D ids, :meth:`KernelSpec.segment_ids`); no key-padding or random masks then (they
    could hide a document's every key from a query), and causal or not; with two batch
    elements, three or four of them three draws in four (four the more often), each packed
    its own way (:meth:`KernelSpec.segment_ids`). With ``alibi`` and
    ``B > 1`` the slopes are mostly ``(B, Hq)``, and a causal prefill or chunk is not causal
    one draw in two (ALiBi's ``-slope |p - j|`` then reaches keys after the query, where a
    signed distance goes wrong). ``chunks``: a ``chunk_size`` (a
    boundary size up to ``Tk + 1``, or one draw in two one in ``[ceil(Tq / 2), Tq - 1]``:
    :func:`chunk_sizes`; no query before position 0, no padding or random masks).
    ``grouped``: two K/V heads (as the budget allows) and a group of 2 to 8 query heads each
    (:data:`GROUPS` but 1, shrinking to 2), for a law about which K/V head a query head
    reads (with one K/V head, any mapping that stays in range reads it).
    ``noncausal_decodes``: a decode is not causal one draw in two (the properties about
    decodes; elsewhere decodes stay causal, and their draws as they were).
    Shrinks towards ``prefill``, ``B = Hkv = G = 1``, tiny or tile-boundary lengths, a tiny
    head dim or 64, no mask, float64, ``unit`` values, seed 0."""
    lim = limits()
    max_len = max_len or lim.max_len
    max_decode_len = max_decode_len or lim.max_decode_len
    max_scores = max_scores or lim.max_scores
    if windows == "sliding_window":  # Hugging Face's windows are causal
        shapes = tuple(s for s in shapes if s != "cross") or ("prefill",)
    shape = draw(st.sampled_from(shapes))
    is_causal = True if windows == "sliding_window" else draw(_BOOLEANS)
    query_start = None
    if shape == "prefill":
        Tk = draw((long_sizes if long else boundary_sizes)(max_len), label="key_len")
        Tq = Tk
    elif shape == "decode":
        lengths = capacity_sizes if at_capacity else long_sizes
        Tk = draw(lengths(max_decode_len), label="key_len")
        Tq = draw(_decode_queries(min(MAX_DECODE_QUERIES, Tk)), label="query_len")
        is_causal = True
    elif shape == "chunk":
        Tk = draw(boundary_sizes(max_len, min_size=2), label="key_len")
        # a prefill's chunk one draw in two, else one query or a decode's few (the module
        # doc); an integer picks, as one_of's branches are not drawn evenly (measured: a
        # chunk past 64 queries one draw in ten, where a boundary size alone gave one in two)
        queries = draw(_CHUNK_QUERIES, label="chunk, one query or a decode's")
        if queries == "chunk":
            Tq = draw(boundary_sizes(Tk - 1), label="query_len")
        elif queries == "one":
            Tq = 1
        else:
            Tq = draw(_decode_queries(min(MAX_DECODE_QUERIES, Tk - 1)), label="query_len")
        is_causal = True
        # a start at, or one off, a tile multiple puts a tile's last row at a tile edge
        starts = [st.none(), st.just(0)] + ([boundary_sizes(Tk - Tq)] if Tk > Tq else [])
        query_start = draw(st.one_of(starts), label="query_start")
    else:
        Tq = draw(boundary_sizes(max_len), label="query_len")
        Tk = draw(boundary_sizes(max_len), label="key_len")
        is_causal = False
    start = Tk - Tq if query_start is None else query_start  # the first query's position
    # Each count is drawn from a fixed range and then cut to the budget (not drawn from a
    # range that depends on the lengths), so every draw keeps its meaning while the lengths
    # shrink: Hypothesis then shrinks the counts and the lengths independently.
    room = max(1, max_scores // (Tq * Tk))  # B * Hq allowed by the score budget
    batch = min(draw(_ONE_OR_TWO, label="batch"), room)
    kv_heads = _TWO if grouped else _ONE_OR_TWO
    num_kv_heads = min(draw(kv_heads, label="num_kv_heads"), max(1, room // batch))
    group = fit_group(
        draw(_GROUPED if grouped else _GROUPS, label="group"), batch * num_kv_heads, room
    )
    # The reference reads every key and value of each (batch, K/V head): keep that in budget.
    head_dim, value_dim = draw_head_dims(draw, batch, num_kv_heads, Tk)
    listed = MASK_KINDS if masks is True else masks or ()
    kinds = [m for m in listed if float_masks or m != "alibi float mask"] or ["none"]
    if windows is not None:
        kinds = [m for m in kinds if m not in PADDING_KINDS]
    if documents or chunks:  # every row keeps its own position's key
        kinds = [m for m in kinds if m in ("none", "alibi float mask")]
    mask = draw(st.sampled_from(kinds), label="mask")
    padding = ()
    if mask in PADDING_KINDS:
        padding = tuple(
            draw(
                st.lists(boundary_sizes(Tk), min_size=batch, max_size=batch),
                label="key padding lengths",
            )
        )
        if mask == "left padding" and is_causal:  # the first query sees key Tk - L_b
            padding = tuple(max(n, Tk - start) for n in padding)
    dtype = draw(st.sampled_from(tuple(reversed(dtypes))), label="dtype")
    magnitude = draw(_REGIMES(magnitudes), label="values")
    scale = draw(_SCALES, label="scale")
    seed = draw(_SEEDS, label="seed")
    block_size = None
    if block_sizes:
        # at least 16 (or Tk + 1): blocks of a few keys cost seconds at these sizes, and
        # the small-case properties draw those
        block_size = draw(
            st.one_of(st.none(), boundary_sizes(Tk + 1, min_size=min(Tk + 1, 16))),
            label="block_size",
        )
    window = None
    if windows is not None:
        window = fit_window(draw_window(draw, windows, max(Tq, Tk) + 1), start)
    with_alibi = draw(st.booleans(), label="alibi") if alibi else False
    cap = draw(st.sampled_from([None, 50.0, 30.0, 5.0]), label="softcap") if softcap else None
    starts = draw(document_starts(Tk), label="document starts") if documents else ()
    # Drawn after everything above, so that a spec drawn before they existed keeps its draws.
    batch_documents, batch_slopes, chunk_size = (), False, None
    if starts and shape in ("decode", "chunk") and Tq > 1:
        among = st.one_of(st.none(), st.integers(start + 1, start + Tq - 1))
        inside = draw(among, label="a document start among the queries")
        starts = starts if inside is None else tuple(sorted(starts + (inside,)))
    if starts and batch > 1:
        other = st.one_of(st.just(()), document_starts(Tk))
        batch_documents = draw(other, label="document starts of the other batch elements")
    if with_alibi and batch > 1:  # (B, Hq) slopes unless drawn otherwise: a late boolean
        # draw is True in only about 3 draws in 10, too few for 8 examples
        batch_slopes = not draw(st.booleans(), label="slopes (Hq,) for the whole batch")
    if chunks and start >= 0:
        chunk_size = draw(chunk_sizes(Tq, Tk), label="chunk_size")
    # keys after a query too (not for Hugging Face's windows, causal by convention)
    if with_alibi and is_causal and shape in ("prefill", "chunk") and windows != "sliding_window":
        is_causal = draw(st.sampled_from((True, False)), label="ALiBi causal")
    if starts and batch == 2:  # up to four rows of documents, each packed its own way
        # four elements most often: a fault past the third row needs them; shrinks to 2, 3
        more = draw(st.sampled_from((0, 1, 2, 2)), label="more packed batch elements")
        batch = min(batch + more, max(2, room // (num_kv_heads * group)))
        batch_documents = batch_documents or (starts if batch > 2 else ())
    # A decode is not causal one draw in two (shrinks to causal): one query's call is the
    # same either way (with query_start None), but kernels take other paths for it
    # (Hugging Face's SDPA path passes is_causal=False for a single query, and a split-KV
    # path may be chosen without causality); a few queries then see every key. Drawn last,
    # so that the draws above keep their places.
    if noncausal_decodes and shape == "decode" and windows != "sliding_window":
        is_causal = draw(st.sampled_from((True, False)), label="decode causal")
    spec = KernelSpec(
        shape,
        batch,
        num_kv_heads * group,
        num_kv_heads,
        Tq,
        Tk,
        head_dim,
        value_dim,
        is_causal,
        query_start,
        mask,
        dtype,
        magnitude,
        scale,
        seed,
        padding,
        block_size,
        window,
        sinks,
        with_alibi,
        cap,
        starts,
        chunk_size,
        batch_documents,
        batch_slopes,
    )
    return fit_dims(spec)  # the head dims again, for the documents' extra batch elements


@st.composite
def many_head_specs(draw, subject):
    """A :class:`~properties.kernel_spec.KernelSpec` of a decode or a chunk with ``Hq`` in
    ``[17, 128]`` query heads over ``Hkv`` in ``{1, 2, 4, 8}`` K/V heads (``Hq`` a multiple
    of ``Hkv``) or one K/V head per query head (multi-head attention: Llama 2's 32, 40 and
    64); ``Hq`` the most (128) one draw in two, so a head index that wraps at 16, 32 or 64
    fails at once; shrinks towards ``Hkv = 1``, ``Hq = 17``, so the counterexample names the
    head count a fault starts at. The subject's masks and a mask of its own per batch
    element and head (:data:`~properties.kernel_spec.PER_HEAD_MASK`); its sinks and ALiBi
    slopes whenever it declares them (per-head parameters: what a head index reads), the
    slopes ``(B, Hq)`` mostly with two batch elements. Within the
    profile's budgets (:func:`~properties.sizes.limits`): the key length at most
    ``max_scores / Hq`` (and ``max_kv / (16 Hkv)``, so a head dim of 8 fits), two batch
    elements where one query each fits the score budget, the queries cut to fit it, the head
    dims cut (:func:`fit_dim`) so that the K/V of every (batch, K/V head) pair fit
    ``max_kv``."""
    caps = subject.capabilities
    kv_heads = draw(st.sampled_from(MANY_HEADS_KV), label="num_kv_heads (None: Hq)")
    per_kv = 1 if kv_heads is None else kv_heads
    low, high = -(-MANY_HEADS[0] // per_kv), MANY_HEADS[1] // per_kv  # past 16, up to 128
    # the most one draw in two: a head index that wraps at 16, 32 or 64 fails there at once
    count = draw(st.one_of(st.integers(low, high), st.just(high)), label="heads per K/V head")
    heads = count * per_kv
    kv_heads = heads if kv_heads is None else kv_heads  # multi-head attention: one each
    lim = limits()
    spec = draw(
        subject_kernel_specs(
            subject,
            shapes=("decode", "chunk"),
            masks=(*MASK_KINDS, PER_HEAD_MASK),
            max_decode_len=min(
                lim.max_decode_len, lim.max_scores // heads, lim.max_kv // (16 * kv_heads)
            ),
            sinks=bool(caps.sinks),
        )
    )
    Tk = spec.key_len
    batch = 2 if 2 * heads * Tk <= lim.max_scores else 1
    queries = min(spec.query_len, max(1, lim.max_scores // (batch * heads * Tk)))
    batch_slopes = batch > 1 and not draw(st.booleans(), label="slopes (Hq,)")
    return fit_dims(
        spec._replace(
            alibi=bool(caps.alibi),
            batch_slopes=bool(caps.alibi) and batch_slopes,
            batch=batch,
            num_heads=heads,
            num_kv_heads=kv_heads,
            query_len=queries,
            padding=(spec.padding * 2)[:batch],
        )
    )


@st.composite
def per_head_mask_specs(draw, subject):
    """A :class:`KernelSpec` of any shape kind whose mask is its own for every batch element
    and query head (:data:`~properties.kernel_spec.PER_HEAD_MASK`), with two batch elements
    and at least two query heads wherever the score budget holds them (``2 Hq Tq Tk <=
    max_scores``; the head dims then cut, :func:`fit_dims`, to keep ``max_kv``): a mask read
    with the batch and the head mixed up is right with one of either."""
    spec = draw(subject_kernel_specs(subject, masks=(PER_HEAD_MASK,)))
    lim = limits()
    heads = max(2, spec.num_heads)
    if 2 * heads * spec.query_len * spec.key_len <= lim.max_scores:
        spec = fit_dims(spec._replace(batch=2, num_heads=heads))
    return spec


@cached_strategy
def _decode_queries(most: int) -> st.SearchStrategy[int]:
    """A decode call's ``Tq``: ``1..4`` or, one draw in two, ``1..most`` (shrinks to 1)."""
    return st.one_of(st.integers(1, min(4, most)), st.integers(1, most))


@st.composite
def document_starts(draw, Tk: int) -> tuple[int, ...]:
    """Sorted key positions in ``1 .. Tk - 1`` where packed documents start (the first starts
    at 0), each a tile-boundary size; a start drawn twice makes an empty document between.
    Shrinks towards one document boundary, then towards the smallest position."""
    if Tk < 2:
        return ()
    starts = draw(st.lists(boundary_sizes(Tk - 1), min_size=1, max_size=4))
    return tuple(sorted(starts))


def draw_head_dims(draw, batch: int, num_kv_heads: int, Tk: int) -> tuple[int, int]:
    """``(D, Dv)`` drawn with ``draw`` (a composite's or ``st.data()``'s): :func:`head_dims`,
    ``Dv`` the same as ``D`` or its own, each cut (:func:`fit_dim`) so that the K/V of
    ``batch * num_kv_heads * Tk`` positions stay within the profile's ``max_kv`` (the
    reference reads every key and value)."""
    max_dim = widest_dim(batch, num_kv_heads, Tk)
    head_dim = fit_dim(draw(head_dims(), label="head_dim"), max_dim)
    value_dim = fit_dim(draw(st.one_of(st.just(head_dim), head_dims()), label="value_dim"), max_dim)
    return head_dim, value_dim


def draw_window(draw, convention: str, max_side: int, lefts=None) -> tuple:
    """A window ``(left, right)`` drawn with ``draw`` in a subject's ``convention``: each side
    a boundary size up to ``max_side``, 0 or None (``"offsets"``); for ``"sliding_window"``
    (Hugging Face's) a left count ``W - 1`` (never None) and ``right=None``. ``lefts``: the
    left side's strategy instead, the right side then 0 or None."""
    sliding = convention == "sliding_window"
    count = st.one_of(boundary_sizes(max_side), st.just(0))
    side = count if sliding else st.one_of(count, st.none())
    left = draw(side if lefts is None else lefts, label="window left")
    if sliding:
        return left, None
    rights = side if lefts is None else st.one_of(st.just(0), st.none())
    return left, draw(rights, label="window right")


def widest_dim(batch: int, num_kv_heads: int, Tk: int) -> int:
    """The widest head dim (at most 256) for which the K/V of ``batch * num_kv_heads * Tk``
    positions, ``D = Dv`` wide, stay within the profile's ``max_kv`` (at least 1)."""
    return max(1, min(256, limits().max_kv // (2 * batch * num_kv_heads * Tk)))


def fit_dims(spec: KernelSpec) -> KernelSpec:
    """``spec`` with its head and value dims cut (:func:`fit_dim`) to :func:`widest_dim` of
    its own batch, K/V heads and key length: for a strategy that changed those after
    :func:`draw_head_dims`."""
    max_dim = widest_dim(spec.batch, spec.num_kv_heads, spec.key_len)
    return spec._replace(
        head_dim=fit_dim(spec.head_dim, max_dim), value_dim=fit_dim(spec.value_dim, max_dim)
    )


def fit_dim(dim: int, max_dim: int) -> int:
    """``dim`` if it fits in ``max_dim``, else the largest listed head dim that does (else
    ``max_dim``)."""
    if dim <= max_dim:
        return dim
    return max([d for d in HEAD_DIMS if d <= max_dim] or [max_dim])


@cached_strategy
def chunk_sizes(Tq: int, Tk: int) -> st.SearchStrategy[int]:
    """A ``chunk_size``: a boundary size up to ``Tk + 1``, or one draw in two (for ``Tq >=
    3``) one in ``[ceil(Tq / 2), Tq - 1]``, so that a chunk edge falls among the queries and
    the chunks on both sides of it are longer than half of them: a query tile straddles the
    edge of two chunks longer than a tile (Llama 4's chunks of 8192 positions meet tiles of
    64-128 rows), where a kernel that takes the tile's key range or mask from one of its
    rows' chunks goes wrong for the others; and a decode's few queries straddle an edge.
    Measured (random draws of the chunks property, 500 or 600 per fault): six chunk faults,
    five in query tiles that straddle an edge and a decode path that takes one chunk for all
    its queries, differed from impl in 521 draws in all against 402 with the whole range
    alone; the decode path's 83 against 29, two of the six less often (51 against 68, 63
    against 70)."""
    anywhere = boundary_sizes(Tk + 1)
    if Tq < 3:
        return anywhere
    return one_in(2, anywhere, boundary_sizes(Tq - 1, min_size=(Tq + 1) // 2))


def fit_group(group: int, cost: int, budget: int) -> int:
    """``group`` (query heads per K/V head) if ``group * cost`` fits in ``budget``, else the
    largest of :data:`GROUPS` that does (else 1): a budget of scores or heads, ``cost`` of it
    per query head of the group."""
    if group * cost <= budget:
        return group
    return max([g for g in GROUPS if g * cost <= budget] or [1])


def subject_kernel_specs(subject, **kwargs):
    """:func:`kernel_specs` restricted to what ``subject`` declares it supports."""
    return kernel_specs(**subject_declared(subject, kwargs))
