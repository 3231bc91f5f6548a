"""What a row's groups of exactly tied scores decide about the rounding of its output
(for :mod:`oracle.ball`, through :func:`oracle.ball_rounding.to_float`).

Keys whose scores are equal share one weight; a sink (logit ``sigma``) is a key of value 0.
With the row's terms in groups ``g`` of ``n_g`` equal scores ``S_g``, values summing to
``V_g`` (component ``c``; exact rationals), and ``x_g = S_g - S_m`` (``m``: the row's largest
score, estimated), the output is ``sum_g e^{x_g} V_g / sum_g e^{x_g} n_g``. For any set ``N``
of groups and ``L = sum_N V_g / sum_N n_g`` (a rational),

    output - L = (sum_{g in N} (e^{x_g} - 1) P_g + sum_{g not in N} e^{x_g} P_g) / sum_g e^{x_g} n_g,

``P_g = V_g - n_g L`` (exact; ``sum_N P_g = 0``). So the output is exactly ``L`` when every
``P_g`` is 0, and otherwise lies on the side of ``L`` of the numerator's sign, which a ball
decides even when the output is closer to ``L`` than any precision resolves: ``N`` is the
groups nearly tied with ``m`` (``|x_g| < 2**-64``), each ``e^{x_g} - 1`` and ``e^{x_g}`` taken
to relative accuracy from exact differences (a capped score's ``c (tanh a - tanh a') =
c sinh(a - a') / (cosh a cosh a')``, no cancellation). Examples: keys ``0, 75, 75, 75, 75``
against query 76 leave key 0 a weight of ``e^{-5700}`` beside a group whose values' mean is
a float64 midpoint; a sink tied with one group whose mean equals the other's gives that mean
exactly.

Which scores are equal, exactly (``scale``, ``c`` and the dot products ``d`` are algebraic,
so ``e^{x}`` and ``tanh x`` are transcendental for algebraic ``x != 0``, Lindemann-Weierstrass):
a score is rational when its dot product is 0 (``b_j``, the added terms,
:func:`~oracle.ball_rounding.added_terms`) or, uncapped, when the scale is rational
(``scale d_j + b_j``); these compare as rationals (a mask that cancels a dot product's
difference ties two keys). Any other score is irrational and equals another only with the
same dot product and the same added terms: ``scale (d - d') = b' - b`` would make the scale
rational, and ``c (tanh(t) - tanh(t p / q)) = b' - b`` (``t = scale d / c``, ``d' / d = p /
q`` rational) holds for no transcendental ``e^{2 t / q}`` unless ``p = q``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

import numpy as np
from flint import arb

from attnprops.oracle.ball_rounding import OneSided
from attnprops.oracle.ball_rounding import added_terms
from attnprops.oracle.ball_rounding import exact_ball
from attnprops.oracle.ball_rounding import fraction
from attnprops.oracle.ball_rounding import rational_scale
from attnprops.oracle.ball_rounding import rational_score
from attnprops.oracle.rules import AttentionProblem
from attnprops.oracle.rules import sink_at

__all__ = ["RowKeys", "grouped_limit"]

NEARLY_TIED = arb(2) ** -64  # |x_g| below this: g joins the groups whose mean is the limit


class RowKeys(NamedTuple):
    """What the scores of a row's visible keys are, exactly (see the module doc): its exact
    dot products ``dots`` (balls), the key ``m`` of its largest score (estimated) and the
    scale as a ball."""

    problem: AttentionProblem
    dots: list
    visible: list
    b: int
    h: int
    i: int
    m: int
    scale: arb

    @property
    def sink(self) -> float:
        """The row's sink logit (``-inf``: none)."""
        return sink_at(self.problem.sinks, self.h)

    def _added(self, j: int) -> Fraction:
        return added_terms(self.problem, self.b, self.h, self.i, j)

    def score_key(self, j: int) -> tuple | None:
        """Equal for two keys exactly when their scores are equal: ``("rational", S_j)`` or
        ``("irrational", d_j, b_j)``; None while ``d_j``'s ball is not exact."""
        if not self.dots[j].is_exact():
            return None
        dot, added = fraction(self.dots[j]), self._added(j)
        capped = self.problem.softcap is not None
        score = rational_score(rational_scale(self.problem), dot, added, capped)
        return ("irrational", dot, added) if score is None else ("rational", score)

    def _capped(self, dot: arb) -> arb:
        """The capped (or plain) scaled dot product ``c tanh(scale d / c)`` as a ball."""
        if self.problem.softcap is None:
            return self.scale * dot
        cap = arb(self.problem.softcap)
        return cap * (self.scale * dot / cap).tanh()

    def shift(self, j: int | None, key_j: tuple, key_m: tuple) -> arb:
        """``x = S_j - S_m`` (``j`` None: the sink's ``sigma - S_m``) as a ball, given the
        two scores' :meth:`score_key`: exact when both scores are rational, else from exact
        differences (see the module doc)."""
        if key_j[0] == key_m[0] == "rational":
            return exact_ball(key_j[1] - key_m[1])
        d_m = self.dots[self.m]
        if j is None:
            return exact_ball(Fraction(self.sink) - self._added(self.m)) - self._capped(d_m)
        added = exact_ball(self._added(j) - self._added(self.m))
        step = self.scale * exact_ball(fraction(self.dots[j]) - fraction(d_m))
        if self.problem.softcap is None:
            return step + added
        cap = arb(self.problem.softcap)
        a_j, a_m = self.scale * self.dots[j] / cap, self.scale * d_m / cap
        return cap * (step / cap).sinh() / (a_j.cosh() * a_m.cosh()) + added


def grouped_limit(value: np.ndarray, row: RowKeys | None, c: int):
    """``exact`` for :func:`~oracle.ball_rounding.to_float` of output component ``c`` of the
    row ``row`` (None: no row): the rational limit ``L`` (module doc) when the output equals
    it, :class:`~oracle.ball_rounding.OneSided` at ``L`` when the numerator's ball has a
    sign, None otherwise (or while a dot product's ball is not exact)."""
    if row is None:
        return None

    def exact():
        groups: dict[tuple, list] = {}  # score key -> [a key of the group, V_g, n_g]
        for j in row.visible:
            key = row.score_key(j)
            if key is None:
                return None
            group = groups.setdefault(key, [j, Fraction(0), 0])
            group[1] += Fraction(float(value[j, c]))
            group[2] += 1
        if row.sink != -np.inf:  # a key of value 0
            groups.setdefault(("rational", Fraction(row.sink)), [None, Fraction(0), 0])[2] += 1
        key_m = row.score_key(row.m)
        shifts = {key: row.shift(g[0], key, key_m) for key, g in groups.items()}
        near = [key for key, x in shifts.items() if abs(x) < NEARLY_TIED]
        if not near:
            return None
        limit = sum(groups[k][1] for k in near) / sum(groups[k][2] for k in near)
        pulls = {key: g[1] - g[2] * limit for key, g in groups.items()}
        if not any(pulls.values()):
            return limit
        lean = arb(0)
        for key, pull in pulls.items():
            if pull:
                x = shifts[key]
                lean += (x.expm1() if key in near else x.exp()) * exact_ball(pull)
        if lean > 0 or lean < 0:
            return OneSided(limit, 1 if lean > 0 else -1)
        return None

    return exact
