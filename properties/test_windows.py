"""Properties of local (sliding-window) attention, ``window=(left, right)``.

Convention (:func:`oracle.rules.check_window`): the query at absolute position
``p = query_start + i`` sees key ``j`` iff ``p - left <= j <= p + right`` (either side None =
unbounded), AND-ed with the mask and with causality. A subject declares the capability
``window`` (``"offsets"``: this pair, FlashAttention's ``window_size``, JAX's
``local_window_size``; ``"sliding_window"``: Hugging Face's ``W = left + 1``), and is called
in its own convention (:meth:`properties.subject.Subject.call_kwargs`); without it these
properties skip. The kernel-sized window property is in ``test_kernel_sizes.py``; that each
query sees exactly the keys of its window is ``test_each_query_sees_exactly_its_keys``
(``test_visibility.py``).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import note
from hypothesis import strategies as st

from attnprops.properties._support import assert_decode_matches_oracle
from attnprops.properties._support import assert_output_matches_oracle
from attnprops.properties._support import attend
from attnprops.properties._support import fit_to_subject
from attnprops.properties._support import four_d
from attnprops.properties._support import visibility
from attnprops.properties.agreement_bounds import agreement_bounds
from attnprops.properties.bounds import two_computations
from attnprops.properties.checks import assert_within
from attnprops.properties.plugin import current_subject
from attnprops.properties.strategies import subject_cases
from attnprops.properties.test_kv_cache import cache_runs
from attnprops.properties.variant_draws import window_sides

SUBJECT = current_subject()
SLIDING = SUBJECT.capabilities.window == "sliding_window"


@pytest.mark.requires("window")
@pytest.mark.oracle_backed
@given(case=subject_cases(SUBJECT, windows=True))
def test_windowed_output_matches_oracle(subject, case):
    """With a local window (combined with masks, causality, offsets, GQA and every dtype) the
    output is within the error bound of the 50-digit oracle's."""
    assert_output_matches_oracle(
        subject, fit_to_subject(case, subject), what="windowed output vs 50-digit oracle"
    )


def _covering(case, data):
    """``case`` with a window that reaches every key from every query: ``left >= start +
    Tq - 1``, ``right >= Tk - 1 - start``, up to ``2**63`` (a side kept in a 64-bit integer
    overflows there)."""
    Tq, Tk = case.query.shape[-2], case.key.shape[-2]
    start = case.start

    def beyond(reach):
        return st.one_of(
            st.integers(max(0, reach), max(0, reach) + 3), st.sampled_from([2**31, 2**63])
        )

    left = data.draw(beyond(start + Tq - 1), label="left")
    right = None if SLIDING else data.draw(beyond(Tk - 1 - start), label="right")
    return case._replace(window=(left, right))


@pytest.mark.requires("window")
@given(case=subject_cases(SUBJECT, causal=True if SLIDING else None), data=st.data())
def test_window_covering_every_key_equals_no_window(subject, case, data):
    """A window at least as long as the sequence (``2**31`` and ``2**63`` among them) equals
    no window: the two calls agree within twice the agreement bound of the subject's
    arithmetic."""
    case = fit_to_subject(case, subject)
    wide = _covering(case, data)
    note(f"window: {wide.window}")
    plain = attend(subject, case, what="attention without a window")
    windowed = attend(subject, wide, what=f"attention with window {wide.window}")
    with np.errstate(over="ignore"):
        bound = two_computations(
            agreement_bounds(case, visibility(case), subject.arithmetic(case.dtype))
        )
    assert_within(
        out=four_d(windowed),
        expected=four_d(plain),
        bound=bound,
        what=f"window {wide.window} (covering every key) vs no window",
        case=wide,
    )


@pytest.mark.requires("window", "kv_cache")
@pytest.mark.oracle_backed
@given(run=cache_runs(), data=st.data())
def test_windowed_decode_equals_windowed_prefill(subject, run, data):
    """Decoding through the cache with a window (token by token or in chunks; each query at
    its absolute position, the window over absolute positions) equals causal attention with
    that window over the whole sequence."""
    case, chunks = run
    case = fit_to_subject(case, subject)
    T = case.key.shape[2]
    case = case._replace(window=data.draw(window_sides(T + 1, SLIDING), label="window"))
    note(f"chunks: {chunks}, window: {case.window}")
    assert_decode_matches_oracle(
        subject, case, chunks, f"windowed cached decode in chunks {chunks} vs windowed prefill"
    )
