"""Deliberately broken attention subjects: one module per mistake.

Each module is a complete subject (the API of :mod:`impl`: ``attention``,
``attention_weights``, ``KVCache``, ``cached_attention``, ``kv_cache_bytes``), reuses
:mod:`impl` everywhere except its one fault, and declares itself with a module-level
``MUTANT = Mutant(...)``. The property suite must kill every one of them, each by one of the
properties named in ``Mutant.killed_by`` (the reason it was built to show).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    """What a mutant breaks and which property must catch it.

    Attributes:
        name: the module name inside :mod:`mutants`.
        description: what is broken, in one sentence.
        models: the real-world mistake it models (where people make it).
        killed_by: names of the property test functions (``test_...``) expected to fail on it;
            a failure of any other property alone does not count as a kill.
    """

    name: str
    description: str
    models: str
    killed_by: tuple[str, ...]

    def __post_init__(self):
        if not self.description or not self.models or not self.killed_by:
            raise ValueError(
                f"mutant {self.name!r}: description, models and killed_by are required"
            )


def all_mutants() -> dict[str, Mutant]:
    """Every mutant in this package, by module name (sorted)."""
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        mutant = getattr(module, "MUTANT", None)
        if not isinstance(mutant, Mutant) or mutant.name != info.name:
            raise ValueError(f"mutants.{info.name}: MUTANT must be Mutant(name={info.name!r}, ...)")
        found[info.name] = mutant
    return found
