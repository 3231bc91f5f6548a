"""Fewer full collections of CPython's cyclic garbage collector while the suite runs.

CPython collects its youngest generation every 700 net allocations of tracked objects, the
middle one every 10 of those, and the oldest (a *full* collection, a scan of every tracked
object in the process) every 10 middle ones, when the objects waiting for it pass a quarter of
those already there (``gc.get_threshold()``: ``(700, 10, 10)``). A run of the suite holds
hundreds of thousands of long-lived objects (NumPy, Hypothesis, python-flint, mpmath, the
subject, and for the library subjects PyTorch and Transformers) and allocates millions of
short-lived ones (Hypothesis's choice sequences, mpmath numbers, cases), so full collections
come every few seconds and each walks the whole heap again.

Measured here (2-core machine, CPython 3.11, ``pytest -n auto``, a ``gc.callbacks`` timer in
each worker): at ``(700, 10, 10)`` the two workers made 36 and 20 full collections, 4.1-4.6 s
of each worker's 60 s, against 1.0 s for the young generation and 0.5 s for the middle one;
at ``(700, 10, 1000)`` two each, 0.1 s. Cycles among young objects are still collected by the
young collections as before; what waits longer is cyclic garbage that lived long enough to
reach the oldest generation (the objects held at the end of the run: 0.2-0.6 million at the
default, 0.9-1.3 million at 1000), and a full collection still comes every 1000 middle ones
(about once a minute of property tests), so it stays bounded in a run of hours.

:func:`fewer_full_collections` raises the third threshold to at least
:data:`FULL_COLLECTION_EVERY` and returns the thresholds to restore (the plugin restores them
when the run ends); the first two, and a larger third one set by the user, are kept.
"""

from __future__ import annotations

import gc

__all__ = ["FULL_COLLECTION_EVERY", "fewer_full_collections", "restore"]

FULL_COLLECTION_EVERY = 1000  # middle-generation collections per full collection, at least


def fewer_full_collections() -> tuple[int, int, int]:
    """Raise the collector's third threshold to at least :data:`FULL_COLLECTION_EVERY`;
    return the thresholds before (``gc.get_threshold()``), for :func:`restore`."""
    before = gc.get_threshold()
    first, second, third = before
    gc.set_threshold(first, second, max(third, FULL_COLLECTION_EVERY))
    return before


def restore(thresholds: tuple[int, int, int]) -> None:
    """Set the collector's thresholds back (what :func:`fewer_full_collections` returned)."""
    gc.set_threshold(*thresholds)
