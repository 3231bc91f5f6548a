"""impl's paths follow the rulebook (oracle.rules) whichever the block size: the registry's
violations raise the oracle's class and message, ``block_size`` has its own rule, a row is
fully masked only when no block has a key for it, a visible score overflow raises in any block,
and every input is scanned for NaN and infinity in the rulebook's order. (Agreement, memory and
overflow rescaling: test_blocked.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from attnprops import impl
from attnprops import oracle
from attnprops.impl.tests.paths import close
from attnprops.impl.tests.paths import outcome
from attnprops.oracle.rules import AttentionInputError
from attnprops.oracle.rules import ScoreOverflowError
from attnprops.oracle.rules import ShapeError
from attnprops.oracle.rules import check_block_size
from attnprops.oracle.violations import example
from attnprops.oracle.violations import examples

_ATTENTION_EXAMPLES = [e.id for e in examples() if e.call.func == "attention"]


@pytest.mark.parametrize("example_id", _ATTENTION_EXAMPLES)
@pytest.mark.parametrize("block_size", [1, 2, 100, "dense", None])
def test_blocked_raises_the_rulebook_errors(example_id, block_size):
    """Each rule violation of the registry (oracle/violations) on an attention call
    raises the oracle's exact class and message on the blocked path too (and on the dense
    path and the default), and leaves the inputs unchanged."""
    fixed = example(example_id)
    call = fixed.call
    before = {k: a.copy() for k, a in call.arrays().items()}
    with pytest.raises(AttentionInputError) as expected:
        call.run(oracle)
    with pytest.raises(AttentionInputError) as got:
        impl.attention(call.query, call.key, call.value, block_size=block_size, **call.kwargs)
    assert type(got.value) is type(expected.value) is fixed.error
    assert str(got.value) == str(expected.value)
    for name, array in call.arrays().items():
        assert np.array_equal(array, before[name], equal_nan=True), name


@pytest.mark.parametrize(
    "bad",
    [
        0,
        -3,
        True,
        np.bool_(True),
        2.0,
        "4",
        np.float64(3.0),
        "Dense",
        "auto",
        b"dense",
        np.str_("blocked"),
    ],
)
def test_block_size_rule(bad):
    """block_size: an int >= 1 (not bool), else a ShapeError naming block_size (oracle.rules);
    impl also takes the name "dense" (exactly that str), read before the rulebook's check."""
    q = np.ones((2, 3))
    with pytest.raises(ShapeError, match="block_size"):
        impl.attention(q, q, q, block_size=bad)
    with pytest.raises(ShapeError, match="block_size"):
        check_block_size(bad)
    assert check_block_size(None) is None
    assert check_block_size(np.int32(3)) == 3 and type(check_block_size(np.int32(3))) is int


def test_fully_masked_row_only_within_some_blocks_is_valid():
    """A row hidden from every key of a block but not from all keys is valid; a row hidden
    from every key raises the rulebook's FullyMaskedRowError with the dense path's message."""
    rng = np.random.default_rng(9)
    q, k, v = rng.normal(size=(4, 2)), rng.normal(size=(8, 2)), rng.normal(size=(8, 3))
    mask = np.zeros((4, 8), dtype=bool)
    mask[0, 7] = mask[1, 0] = mask[2, 3:5] = mask[3, :] = True
    dense = impl.attention(q, k, v, attn_mask=mask, block_size="dense")
    for block_size in (1, 2, 3, 8):
        close(impl.attention(q, k, v, attn_mask=mask, block_size=block_size), dense, v, np.float64)
    mask[2] = False
    want = outcome(lambda: impl.attention(q, k, v, attn_mask=mask, block_size="dense"))
    assert want[0].__name__ == "FullyMaskedRowError" and "query=2" in want[1]
    for block_size in (1, 3, 8):
        assert (
            outcome(lambda: impl.attention(q, k, v, attn_mask=mask, block_size=block_size)) == want
        )


def test_visible_score_overflow_raises_on_the_blocked_path():
    """A visible scaled score beyond the compute dtype raises ScoreOverflowError in whichever
    block it lies (rules.ScoreOverflowError), also behind a float mask."""
    q = np.ones((2, 3), np.float32)
    k = np.ones((6, 3), np.float32)
    k[4] = 3e38
    v = np.ones((6, 2), np.float32)
    for block_size in (1, 2, 4, 6):
        with pytest.raises(ScoreOverflowError):
            impl.attention(q, k, v, block_size=block_size)
        hide = np.zeros((2, 6), np.float32)
        hide[:, 4] = -np.inf
        out = impl.attention(q, k, v, attn_mask=hide, block_size=block_size)
        np.testing.assert_array_equal(out, np.ones((2, 2), np.float32))


@pytest.mark.parametrize("block_size", [1, 3, 4, 100])
def test_blocked_scans_every_input_for_nan_and_infinity(block_size):
    """The blocked path scans query, key and value block by block: a NaN or infinity anywhere
    (also in keys no query sees) raises NonFiniteInputError naming the first bad argument in
    the rulebook's order, before any other error (oracle.rules)."""
    rng = np.random.default_rng(19)
    q = rng.normal(size=(1, 2, 3, 4))
    k, v = rng.normal(size=(1, 1, 11, 4)), rng.normal(size=(1, 1, 11, 2))
    kw = dict(is_causal=True, query_start=2, block_size=block_size)  # keys 5.. seen by no one
    impl.attention(q, k, v, **kw)
    for name, array in (("query", q), ("key", k), ("value", v)):
        for index in ((0, 0, 0, 0), (0, 0, -1, -1), (0, 0, 4, 1), (0, 0, 7, 0)):
            index = tuple(min(i, n - 1) if i >= 0 else i for i, n in zip(index, array.shape))
            for bad in (np.nan, np.inf, -np.inf):
                arrays = {"query": q.copy(), "key": k.copy(), "value": v.copy()}
                arrays[name][index] = bad
                args = (arrays["query"], arrays["key"], arrays["value"])
                want = outcome(lambda: oracle.attention(*args, is_causal=True, query_start=2))
                got = outcome(lambda: impl.attention(*args, **kw))
                assert got == want and want[0].__name__ == "NonFiniteInputError", (name, index)
    # Precedence: a NaN in a late key beats a NaN in an early value and a fully masked row.
    k2, v2 = k.copy(), v.copy()
    k2[0, 0, 9, 0] = np.nan
    v2[0, 0, 0, 0] = np.nan
    mask = np.ones((3, 11), dtype=bool)
    mask[1] = False
    want = outcome(lambda: oracle.attention(q, k2, v2, attn_mask=mask))
    assert want[0].__name__ == "NonFiniteInputError" and want[1].startswith("key")
    assert outcome(lambda: impl.attention(q, k2, v2, attn_mask=mask, block_size=block_size)) == want
