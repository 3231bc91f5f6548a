"""How many examples each Hypothesis property ran, in this process: the results record's
``examples`` (:mod:`properties.results`), carried to the controller in the report's
``user_properties`` under :data:`EXAMPLES_PROPERTY`. The plugin wraps the properties at
collection (:func:`count_examples`), says which test runs (:func:`started`) and takes its
count when it ends (:func:`finished`).
"""

from __future__ import annotations

import functools
from collections import Counter

__all__ = ["EXAMPLES_PROPERTY", "count_examples", "finished", "started"]

EXAMPLES_PROPERTY = "attnprops_examples"  # the user_properties key that carries the count
_EXAMPLES: Counter = Counter()  # node id -> examples run
_FAILED: set = set()  # node ids whose property has failed once (shrinking is not counted)
_CURRENT: dict = {}  # "nodeid": the test running now in this process


def started(nodeid: str) -> None:
    """The test ``nodeid`` starts running in this process."""
    _CURRENT["nodeid"] = nodeid


def finished(nodeid: str) -> int:
    """The examples ``nodeid`` ran (0 for a test that is not a Hypothesis property); its
    count is reset."""
    _FAILED.discard(nodeid)
    return _EXAMPLES.pop(nodeid, 0)


def count_examples(items) -> None:
    """Count the examples each Hypothesis property runs, through its documented hook for
    wrapping the test body (``test.hypothesis.inner_test``, replaceable "to wrap the inner
    test"): every call up to and including the first failing one, less the calls rejected by
    ``assume``/filters (``UnsatisfiedAssumption``): the explicit examples (profiles that run
    them) and the generated ones until the property first fails, or all of them when it
    passes; never the shrinking. (Hypothesis's observability callbacks could count them too,
    but they build a JSON observation of every example: measured here, 10-25 % more time
    for the oracle-backed properties of test_values and test_visibility.)"""
    from hypothesis.errors import UnsatisfiedAssumption

    for item in items:
        handle = getattr(getattr(item, "obj", None), "hypothesis", None)
        inner = getattr(handle, "inner_test", None)
        if inner is None or getattr(inner, "_attnprops_counted", False):
            continue  # not a Hypothesis test, or a parametrization already wrapped

        @functools.wraps(inner)  # Hypothesis prints the counterexample with its name
        def counted(*args, __inner=inner, **kwargs):
            nodeid = _CURRENT.get("nodeid")
            try:
                result = __inner(*args, **kwargs)
            except UnsatisfiedAssumption:  # an invalid example: not counted
                raise
            except Exception:  # the first failure (Hypothesis's own BaseException signals,
                # such as a draw that ran out of data, are neither)
                if nodeid not in _FAILED:
                    _FAILED.add(nodeid)
                    _EXAMPLES[nodeid] += 1
                raise
            if nodeid not in _FAILED:
                _EXAMPLES[nodeid] += 1
            return result

        counted._attnprops_counted = True
        handle.inner_test = counted
