"""What each property of the suite draws: how many examples (the costly-property markers) and
which ones (seeded by name under the derandomized profiles). The plugin applies both to the
collected tests (:mod:`properties.plugin`, at collection)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from hypothesis import seed
from hypothesis import settings

from attnprops.properties.profiles import COSTLY_MARKERS
from attnprops.properties.profiles import costly_examples
from attnprops.properties.selection import within

__all__ = ["pin_seeds", "scale_costly"]


def scale_costly(items) -> None:
    """Give each test marked with a key of :data:`properties.profiles.COSTLY_MARKERS` its
    share of the loaded profile's examples (``@settings`` applied to its ``@given`` test,
    once per function: every parametrization shares it)."""
    for item in items:
        function = getattr(item, "function", None)
        marked = [name for name in COSTLY_MARKERS if item.get_closest_marker(name)]
        if not marked or getattr(function, "_attnprops_scaled", False):
            continue
        count = costly_examples(marked[0], settings.default.max_examples)
        settings(max_examples=count)(function)
        function._attnprops_scaled = True


def pin_seeds(items, suite_dir: Path) -> None:
    """Under a derandomized profile (ci, mutation) seed each property from its file and
    function name (``@seed``, which Hypothesis lets override ``derandomize``). Derandomized,
    Hypothesis seeds a test from a digest of its *source*, so any edit of a property's body,
    even a renamed helper, drew other examples: a mutant's counterexample changed with it, and
    a property that found a fault on 5% of its inputs lost it. By name, the draws change only
    when the strategies, the profile or the Hypothesis release do (as with
    :func:`properties.profiles.ignore_local_constants`). Random profiles (dev, thorough,
    ``--hypothesis-seed``) are left alone, and so are tests outside the suite's folder."""
    if not settings.default.derandomize:
        return
    for item in items:
        function = getattr(item, "function", None)
        if getattr(function, "hypothesis", None) is None:
            continue  # not a Hypothesis test
        if not within(Path(item.path).resolve(), suite_dir):
            continue  # not the suite's (a project's own tests in the same run keep theirs)
        if getattr(function, "_hypothesis_internal_use_seed", None) is not None:
            continue  # seeded already (by its author, or a parametrization before)
        name = f"{function.__module__.rsplit('.', 1)[-1]}.{function.__qualname__}"
        seed(int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big"))(function)
