"""impl's ``return_lse``: the same ``lse`` on both paths, its dtype and shape, the rows that
see no key, and its argument rule (the values against the oracle are the property
``test_lse_matches_oracle``)."""

from __future__ import annotations

import numpy as np
import pytest

from attnprops import impl
from attnprops import oracle
from attnprops.oracle.rules import AttentionInputError


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("block_size", ["dense", 1, 3, 64])
def test_lse_on_every_path_and_dtype(dtype, block_size):
    rng = np.random.default_rng(7)
    q = rng.normal(size=(2, 4, 5, 3)).astype(dtype)
    k = rng.normal(size=(2, 2, 7, 3)).astype(dtype)
    v = rng.normal(size=(2, 2, 7, 2)).astype(dtype)
    kwargs = dict(is_causal=True, sinks=np.array([0.5, -np.inf, 2.0, -1.0], dtype))
    out, lse = impl.attention(q, k, v, block_size=block_size, return_lse=True, **kwargs)
    assert np.array_equal(out, impl.attention(q, k, v, block_size=block_size, **kwargs))
    assert lse.shape == (2, 4, 5)
    assert lse.dtype == (np.float64 if dtype == np.float64 else np.float32)
    want = oracle.attention_parts(q, k, v, **kwargs).lse.value
    tolerance = 1e-13 if dtype == np.float64 else 2e-5 if dtype == np.float32 else 5e-3
    np.testing.assert_allclose(lse, want, rtol=0, atol=tolerance)


@pytest.mark.parametrize("block_size", ["dense", 2])
def test_a_row_left_to_its_sink_has_lse_minus_inf(block_size):
    q, k, v = np.ones((1, 1, 2, 2)), np.ones((1, 1, 3, 2)), np.ones((1, 1, 3, 2))
    mask = np.array([[True, True, False], [False, False, False]])
    out, lse = impl.attention(
        q, k, v, attn_mask=mask, sinks=np.array([0.0]), block_size=block_size, return_lse=True
    )
    assert lse[0, 0, 1] == -np.inf and (out[0, 0, 1] == 0).all()
    assert lse[0, 0, 0] == pytest.approx(np.log(2) + np.sqrt(2), abs=1e-15)


def test_two_d_inputs_give_a_one_d_lse():
    out, lse = impl.attention(np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 1)), return_lse=True)
    assert out.shape == (3, 1) and lse.shape == (3,)


@pytest.mark.parametrize("flag", [1, "yes", None])
def test_return_lse_must_be_a_bool(flag):
    with pytest.raises(AttentionInputError, match=r"^return_lse: "):
        impl.attention(np.ones((1, 1)), np.ones((1, 1)), np.ones((1, 1)), return_lse=flag)
