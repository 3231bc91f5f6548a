"""Properties of attention sinks, ``sinks``: one logit per query head in every row's softmax
denominator, with no value (:mod:`oracle.rules.sinks`; gpt-oss). A subject declares
``sinks``; without it these properties skip.

The laws: the output is within its error bound of the 50-digit oracle's, which adds
``exp(sigma_h - s_m)`` to each denominator (rows that see no key but have a finite sink
included: their output is 0); a sink of ``-inf`` is no sink; decoding through the cache with
sinks equals prefill with them. That the oracle's output with a sink is its plain output
times ``sigmoid(lse - sigma_h)`` is ``oracle/tests/test_sinks.py``.
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
from attnprops.properties._support import one_head
from attnprops.properties._support import visibility
from attnprops.properties.agreement_bounds import agreement_bounds
from attnprops.properties.bounds import two_computations
from attnprops.properties.checks import assert_within
from attnprops.properties.plugin import current_subject
from attnprops.properties.strategies import declared_variants
from attnprops.properties.strategies import subject_cases
from attnprops.properties.test_kv_cache import cache_runs
from attnprops.properties.variant_draws import attention_sinks

SUBJECT = current_subject()
_WITH = declared_variants(SUBJECT, sinks=True)
_OTHERS = declared_variants(SUBJECT, sinks=False)


@pytest.mark.requires("sinks")
@pytest.mark.oracle_backed
@given(case=st.one_of(subject_cases(SUBJECT, sinks=True), subject_cases(SUBJECT, **_WITH)))
def test_output_with_sinks_matches_oracle(subject, case):
    """With sinks (``-inf``, near the scores, far above and below them; with masks,
    causality, offsets, GQA, blocks, and half the time every declared feature (windows,
    documents, chunks, ALiBi, caps), so that a counterexample shrinks to the features its
    fault needs; some rows hiding every key
    from a head with a finite sink) the output is within the error bound of the 50-digit
    oracle's: the sink counted once in each denominator, never as a value, and a row that
    sees no key giving 0."""
    assert_output_matches_oracle(
        subject, fit_to_subject(case, subject), what="output with sinks vs 50-digit oracle"
    )


@pytest.mark.requires("sinks")
@given(case=st.one_of(subject_cases(SUBJECT), subject_cases(SUBJECT, **_OTHERS)))
def test_sinks_of_minus_inf_are_no_sinks(subject, case):
    """Sinks that are all ``-inf`` give the output without sinks, within twice the agreement
    bound of the subject's arithmetic (its path with sinks must not change anything else)."""
    case = fit_to_subject(case, subject)
    heads = 1 if case.query.ndim == 2 else case.query.shape[1]
    empty = case._replace(sinks=np.full(heads, -np.inf, dtype=case.dtype))
    plain = attend(subject, case, what="attention without sinks")
    sunk = attend(subject, empty, what="attention with sinks of -inf")
    with np.errstate(over="ignore"):
        bound = two_computations(
            agreement_bounds(case, visibility(case), subject.arithmetic(case.dtype))
        )
    assert_within(
        out=four_d(sunk),
        expected=four_d(plain),
        bound=bound,
        what="sinks of -inf vs no sinks",
        case=empty,
    )


@pytest.mark.requires("sinks", "kv_cache")
@pytest.mark.oracle_backed
@given(run=cache_runs(), data=st.data())
def test_decode_with_sinks_equals_prefill_with_sinks(subject, run, data):
    """Decoding through the cache with sinks (token by token or in chunks) equals causal
    attention with those sinks over the whole sequence, within the oracle's error bound:
    every step's denominators hold the sink once."""
    case, chunks = run
    case = fit_to_subject(case, subject)
    sinks = data.draw(attention_sinks(case.query.shape[1], case.dtype), label="sinks")
    case = case._replace(sinks=sinks)
    note(f"chunks: {chunks}, sinks: {sinks.tolist()}")
    assert_decode_matches_oracle(
        subject, case, chunks, f"cached decode with sinks in chunks {chunks} vs prefill"
    )


@pytest.mark.requires("sinks")
@given(case=subject_cases(SUBJECT, sinks=True))
def test_each_query_head_takes_its_own_sink(subject, case):
    """Cut to one batch element and one query head (its K/V head ``h // G``, its slice of the
    mask, its one sink), the call gives that head's rows of the whole call, within twice the
    agreement bound of the subject's arithmetic: a sink read from another head (laid out
    ``(G, Hkv)`` instead of ``(Hkv, G)``, or the group's first head's) moves them."""
    case = fit_to_subject(case, subject)
    whole = four_d(attend(subject, case, what="attention of every head"))
    B, Hq = whole.shape[:2]
    for b in range(B):
        for h in range(Hq):
            alone = one_head(case, b, h)  # 4-D: the strategy draws no 2-D case here
            alone = alone._replace(sinks=case.sinks[h : h + 1])
            out = attend(subject, alone, what=f"batch {b}, head {h} alone")
            with np.errstate(over="ignore"):
                bound = two_computations(
                    agreement_bounds(alone, visibility(alone), subject.arithmetic(case.dtype))
                )
            assert_within(
                out=whole[b : b + 1, h : h + 1],
                expected=out,
                bound=bound,
                what=f"batch {b}, head {h} (sink {float(case.sinks[h])!r}) in the whole call "
                "vs alone",
                case=alone,
            )
