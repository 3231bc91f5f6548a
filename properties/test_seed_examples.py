"""The source documents' fixed numbers, checked on the subject (regression values).

Seed 000 (attention math lab): the 3-token causal example printed to 6 decimals, the cached
decode of the last token (right offset vs offset 0: max error 1.439015), and the figures of
its two broken variants. Seed 003 (quick reference): the 2-token causal example, 4 decimals.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnprops.properties._support import LAB_KEY, LAB_QUERY, LAB_VALUE, QUICK_QUERY, QUICK_VALUE
from attnprops.properties.checks import assert_within, call_subject

PRINTED_6 = 5e-7  # half a unit in the 6th printed decimal
PRINTED_4 = 5e-5


def _widest(subject, *arrays):
    """The seed arrays in the widest dtype the subject declares (float64 when it does)."""
    dtype = max((np.dtype(d) for d in subject.dtypes), key=lambda d: d.itemsize)
    return [a.astype(dtype) for a in arrays]


def test_seed_examples(subject):
    """Seed 000's 3-token causal weights and context and its cached decode (query_start=2
    gives [-0.439015, -0.354843]); seed 003's 2-token causal output [[2, 0], [0.6605, 2.6790]]."""
    q, k, v = _widest(subject, LAB_QUERY[None, None], LAB_KEY[None, None], LAB_VALUE[None, None])
    quick_q, quick_v = _widest(subject, QUICK_QUERY, QUICK_VALUE)
    context = call_subject(subject.attention, q, k, v, is_causal=True, what="3-token causal")
    assert_within(out=np.asarray(context)[0, 0],
                  expected=[[1.0, 0.0], [0.278885, 0.721115], [-0.439015, -0.354843]],
                  bound=PRINTED_6, what="seed 000 context (6 decimals)")
    decode = call_subject(subject.attention, q[:, :, 2:], k, v, is_causal=True, query_start=2,
                          what="decode of the last token at query_start=2")
    assert_within(out=np.asarray(decode)[0, 0], expected=[[-0.439015, -0.354843]],
                  bound=PRINTED_6, what="seed 000 decode at query_start=2 (6 decimals)")
    out = call_subject(subject.attention, quick_q, quick_q, quick_v, is_causal=True,
                       what="seed 003 2-token causal")
    assert_within(out=np.asarray(out)[0, 0], expected=[[2.0, 0.0], [0.6605, 2.6790]],
                  bound=PRINTED_4, what="seed 003 output (4 decimals)")


@pytest.mark.requires("weights")
def test_seed_example_weights(subject):
    """Seed 000's causal weights [[1,0,0],[0.278885,0.721115,0],[0.158938,0.243109,0.597953]]
    and seed 003's [[1, 0], [0.3302, 0.6698]]."""
    q, k, quick_q = _widest(subject, LAB_QUERY[None, None], LAB_KEY[None, None], QUICK_QUERY)
    w = call_subject(subject.attention_weights, q, k, is_causal=True,
                     what="3-token causal weights")
    assert_within(out=np.asarray(w)[0, 0],
                  expected=[[1, 0, 0], [0.278885, 0.721115, 0], [0.158938, 0.243109, 0.597953]],
                  bound=PRINTED_6, what="seed 000 weights (6 decimals)")
    w = call_subject(subject.attention_weights, quick_q, quick_q, is_causal=True,
                     what="seed 003 weights")
    assert_within(out=np.asarray(w)[0, 0], expected=[[1, 0], [0.3302, 0.6698]],
                  bound=PRINTED_4, what="seed 003 weights (4 decimals)")
