"""The pieces of the rule-violation registry (:mod:`oracle.violations`): a call, the choices
of a break function, a fixed example, a violation; and the helpers the break functions share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from typing import Callable
from typing import NamedTuple
from typing import Sequence

import numpy as np


class Call(NamedTuple):
    """One call of a subject: ``func`` is ``"attention"`` or ``"attention_weights"`` (with
    ``query``, ``key``, ``value``; ``value`` ``None`` for the weights), ``"append"``
    (``KVCache(**kwargs["cache"]).append(key, value)``), ``"cached_attention"`` (``query``,
    ``key``, ``value`` into an empty ``KVCache(**kwargs["cache"])``), ``"KVCache"``
    (``KVCache(**kwargs)``), ``"kv_cache_bytes"`` (``kv_cache_bytes(**kwargs)``) or a
    serving cache's call (:mod:`oracle.violations.serving`): ``"attention_with_kvcache"``
    (``key``/``value`` the storage, ``kwargs["cache_seqlens"]``), ``"paged_append"``,
    ``"rolling_attention"``, and ``"quantized_append"`` (:mod:`oracle.violations.quantization`)."""

    query: np.ndarray | None
    key: np.ndarray | None
    value: np.ndarray | None
    kwargs: dict
    func: str = "attention"

    def run(self, module):
        """Make the call on ``module`` (:mod:`impl`, :mod:`oracle` or a subject module)."""
        kwargs = dict(self.kwargs)
        if self.func == "attention":
            return module.attention(self.query, self.key, self.value, **kwargs)
        if self.func == "attention_weights":
            return module.attention_weights(self.query, self.key, **kwargs)
        if self.func == "append":
            return module.KVCache(**kwargs.pop("cache")).append(self.key, self.value)
        if self.func == "cached_attention":
            cache = module.KVCache(**kwargs.pop("cache"))
            return module.cached_attention(self.query, self.key, self.value, cache, **kwargs)
        if self.func == "KVCache":
            return module.KVCache(**kwargs)
        if self.func == "attention_with_kvcache":
            lengths = kwargs.pop("cache_seqlens")
            return module.attention_with_kvcache(
                self.query, self.key, self.value, lengths, **kwargs
            )
        if self.func == "paged_append":
            cache = module.PagedKVCache(**kwargs.pop("cache"))
            seqs = [cache.add_sequence() for _ in range(self.key.shape[0])]
            return cache.append(kwargs.pop("seqs", seqs), self.key, self.value)
        if self.func == "quantized_append":
            cache = module.QuantizedKVCache(**kwargs.pop("cache"))
            return cache.append(self.key, self.value)
        if self.func == "rolling_attention":
            cache = module.RollingKVCache(**kwargs.pop("cache"))
            return module.cached_attention(self.query, self.key, self.value, cache, **kwargs)
        return module.kv_cache_bytes(**kwargs)

    def arrays(self) -> dict[str, np.ndarray]:
        """The call's arrays by argument name (``attn_mask`` included when given)."""
        named = {
            "query": self.query,
            "key": self.key,
            "value": self.value,
            "attn_mask": self.kwargs.get("attn_mask"),
        }
        return {k: v for k, v in named.items() if isinstance(v, np.ndarray)}


class Pick:
    """The choices of a break function. This one answers from a script (``answers``, in the
    order the break asks), then with the first option / the lowest integer; the rejection
    property passes one that asks Hypothesis instead (:mod:`properties.invalid`)."""

    def __init__(self, answers: Sequence = ()):
        self._answers = list(answers)

    def choice(self, options: Sequence) -> Any:
        """One of ``options``."""
        return self._answers.pop(0) if self._answers else options[0]

    def integer(self, low: int, high: int) -> int:
        """An integer in ``[low, high]``."""
        return self._answers.pop(0) if self._answers else low


@dataclass(frozen=True)
class Example:
    """A fixed instance of a violation: the break applied to the ``base`` call (``"2d"``:
    the lab's ``(3, 4)``, ``(3, 4)``, ``(3, 2)`` float64 tensors; ``"2d-float32"``: the same
    in float32; ``"4d"``: two query heads on one K/V head, ``(1, 2, 3, 4)``, ``(1, 1, 3, 4)``,
    ``(1, 1, 3, 2)``; ``"cache"``: a one-token append to an empty ``KVCache(1, 1, 4, 2)``;
    ``"ragged"``, ``"paged"``, ``"paged-append"``: the serving calls of
    :mod:`oracle.violations.serving`) with scripted ``answers``, as ``func``."""

    id: str
    base: str = "2d"
    answers: tuple = ()
    func: str | None = None  # None: the base's own (attention, or append for "cache")


@dataclass(frozen=True)
class Violation:
    """One rule: ``rule`` (its name), ``error`` (the exact class raised), ``argument`` (the
    argument the message names first), ``breaks`` (see the module doc), ``examples`` (the
    fixed instances), ``dtypes`` (the float dtypes in which it can be broken at all) and
    ``needs``: the subject capabilities (:mod:`properties.subject`) the broken argument
    needs, as ``(name, value)`` pairs (the window rules: ``("window", "offsets")``, the
    convention whose ``window=`` argument they break)."""

    rule: str
    error: type
    argument: str
    breaks: Callable[[Call, Pick], Call]
    examples: tuple[Example, ...]
    dtypes: tuple[str, ...] = ("float16", "float32", "float64")
    needs: tuple[tuple[str, object], ...] = ()  # (capability, declared value) a subject needs


class FixedExample(NamedTuple):
    """:func:`examples`' items: the violation's rule, error and argument, the example's id
    and the call."""

    id: str
    rule: str
    error: type
    argument: str
    call: Call


def changed(call: Call, **changes) -> Call:
    """``call`` with arrays replaced and ``kwargs`` entries (``kw_NAME=...``) set."""
    kwargs = dict(call.kwargs)
    for name in [n for n in changes if n.startswith("kw_")]:
        kwargs[name[3:]] = changes.pop(name)
    return call._replace(kwargs=kwargs, **changes)


def one_cell(array: np.ndarray, pick: Pick, x) -> np.ndarray:
    """A copy of ``array`` with one element, chosen by ``pick``, set to ``x``."""
    out = np.array(array, copy=True)
    out[tuple(pick.integer(0, n - 1) for n in out.shape)] = x
    return out


def other_float(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if np.dtype(dtype) == np.float64 else np.dtype(np.float64)


def score_shape(call: Call) -> tuple[int, ...]:
    """The shape of the scores, ``(B, Hq, Tq, Tk)`` or ``(Tq, Tk)``."""
    return call.query.shape[:-1] + (call.key.shape[-2],)


def lengths(call: Call) -> tuple[int, int]:
    return call.query.shape[-2], call.key.shape[-2]


def doubled_batch(a):
    return np.concatenate([a, a], axis=0)


def nonfinite(name):
    def breaks(call, pick):
        bad = pick.choice([np.nan, np.inf, -np.inf])
        return changed(call, **{name: one_cell(getattr(call, name), pick, bad)})

    return breaks
