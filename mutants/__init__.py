"""Deliberately broken attention subjects: one module per mistake.

Each module is a complete subject (the API of :mod:`impl`: ``attention``,
``attention_weights``, ``KVCache``, ``cached_attention``, ``kv_cache_bytes``, ``PagedKVCache``,
``RollingKVCache``, ``attention_with_kvcache``, ``QuantizedKVCache``), reuses
:mod:`impl` everywhere except its one fault, and declares itself with a module-level
``MUTANT = Mutant(...)``. The property suite must kill every one of them, each by one of the
properties named in ``Mutant.killed_by`` (the reason it was built to show).

One mechanism couples a mutant to impl: it subclasses :class:`impl.Attention` (the
computation as steps, one method each; or :class:`mutants._tiled.TiledKernel`, itself an
``impl.Attention``) and/or one of impl's caches, overrides the one step that holds its fault,
names the classes in its ``MUTANT`` record, and takes its public API from the record::

    MUTANT = Mutant(name=..., description=..., models=..., killed_by=(...), steps=_Steps)
    __all__ = MUTANT.export(globals())  # binds attention, ..., attention_with_kvcache
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from attnprops import impl


class API(NamedTuple):
    """A subject's public API, in the order a mutant module unpacks it."""

    attention: Callable
    attention_weights: Callable
    KVCache: type
    cached_attention: Callable
    kv_cache_bytes: Callable
    PagedKVCache: type
    RollingKVCache: type
    attention_with_kvcache: Callable
    QuantizedKVCache: type


@dataclass(frozen=True)
class Mutant:
    """What a mutant breaks and which property must catch it.

    Attributes:
        name: the module name inside :mod:`mutants`.
        description: what is broken, in one sentence.
        models: the real-world mistake it models (where people make it).
        killed_by: names of the property test functions (``test_...``) expected to fail on it;
            a failure of any other property alone does not count as a kill.
        steps: the :class:`impl.Attention` subclass that holds the fault (None: impl's).
        cache: the :class:`impl.KVCache` subclass that holds the fault (None: impl's).
        paged_cache: the :class:`impl.PagedKVCache` subclass that holds the fault (None:
            impl's).
        rolling_cache: the :class:`impl.RollingKVCache` subclass that holds the fault (None:
            impl's).
        kv_cache_bytes: the faulty ``kv_cache_bytes`` (None: impl's).
        quantized_cache: the :class:`impl.QuantizedKVCache` subclass that holds the fault
            (None: impl's).
    """

    name: str
    description: str
    models: str
    killed_by: tuple[str, ...]
    steps: type | None = None
    cache: type | None = None
    kv_cache_bytes: Callable | None = None
    paged_cache: type | None = None
    rolling_cache: type | None = None
    quantized_cache: type | None = None

    def api(self) -> API:
        """The mutant's public API: impl's, with the record's steps, caches and
        ``kv_cache_bytes`` in place of impl's (``cached_attention`` takes the mutant's cache
        class and calls the mutant's ``attention``)."""
        cache = self.cache or impl.KVCache
        steps = (self.steps or impl.Attention)(cache_type=cache)
        return API(
            steps.attention,
            steps.attention_weights,
            cache,
            steps.cached_attention,
            self.kv_cache_bytes or impl.kv_cache_bytes,
            self.paged_cache or impl.PagedKVCache,
            self.rolling_cache or impl.RollingKVCache,
            steps.attention_with_kvcache,
            self.quantized_cache or impl.QuantizedKVCache,
        )

    def export(self, namespace: dict) -> list[str]:
        """Bind :meth:`api`'s functions and classes in a mutant module's ``namespace`` (its
        ``globals()``) under the :class:`API` names, and return those names (its
        ``__all__``)."""
        api = self.api()
        namespace.update(api._asdict())
        return list(api._fields)

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
