"""Properties of logit soft-capping, ``softcap=c``: the scaled scores become
``c * tanh(s / c)`` before the mask and the biases (:mod:`oracle.rules.softcap`; Gemma 2,
FlashAttention's ``softcap``). A subject declares ``softcap``; without it these properties
skip. That a capped call still hides exactly the hidden keys is
``test_each_query_sees_exactly_its_keys`` (``test_visibility.py``), which draws caps too.
"""

from __future__ import annotations

import pytest
from hypothesis import given

from attnprops.properties._support import assert_output_matches_oracle
from attnprops.properties._support import fit_to_subject
from attnprops.properties.plugin import current_subject
from attnprops.properties.strategies import declared_variants
from attnprops.properties.strategies import subject_cases

SUBJECT = current_subject()
_WITH = declared_variants(SUBJECT, softcap=True)


@pytest.mark.requires("softcap")
@pytest.mark.oracle_backed
@given(case=subject_cases(SUBJECT, **_WITH))
def test_softcapped_output_matches_oracle(subject, case):
    """With a cap (Gemma 2's 50 and 30, and any in [0.25, 64]; with masks, causality,
    offsets, GQA, ALiBi, windows, documents and sinks as declared; scores from well inside
    the cap to far past it) the output is within the error bound of the 50-digit oracle's, which
    caps before the mask and the biases and carries the cap's own rounding (``tanh`` within
    2 ulp, :mod:`properties.bounds`)."""
    assert_output_matches_oracle(
        subject, fit_to_subject(case, subject), what="softcapped output vs 50-digit oracle"
    )
