"""Strategies for invalid attention inputs, one per rule of the registry
:data:`oracle.violations.VIOLATIONS` (its attention rules; the cache rules are drawn by
``properties/test_kv_cache.py``).

Each draw is a valid :class:`~properties.strategies.AttentionCase` broken in exactly one way by
the rule's own break function, with Hypothesis making the break's choices (:class:`Draws`),
returned as an :class:`InvalidCase` naming the rule and the argument that breaks it. A new
rule is added to the registry only.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from hypothesis import strategies as st

from attnprops.oracle.violations import ATTENTION_RULES
from attnprops.oracle.violations import BY_RULE
from attnprops.oracle.violations import Call
from attnprops.oracle.violations import Pick
from attnprops.properties.strategies import AttentionCase
from attnprops.properties.strategies import attention_cases

# rule -> the argument its message names (what a good error message names)
INVALID_KINDS = {rule: BY_RULE[rule].argument for rule in ATTENTION_RULES}
FLOAT_MASK_CHOICES = frozenset({"float", "float mask"})  # break options that use a float mask


class Draws(Pick):
    """A break function's choices drawn by Hypothesis (``draw`` of ``st.composite``), each
    option of ``exclude`` left out (e.g. float masks for a subject without them); the answers
    given are kept in :attr:`answers`."""

    def __init__(self, draw, exclude=frozenset()):
        super().__init__()
        self._draw, self._exclude, self.answers = draw, exclude, []

    def choice(self, options):
        allowed = [o for o in options if not (isinstance(o, str) and o in self._exclude)]
        self.answers.append(self._draw(st.sampled_from(allowed or list(options))))
        return self.answers[-1]

    def integer(self, low, high):
        self.answers.append(self._draw(st.integers(low, high)))
        return self.answers[-1]


class InvalidCase(NamedTuple):
    """A call that breaks one rule: ``query``/``key``/``value`` and ``kwargs`` to pass."""

    query: np.ndarray
    key: np.ndarray
    value: np.ndarray
    kwargs: dict
    kind: str
    argument: str

    def describe(self) -> str:
        mask = self.kwargs.get("attn_mask")
        mask = None if mask is None else f"{mask.dtype} {mask.shape}"
        rest = {k: v for k, v in self.kwargs.items() if k != "attn_mask"}
        return (
            f"[{self.kind}] query {self.query.shape} {self.query.dtype} key {self.key.shape} "
            f"{self.key.dtype} value {self.value.shape} attn_mask {mask} {rest}"
        )


def _exclude(float_masks: bool) -> frozenset:
    return frozenset() if float_masks else FLOAT_MASK_CHOICES


@st.composite
def fully_masked_cases(
    draw, *, dtypes=("float64", "float32", "float16"), float_masks: bool = True
) -> AttentionCase:
    """A case (otherwise valid) in which at least one query row sees no key: the registry's
    ``"fully masked row"`` break (a bool or float mask row hidden completely, a key padding
    mask hiding every key of one batch element, or causality plus a mask hiding key 0 from
    the first query) applied to a drawn valid case."""
    case = draw(attention_cases(dtypes=dtypes, masks_allowed=False))
    pick = Draws(draw, _exclude(float_masks))
    call = BY_RULE["fully masked row"].breaks(
        Call(case.query, case.key, case.value, case.kwargs()), pick
    )
    how, kind = pick.answers[:2]
    return case._replace(
        attn_mask=call.kwargs["attn_mask"],
        is_causal=call.kwargs["is_causal"],
        query_start=call.kwargs["query_start"],
        mask_layout=f"fully masked ({how}, {kind})",
    )


@st.composite
def invalid_cases(
    draw,
    *,
    dtypes=("float64", "float32", "float16"),
    kinds=tuple(INVALID_KINDS),
    float_masks: bool = True,
) -> InvalidCase:
    """A call breaking exactly one rule; ``kinds`` restricts which rules are drawn. The
    valid call is 4-D, non-causal, without a mask, in a dtype the rule can be broken in."""
    kind = draw(st.sampled_from(kinds))
    violation = BY_RULE[kind]
    if kind == "fully masked row":
        case = draw(fully_masked_cases(dtypes=dtypes, float_masks=float_masks))
        return InvalidCase(
            case.query, case.key, case.value, case.kwargs(), kind, violation.argument
        )
    usable = tuple(d for d in dtypes if d in violation.dtypes) or ("float64",)
    case = draw(attention_cases(dtypes=usable, masks_allowed=False, causal=False))
    q, k, v = case.query, case.key, case.value
    if q.ndim == 2:
        q, k, v = q[None, None], k[None, None], v[None, None]
    call = Call(q, k, v, dict(attn_mask=None, is_causal=False, query_start=None, scale=None))
    broken = violation.breaks(call, Draws(draw, _exclude(float_masks)))
    return InvalidCase(
        broken.query, broken.key, broken.value, broken.kwargs, kind, violation.argument
    )
