"""One registry of rule violations: for each rule of :mod:`oracle.rules`, how an input breaks it.

Every entry of :data:`VIOLATIONS` is one rule: its name, the error class the rulebook
prescribes, the argument its message names first, and a *break* function that turns a valid
call into one that breaks exactly this rule. These readers use it, so a new rule is added here
and nowhere else:

- the rejection properties (:mod:`properties.invalid` for attention calls, the failed-append
  property of ``properties/test_kv_cache.py`` for the cache) break calls drawn by
  Hypothesis, with Hypothesis making the break's choices;
- impl's cache tests break appends to a filled cache with each append rule;
- the rejection property of the serving caches (``properties/test_ragged_cache.py``) breaks
  drawn ``attention_with_kvcache`` calls with :data:`KVCACHE_RULES`;
- the oracle's and impl's tests (``oracle/tests``, ``impl/tests``) run the fixed
  :func:`examples`: each entry's :attr:`Violation.examples` on the source lab's inputs
  (:mod:`oracle.lab`), the choices scripted;
- ``attnprops audit`` checks that impl and the oracle reject each fixed example with the same
  class and message.

A break function is ``breaks(call, pick) -> Call``. ``call`` is valid; the result differs
from it in exactly the broken rule. ``pick`` makes every choice (:class:`Pick`): which
element becomes NaN, which axis is cut, bool or float mask. Attention calls are 4-D or 2-D
(``query (B, Hq, Tq, D)`` or ``(Tq, D)``, ...); cache calls (``func="append"``) carry the
cache's ``(B, Hkv, Tnew, D)`` key and value and the cache's layout in ``kwargs``. Not in the
registry: ``block_size`` (impl's own option, :func:`rules.check_block_size`) and the oracle's
``fully_masked_rows`` (:data:`rules.FULLY_MASKED_ROW_CONVENTIONS`); their unit tests cover them.
"""

from __future__ import annotations

import numpy as np

from attnprops.oracle import lab
from attnprops.oracle.violations.attention import ATTENTION
from attnprops.oracle.violations.cache import APPEND
from attnprops.oracle.violations.cache import CACHE
from attnprops.oracle.violations.calls import Call
from attnprops.oracle.violations.calls import Example
from attnprops.oracle.violations.calls import FixedExample
from attnprops.oracle.violations.calls import Pick
from attnprops.oracle.violations.calls import Violation
from attnprops.oracle.violations.quantization import QUANTIZATION
from attnprops.oracle.violations.quantization import quantized_append_base
from attnprops.oracle.violations.serving import KVCACHE_RULES
from attnprops.oracle.violations.serving import SERVING
from attnprops.oracle.violations.serving import paged_append_base
from attnprops.oracle.violations.serving import ragged_base

VIOLATIONS: tuple[Violation, ...] = ATTENTION + CACHE + SERVING + QUANTIZATION
BY_RULE = {v.rule: v for v in VIOLATIONS}
ATTENTION_RULES = tuple(v.rule for v in ATTENTION)
CACHE_APPEND_RULES = tuple(v.rule for v in APPEND)
_EXAMPLES = {e.id: (v, e) for v in VIOLATIONS for e in v.examples}  # id -> violation, example
EXAMPLE_IDS = tuple(_EXAMPLES)


def base_call(base: str) -> Call:
    """The valid call an :class:`Example` breaks (see :attr:`Example.base`), fresh arrays."""
    if base in ("ragged", "paged"):
        return ragged_base(paged=base == "paged")
    if base == "paged-append":
        return paged_append_base()
    if base == "quantized-append":
        return quantized_append_base()
    q, k, v = lab.QUERY.copy(), lab.KEY.copy(), lab.VALUE.copy()
    if base == "2d-float32":
        return Call(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), {})
    if base == "2d":
        return Call(q, k, v, {})
    if base == "4d":
        return Call(np.stack([q, -q])[None], k[None, None], v[None, None], {})
    cache = dict(batch=1, num_kv_heads=1, head_dim=k.shape[-1], value_dim=v.shape[-1])
    return Call(None, k[None, None, :1], v[None, None, :1], {"cache": cache}, "append")


def example(example_id: str) -> FixedExample:
    """The fixed example ``example_id`` (one of :data:`EXAMPLE_IDS`), its call built afresh
    (so a caller may compare its arrays before and after); KeyError for an unknown id."""
    violation, fixed = _EXAMPLES[example_id]
    call = violation.breaks(base_call(fixed.base), Pick(fixed.answers))
    if fixed.func is not None:
        call = call._replace(
            func=fixed.func, value=None if fixed.func == "attention_weights" else call.value
        )
    return FixedExample(fixed.id, violation.rule, violation.error, violation.argument, call)


def examples() -> list[FixedExample]:
    """Every fixed example of every violation (:func:`example`), in registry order."""
    return [example(example_id) for example_id in EXAMPLE_IDS]


__all__ = [
    "ATTENTION_RULES",
    "BY_RULE",
    "CACHE_APPEND_RULES",
    "KVCACHE_RULES",
    "EXAMPLE_IDS",
    "VIOLATIONS",
    "Call",
    "Example",
    "FixedExample",
    "Pick",
    "Violation",
    "base_call",
    "example",
    "examples",
]
