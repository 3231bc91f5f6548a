"""The source documents' fixed numbers, checked on the subject (regression values).

Seed 000 (attention math lab): the 3-token causal example printed to 6 decimals, the cached
decode of the last token (right offset vs offset 0), and the figures of its two broken
variants. Seed 003 (quick reference): the 2-token causal example, 4 decimals. Inputs and
figures: :mod:`oracle.lab`; each is compared within half a unit of its last printed decimal.
"""

from __future__ import annotations

import pytest

from attnprops.oracle import lab
from attnprops.properties._support import LAB_KEY
from attnprops.properties._support import LAB_QUERY
from attnprops.properties._support import LAB_VALUE
from attnprops.properties._support import QUICK_QUERY
from attnprops.properties._support import QUICK_VALUE
from attnprops.properties._support import lab_dtype
from attnprops.properties.checks import assert_shape_dtype
from attnprops.properties.checks import assert_within
from attnprops.properties.checks import call_subject


def _lab(subject, *arrays):
    """The seed arrays in float64 (:func:`_support.lab_dtype`: the test is skipped for a
    subject without float64)."""
    return [a.astype(lab_dtype(subject)) for a in arrays]


def _within(subject, out, printed: lab.Printed, what: str, one_row: bool = False) -> None:
    """``out[0, 0]`` is ``printed`` to its decimals (``one_row``: a printed row, compared as
    an output of one query row)."""
    __tracebackhide__ = True
    expected = printed.array()[None] if one_row else printed.array()
    out = assert_shape_dtype(
        out=out, shape=(1, 1) + expected.shape, dtype=lab_dtype(subject), what=what
    )
    assert_within(
        out=out[0, 0],
        expected=expected,
        bound=printed.tolerance,
        what=f"{what} ({printed.source}, {printed.decimals} decimals)",
    )


def test_seed_examples(subject):
    """Seed 000's 3-token causal context and its cached decode at query_start=2
    (:data:`oracle.lab.CONTEXT`, :data:`oracle.lab.DECODE`); seed 003's 2-token causal output
    (:data:`oracle.lab.QUICK_OUTPUT`)."""
    q, k, v = _lab(subject, LAB_QUERY, LAB_KEY, LAB_VALUE)
    quick_q, quick_v = _lab(subject, QUICK_QUERY, QUICK_VALUE)
    context = call_subject(subject.attention, q, k, v, is_causal=True, what="3-token causal")
    _within(subject, context, lab.CONTEXT, "seed 000 context")
    start = lab.DECODE_QUERY_START
    decode = call_subject(
        subject.attention,
        q[:, :, start:],
        k,
        v,
        is_causal=True,
        query_start=start,
        what=f"decode of the last token at query_start={start}",
    )
    _within(subject, decode, lab.DECODE, f"seed 000 decode at query_start={start}", one_row=True)
    out = call_subject(
        subject.attention, quick_q, quick_q, quick_v, is_causal=True, what="seed 003 2-token causal"
    )
    _within(subject, out, lab.QUICK_OUTPUT, "seed 003 output")


@pytest.mark.requires("weights")
def test_seed_example_weights(subject):
    """Seed 000's causal weights (:data:`oracle.lab.WEIGHTS`) and seed 003's
    (:data:`oracle.lab.QUICK_WEIGHTS`)."""
    q, k, quick_q = _lab(subject, LAB_QUERY, LAB_KEY, QUICK_QUERY)
    w = call_subject(subject.attention_weights, q, k, is_causal=True, what="3-token causal weights")
    _within(subject, w, lab.WEIGHTS, "seed 000 weights")
    w = call_subject(
        subject.attention_weights, quick_q, quick_q, is_causal=True, what="seed 003 weights"
    )
    _within(subject, w, lab.QUICK_WEIGHTS, "seed 003 weights")
