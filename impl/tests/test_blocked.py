"""The blocked (online-softmax) path of impl.attention and the dense path's fast validation.

``impl.attention(..., block_size=n)`` must agree with the dense path up to rounding for every
block size (its rules and errors: test_path_rules.py), give hidden keys exactly
zero weight, and never allocate a ``(Tq, Tk)``-sized array. The dense path (``block_size="dense"``,
and the default ``block_size=None`` on calls this small) must stay bitwise equal to the
reference formula it replaced (rules.check_attention_inputs,
masked scores, max-subtracted softmax, ``weights @ value``), written out in
``impl/tests/formula.py``.
"""

from __future__ import annotations

import tracemalloc

import ml_dtypes
import numpy as np
import pytest

from attnprops import impl
from attnprops import oracle
from attnprops.impl.tests import formula
from attnprops.impl.tests.paths import close
from attnprops.impl.tests.paths import outcome
from attnprops.oracle.rules import ScoreOverflowError
from attnprops.oracle.rules import compute_dtype

DTYPES = (np.float16, np.float32, np.float64)


def _random_call(rng, n):
    """A random valid-or-invalid call: shapes, GQA, masks of several broadcast shapes (some
    fully masking a row), causality with and without query_start, local windows, ALiBi,
    packed documents and chunks, 2-D inputs."""
    dtype = DTYPES[n % 3]
    two_d = n % 7 == 0
    B, Hkv, G = (1, 1, 1) if two_d else tuple(int(x) for x in rng.integers(1, 3, size=3))
    Tq, Tk = int(rng.integers(1, 8)), int(rng.integers(1, 10))
    D, Dv = (int(x) for x in rng.integers(1, 5, size=2))
    Hq = Hkv * G
    q = rng.normal(size=(B, Hq, Tq, D)).astype(dtype)
    k = rng.normal(size=(B, Hkv, Tk, D)).astype(dtype) * (3 if n % 5 == 0 else 1)
    v = rng.normal(size=(B, Hkv, Tk, Dv)).astype(dtype)
    target = (B, Hq, Tq, Tk)
    shapes = [(Tq, Tk), (B, 1, 1, Tk), (B, 1, Tq, Tk), target, (1, Tk), (Tq, 1), (1, Hq, 1, Tk)]
    mask = None
    kind = n % 4
    if kind:
        shape = shapes[int(rng.integers(len(shapes)))]
        if two_d:
            shape = shape[-2:]
        density = (0.9, 0.6, 0.3)[int(rng.integers(3))]
        if kind in (1, 2):
            mask = rng.random(shape) < density
        else:
            mask = rng.normal(size=shape) * 3
            mask[rng.random(shape) >= density] = -np.inf
            mask = mask.astype(DTYPES[int(rng.integers(3))])
    causal = bool(rng.integers(2)) and Tq <= Tk
    start = None
    if Tq <= Tk and rng.integers(2):
        start = int(rng.integers(0, Tk - Tq + 1))
    scale = None if rng.integers(3) else float(rng.uniform(0.05, 4))
    options = dict(attn_mask=mask, is_causal=causal, query_start=start, scale=scale)
    if n % 3 == 1:  # a local window, sides 0..4 or unbounded (some rows see nothing)
        sides = [None if rng.random() < 0.25 else int(rng.integers(0, 5)) for _ in "lr"]
        options["window"] = tuple(sides)
    if n % 4 == 2:  # ALiBi slopes, per head or per batch element and head
        options["alibi_slopes"] = rng.uniform(-1, 1, size=(Hq,) if n % 8 == 2 else (B, Hq))
    if n % 5 == 3:  # packed documents (some queries without a key of theirs) and chunks
        ids = np.sort(rng.integers(0, 3, size=(B, Tk)), axis=-1)
        options["segment_ids"] = (np.sort(rng.integers(0, 3, size=(B, Tq)), axis=-1), ids)
        options["chunk_size"] = int(rng.integers(1, 6)) if n % 2 else None
    if two_d:
        q, k, v = q[0, 0], k[0, 0], v[0, 0]
    return q, k, v, options


def _reference(q, k, v, **kw):
    """The dense formula as it was written before the fast path: the rulebook's dense
    visibility, then scores, softmax and weights @ value (``impl/tests/formula.py``)."""
    return formula.attention(q, k, v, **kw)


@pytest.mark.parametrize("block_size", ["dense", None])
def test_dense_path_is_bitwise_the_reference_formula(block_size):
    """block_size="dense", and the default on these small calls (Tk < 10): bitwise equal to
    the pre-fast-path formula, same errors (oracle.rules)."""
    rng = np.random.default_rng(0)
    checked = 0
    for n in range(600):
        q, k, v, kw = _random_call(rng, n)
        want = outcome(lambda: _reference(q, k, v, **kw))
        got = outcome(lambda: impl.attention(q, k, v, block_size=block_size, **kw))
        if want[0] != "ok":
            assert got == want, n
            continue
        assert got[0] == "ok" and got[1].dtype == want[1].dtype, n
        np.testing.assert_array_equal(got[1], want[1])
        weights = impl.attention_weights(q, k, **kw)
        np.testing.assert_array_equal(weights, formula.attention_weights(q, k, **kw))
        checked += 1
    assert checked > 300


@pytest.mark.parametrize("block_size", [1, 2, 3, 4, 5, 7, 9, 10, 64, np.int64(2)])
def test_blocked_equals_dense_within_rounding(block_size):
    """Every block size (smaller than Tk, not dividing it, larger than Tk) gives the dense
    result up to rounding, or raises exactly the dense path's error."""
    rng = np.random.default_rng(int(block_size))
    for n in range(250):
        q, k, v, kw = _random_call(rng, n)
        dense = outcome(lambda: impl.attention(q, k, v, block_size="dense", **kw))
        blocked = outcome(lambda: impl.attention(q, k, v, block_size=block_size, **kw))
        if dense[0] != "ok":
            assert blocked == dense, n
            continue
        assert blocked[0] == "ok", (n, blocked)
        assert blocked[1].shape == dense[1].shape and blocked[1].dtype == dense[1].dtype
        close(blocked[1], dense[1], v, q.dtype)


def test_blocked_matches_oracle_across_block_boundaries():
    """Scores growing along the keys (the max moves to every new block) and shrinking: the
    rescaling is exercised on every block; the result matches the 50-digit oracle."""
    Tk = 11
    key = np.arange(Tk, dtype=np.float64)[:, None] * np.array([[1.5, -0.25]])
    query = np.array([[2.0, 1.0], [-1.0, 0.5], [0.3, -2.0]])
    value = np.random.default_rng(3).normal(size=(Tk, 3))
    want = oracle.attention(query, key, value).value
    for key_order in (key, key[::-1].copy()):
        want = oracle.attention(query, key_order, value).value
        for block_size in range(1, Tk + 2):
            got = impl.attention(query, key_order, value, block_size=block_size)
            np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("dtype", DTYPES)
def test_blocked_float16_is_computed_in_float32(dtype):
    """float16 inputs: the blocked result is the float32 computation rounded to float16."""
    rng = np.random.default_rng(5)
    q, k, v = (rng.normal(size=s).astype(dtype) for s in ((2, 4, 6, 3), (2, 2, 9, 3), (2, 2, 9, 5)))
    compute = compute_dtype(dtype)
    for block_size in (1, 4, 9):
        got = impl.attention(q, k, v, is_causal=True, block_size=block_size)
        upcast = impl.attention(
            q.astype(compute),
            k.astype(compute),
            v.astype(compute),
            is_causal=True,
            block_size=block_size,
        )
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, upcast.astype(dtype))


def test_hidden_keys_contribute_exactly_zero():
    """Changing K/V at hidden positions (mask or causality) to huge values leaves the blocked
    output bitwise unchanged; a hidden key whose score overflows is not an error."""
    rng = np.random.default_rng(11)
    q = rng.normal(size=(1, 2, 5, 4))
    k, v = rng.normal(size=(1, 2, 9, 4)), rng.normal(size=(1, 2, 9, 3))
    mask = np.ones((1, 1, 1, 9), dtype=bool)
    mask[..., 2] = False
    for block_size in (1, 2, 4, 9):
        kw = dict(attn_mask=mask, is_causal=True, query_start=2, block_size=block_size)
        base = impl.attention(q, k, v, **kw)
        k2, v2 = k.copy(), v.copy()
        k2[:, :, 2] = 1e300  # masked key: its score overflows, which is fine
        v2[:, :, 2] = 1e300
        k2[:, :, 7:] = -1e300  # causally hidden from every query (start 2 + 4 = 6)
        v2[:, :, 7:] = 1e300
        np.testing.assert_array_equal(impl.attention(q, k2, v2, **kw), base)


def test_blocked_leaves_inputs_unchanged_and_accepts_views():
    """Inputs (also non-contiguous views) are read only."""
    rng = np.random.default_rng(13)
    base = rng.normal(size=(1, 3, 10, 4)).astype(np.float32)
    q = rng.normal(size=(1, 3, 4, 10)).astype(np.float32).swapaxes(-1, -2)  # (1, 3, 10, 4)
    k, v = base[:, :1, ::2], base[:, 1:2, 1::2]  # (1, 1, 5, 4), strided views
    mask = rng.normal(size=(10, 5)).astype(np.float16)
    snapshot = [x.copy() for x in (base, q, mask)]
    dense = impl.attention(q, k, v, attn_mask=mask, block_size="dense")
    for block_size in (1, 2, 3, 5):
        close(impl.attention(q, k, v, attn_mask=mask, block_size=block_size), dense, v, np.float32)
    for x, before in zip((base, q, mask), snapshot):
        np.testing.assert_array_equal(x, before)


def _peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_blocked_path_allocates_no_tq_by_tk_array():
    """T=2048 causal with a key-padding mask and 2 heads: the blocked path's peak extra memory
    (tracemalloc) stays well below one byte per (query, key) pair, i.e. it allocates neither
    scores nor a visibility mask of shape (Tq, Tk) (it holds about 10 bytes per (query, key of
    one block) pair of each head), and so does the default at this size; the dense path needs
    several bytes per pair."""
    T, D = 2048, 8
    rng = np.random.default_rng(17)
    q = rng.normal(size=(1, 2, T, D)).astype(np.float32)
    k = rng.normal(size=(1, 2, T, D)).astype(np.float32)
    v = rng.normal(size=(1, 2, T, D)).astype(np.float32)
    padding = np.ones((1, 1, 1, T), dtype=bool)
    padding[..., T // 2 : T // 2 + 7] = False
    pairs = T * T
    blocked = _peak_bytes(
        lambda: impl.attention(q, k, v, attn_mask=padding, is_causal=True, block_size=32)
    )
    default = _peak_bytes(lambda: impl.attention(q, k, v, attn_mask=padding, is_causal=True))
    dense = _peak_bytes(
        lambda: impl.attention(q, k, v, attn_mask=padding, is_causal=True, block_size="dense")
    )
    assert blocked < pairs / 2, blocked
    assert default < pairs / 2, default
    assert dense > 2 * 4 * pairs, dense  # 2 heads of float32 scores at least


@pytest.mark.parametrize("dtype", DTYPES)
def test_larger_problems_take_the_fast_paths_unchanged(dtype):
    """At sizes where the scores dwarf the inputs the overflow scan is skipped when a bound
    proves no score can overflow: the dense path stays bitwise the reference formula, the
    blocked path agrees within rounding, and a real overflow is still detected."""
    rng = np.random.default_rng(23)
    q = rng.normal(size=(1, 4, 70, 8)).astype(dtype)
    k = rng.normal(size=(1, 2, 90, 8)).astype(dtype)
    v = rng.normal(size=(1, 2, 90, 5)).astype(dtype)
    padding = rng.random((1, 1, 1, 90)) < 0.8
    padding[..., :3] = True
    bias = (rng.normal(size=(70, 90)) * 2).astype(dtype)
    for kw in (
        dict(is_causal=True),
        dict(attn_mask=padding, is_causal=True, query_start=5),
        dict(attn_mask=bias),
        dict(attn_mask=bias, scale=0.7),
    ):
        dense = impl.attention(q, k, v, block_size="dense", **kw)
        np.testing.assert_array_equal(dense, _reference(q, k, v, **kw))
        for block_size in (16, 33, 128):
            close(impl.attention(q, k, v, block_size=block_size, **kw), dense, v, dtype)
    big = k.copy()
    big[0, 1, 40] = ml_dtypes.finfo(dtype).max / 2
    q_big = q.copy()
    q_big[0, 3, 50] = ml_dtypes.finfo(dtype).max / 4
    # float16 is computed in float32, where float16 products cannot overflow: scale them up
    scale = 1e36 if dtype == np.float16 else None
    for block_size in (None, "dense", 16):
        with pytest.raises(ScoreOverflowError):
            impl.attention(q_big, big, v, scale=scale, block_size=block_size)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("block_size", [None, "dense", 1, 2, 3])
def test_values_near_the_dtype_maximum_give_the_finite_oracle_output(dtype, block_size):
    """Every output is a convex combination of values, so it fits the dtype; values near the
    maximum used to overflow on the way (blocked: the running sum before dividing gave inf,
    and inf - inf gave NaN; dense: weights summing to 1 + ulp times max gave inf). Found by a
    newcomer's attack; now the output is recomputed with scaled values (Attention.rescaled_output)."""
    big = float(ml_dtypes.finfo(dtype).max)
    q = np.zeros((1, 1, 2, 1), dtype)
    cases = [
        np.array([0.95, 0.95]) * big,
        np.array([0.95, 0.95, -0.95, -0.95]) * big,
        np.full(11, big),
        np.array([big, -big, big / 2, 1.0, -3.0]),
    ]
    for values in cases:
        v = values.astype(dtype).reshape(1, 1, -1, 1)
        k = np.zeros((1, 1, v.shape[2], 1), dtype)
        out = impl.attention(q, k, v, block_size=block_size)
        wanted = oracle.attention(q, k, v).value.astype(dtype)
        assert np.isfinite(out).all(), (values, out)
        np.testing.assert_allclose(
            out,
            wanted,
            rtol=4 * ml_dtypes.finfo(dtype).eps,
            atol=4 * ml_dtypes.finfo(dtype).eps * big,
        )


@pytest.mark.parametrize("block_size", [None, "dense", 1, 2, 3, 5])
def test_overflow_rescaling_leaves_elements_that_did_not_overflow_alone(block_size):
    """Elements whose own values are tiny keep their exact result when other elements of the
    call overflow and are recomputed with scaled values (found by an attack: scaling the
    whole call turned a row's only visible value 5e-324 into 0, and broke the error bound of
    a float32 row of tiny values next to rows at float32 max)."""
    big = ml_dtypes.finfo(np.float64).max
    q, k = np.zeros((2, 1)), np.zeros((3, 1))
    v = np.array([[5e-324], [big], [big]])
    mask = np.array([[True, False, False], [False, True, True]])
    out = impl.attention(q, k, v, attn_mask=mask, block_size=block_size)
    assert out[0, 0] == 5e-324 and out[1, 0] == big  # one visible key: exactly its value

    tiny32, max32 = ml_dtypes.finfo(np.float32).tiny, ml_dtypes.finfo(np.float32).max
    q, k = np.zeros((2, 1), np.float32), np.zeros((64, 1), np.float32)
    v = np.zeros((64, 1), np.float32)
    v[0], v[-2:] = 1.7 * tiny32, max32
    mask = np.zeros((2, 64), bool)
    mask[0, :-2] = mask[1, -2:] = True
    out = impl.attention(q, k, v, attn_mask=mask, block_size=block_size)
    wanted = oracle.attention(q, k, v, attn_mask=mask).value
    np.testing.assert_allclose(
        out, wanted.astype(np.float32), rtol=4 * ml_dtypes.finfo(np.float32).eps, atol=0
    )


@pytest.mark.parametrize("block_size", [2, 3, 4])
def test_blocked_windows_skip_only_blocks_no_row_sees(block_size):
    """With a window the blocked path visits, for each query tile, the key blocks from the
    one holding the tile's first visible key (``start + t0 - left``, rounded down to a block
    start) to the causal/window end; the result equals the dense path's on every tile,
    including tiles whose first key is not at a block start."""
    rng = np.random.default_rng(7)
    q, k, v = (rng.normal(size=(1, 2, 13, 3)) for _ in range(3))
    steps = impl.ATTENTION
    for left, right in [(0, 0), (1, 0), (2, None), (5, 1), (None, 0), (3, 2)]:
        for causal in (True, False):
            kw = dict(is_causal=causal, window=(left, right))
            dense = impl.attention(q, k, v, block_size="dense", **kw)
            blocked = impl.attention(q, k, v, block_size=block_size, **kw)
            np.testing.assert_allclose(blocked, dense, rtol=1e-13, atol=1e-15)
    call = impl.ATTENTION.validate(q, k, v, dict(window=(2, 1), is_causal=True))
    # tile [4, 8): positions 4..7 see keys 2..7; blocks of 3 start at 0, 3, 6 -> first 0
    assert steps.tile_key_range(call, slice(4, 8), 3) == (0, 8)
    # tile [8, 12) sees keys 6..11: its first block starts at 6
    assert steps.tile_key_range(call, slice(8, 12), 3) == (6, 12)
    wide = impl.ATTENTION.validate(q, k, v, dict(window=(2, 1)))
    assert steps.tile_key_range(wide, slice(0, 4), 4) == (0, 5)  # right: up to p + 1
