"""Fewer full collections of CPython's cyclic garbage collector while the suite runs.

CPython collects its youngest generation every ``threshold0`` net allocations of tracked
objects, the middle one every ``threshold1`` of those, and the oldest (a *full* collection, a
scan of every tracked object in the process) every ``threshold2`` middle ones, when the
objects waiting for it pass a quarter of those already there (``gc.get_threshold()``:
``(700, 10, 10)`` on CPython 3.11 and 3.12, ``(2000, 10, 10)`` on 3.13). A run of the suite
holds hundreds of thousands of long-lived objects (NumPy, Hypothesis, python-flint, mpmath,
the subject, and for the library subjects PyTorch and Transformers) and allocates millions
of short-lived ones (Hypothesis's choice sequences, mpmath numbers, cases), so full
collections come every few seconds and each walks the whole heap again.

:func:`fewer_full_collections` raises ``threshold2`` to at least
:data:`FULL_COLLECTION_EVERY` and returns the thresholds to restore (the plugin restores them
when the run ends); ``threshold0``, ``threshold1`` and a larger ``threshold2`` set by the user
are kept. Young cycles are still collected by the young collections as before; what waits
longer is cyclic garbage that lived long enough to reach the oldest generation, so a process
holds more memory between full collections: a trade of memory for time.

Measured on the 2-core development machine, CPython 3.11 (``pytest -n auto``, a
``gc.callbacks`` timer and ``ru_maxrss`` in each of the two workers, one run each; the third
threshold set after the plugin's):

==========  ===============================  ===================  ===============
threshold2  full collections (per worker)    their time           peak memory
==========  ===============================  ===================  ===============
10          37 and 20                        2.4 s and 3.1 s      358 and 889 MB
300         4 and 4                          0.65 s and 1.1 s     433 and 960 MB
1000        2 and 2                          0.06 s and 0.04 s    546 and 1032 MB
==========  ===============================  ===================  ===============

(the young and middle generations took 0.8 s and 0.3 s per worker in each); the run took
54.8 s, 52.5 s and 52.5 s. In one process (``-n 0``, eleven property files, 25 s) the peak
was 99 MB at 10, 125 MB at 100, 187 MB at 300 and 288 MB at 1000. 300 keeps most of the
time saved for about 75 MB more per process (each xdist worker is one).

Where the collector has no third threshold (CPython's incremental collector, which ignores
it: ``gc.get_threshold()[2]`` then reads 0 whatever was set) this changes nothing.
"""

from __future__ import annotations

import gc

__all__ = ["FULL_COLLECTION_EVERY", "fewer_full_collections", "restore"]

FULL_COLLECTION_EVERY = 300  # middle-generation collections per full collection, at least


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
