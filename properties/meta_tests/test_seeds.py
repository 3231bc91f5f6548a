"""Under the derandomized profiles a property of the suite draws the same examples whatever its
body says: the plugin seeds it from its file and function name (properties.draws.pin_seeds),
where Hypothesis would seed it from a digest of its source. Random profiles stay random, and
tests outside the suite's folder keep Hypothesis's seeding."""

from __future__ import annotations

import types

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from attnprops.properties.draws import pin_seeds
from attnprops.properties.selection import SUITE_DIR


def _property(body_edit: bool):
    """A fresh property ``test_draws`` (same module and name each time) that records its
    draws; ``body_edit`` changes its source."""
    drawn = []
    if body_edit:

        @settings(max_examples=30)
        @given(st.integers(0, 10**9))
        def test_draws(n):
            assert n >= 0  # an edit of the body
            drawn.append(n)

    else:

        @settings(max_examples=30)
        @given(st.integers(0, 10**9))
        def test_draws(n):
            drawn.append(n)

    return test_draws, drawn


def _draws(body_edit: bool, profile: str, folder=SUITE_DIR) -> list[int]:
    previous = settings.get_current_profile_name()
    settings.load_profile(profile)
    try:
        test, drawn = _property(body_edit)
        pin_seeds([types.SimpleNamespace(function=test, path=folder / "test_drawn.py")], SUITE_DIR)
        test()
    finally:
        settings.load_profile(previous)
    return drawn


def test_a_derandomized_property_draws_the_same_whatever_its_body():
    plain = _draws(False, "ci")
    assert len(plain) == 30 and plain == _draws(True, "ci")


def test_without_the_pinning_an_edit_changes_the_draws():
    """What the pinning is for: a test outside the suite keeps Hypothesis's digest seed."""
    outside = SUITE_DIR.parent.parent
    assert _draws(False, "ci", outside) != _draws(True, "ci", outside)


def test_a_random_profile_stays_random():
    assert _draws(False, "dev") != _draws(False, "dev")
