"""The suite's runs make CPython's full garbage collections rarer, and set the collector back
afterwards (:mod:`properties.garbage_collection`)."""

from __future__ import annotations

import gc

import pytest

from attnprops.properties.garbage_collection import FULL_COLLECTION_EVERY
from attnprops.properties.garbage_collection import fewer_full_collections
from attnprops.properties.garbage_collection import restore


@pytest.fixture
def thresholds():
    """The collector's thresholds, put back after the test whatever it set."""
    before = gc.get_threshold()
    yield before
    gc.set_threshold(*before)


def test_this_run_collects_the_oldest_generation_rarely():
    assert gc.get_threshold()[2] >= FULL_COLLECTION_EVERY


@pytest.mark.parametrize(
    ("before", "during"),
    [
        ((700, 10, 10), (700, 10, FULL_COLLECTION_EVERY)),  # CPython's defaults
        ((5000, 20, 5), (5000, 20, FULL_COLLECTION_EVERY)),  # the first two are kept
        ((700, 10, 5000), (700, 10, 5000)),  # a larger third threshold is kept
    ],
)
def test_only_the_third_threshold_rises_and_all_come_back(thresholds, before, during):
    gc.set_threshold(*before)
    returned = fewer_full_collections()
    assert returned == before
    assert gc.get_threshold() == during
    restore(returned)
    assert gc.get_threshold() == before
