"""impl and the oracle enforce every rule of oracle/rules/ with the same error class and message."""

from __future__ import annotations

import numpy as np
import pytest

from attnprops import impl
from attnprops import oracle
from attnprops.oracle.rules import AttentionInputError
from attnprops.oracle.rules import DtypeError
from attnprops.oracle.violations import EXAMPLE_IDS
from attnprops.oracle.violations import example

MODULES = {"impl": impl, "oracle": oracle}


@pytest.mark.parametrize("example_id", EXAMPLE_IDS)
@pytest.mark.parametrize("module_name", sorted(MODULES))
def test_rejects_with_exact_class_and_keeps_inputs(module_name, example_id):
    """Each rule violation of the registry (oracle/violations.py) raises its exact rulebook
    class (an AttentionInputError/ValueError) naming the argument; inputs untouched."""
    fixed = example(example_id)
    before = {k: a.copy() for k, a in fixed.call.arrays().items()}
    with pytest.raises(fixed.error) as info:
        fixed.call.run(MODULES[module_name])
    assert type(info.value) is fixed.error
    assert isinstance(info.value, AttentionInputError)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, impl.AttentionInputError)
    assert fixed.argument in str(info.value)
    for name, array in fixed.call.arrays().items():
        assert np.array_equal(array, before[name], equal_nan=True), name


@pytest.mark.parametrize("example_id", EXAMPLE_IDS)
def test_impl_and_oracle_raise_identical_errors(example_id):
    """impl and oracle share one rulebook: same class and same message for every violation (oracle.rules)."""
    fixed = example(example_id)
    errors = []
    for module in (impl, oracle):
        with pytest.raises(AttentionInputError) as info:
            fixed.call.run(module)
        errors.append(info.value)
    assert type(errors[0]) is type(errors[1])
    assert str(errors[0]) == str(errors[1])


@pytest.mark.parametrize("module_name", sorted(MODULES))
@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_is_causal_must_be_bool(module_name, bad):
    """is_causal must be True or False (rules.check_is_causal)."""
    q = np.ones((2, 2))
    with pytest.raises(AttentionInputError, match="is_causal"):
        MODULES[module_name].attention(q, q, q, is_causal=bad)


@pytest.mark.parametrize("module_name", sorted(MODULES))
def test_valid_edge_values_are_accepted(module_name):
    """Edge values inside the rules are accepted: query_start 0 and Tk-Tq, numpy ints, tiny scale, bool/float masks (oracle.rules)."""
    module = MODULES[module_name]
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((1, 4)), rng.standard_normal((3, 4)), rng.standard_normal((3, 2))
    for start in (0, 2, np.int64(1)):
        module.attention(q, k, v, is_causal=True, query_start=start)
        module.attention(q, k, v, is_causal=False, query_start=start)
    module.attention(q, k, v, scale=np.float32(1e-30))
    module.attention(q, k, v, attn_mask=np.array([True, False, True]))
    module.attention(q, k, v, attn_mask=np.array([0.0, -np.inf, -1e300], dtype=np.float64))
    module.attention(q, k, v, attn_mask=np.zeros((1, 3), np.float16))


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
@pytest.mark.parametrize("block_size", [None, "dense", 1])
def test_ndarray_subclasses_are_read_as_plain_arrays_and_masked_arrays_refused(block_size):
    """np.matrix inputs give exactly the plain-array result (a plain ndarray, not a matrix);
    a masked array, for any argument or a cache append, raises DtypeError naming it (its mask
    would otherwise be dropped silently). Found by a newcomer's attack: np.matrix made impl
    fail inside NumPy and corrupt the heap."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((3, 2)) for _ in range(3))
    kwargs = {} if block_size is None else {"block_size": block_size}
    plain = impl.attention(q, k, v, **kwargs)
    got = impl.attention(np.asmatrix(q), np.asmatrix(k), np.asmatrix(v), **kwargs)
    assert type(got) is np.ndarray
    np.testing.assert_array_equal(got, plain)
    np.testing.assert_array_equal(
        oracle.attention(np.asmatrix(q), np.asmatrix(k), np.asmatrix(v)).value,
        oracle.attention(q, k, v).value,
    )
    masked = np.ma.masked_array(q, mask=np.eye(3, 2, dtype=bool))
    for name, args, options in (
        ("query", (masked, k, v), {}),
        ("key", (q, masked, v), {}),
        ("value", (q, k, masked), {}),
        ("attn_mask", (q, k, v), {"attn_mask": np.ma.masked_array(np.ones((3, 3), bool))}),
    ):
        for module in (impl, oracle):
            extra = kwargs if module is impl else {}
            with pytest.raises(DtypeError, match=f"^{name}: masked arrays"):
                module.attention(*args, **options, **extra)
    cache = impl.KVCache(1, 1, 2)
    with pytest.raises(DtypeError, match="^key: masked arrays"):
        cache.append(np.ma.masked_array(np.ones((1, 1, 1, 2))), np.ones((1, 1, 1, 2)))
    assert len(cache) == 0
