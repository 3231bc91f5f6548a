"""Reference attention in ball arithmetic (python-flint's ``arb``): the oracle for large cases.

The 50-digit oracle (:mod:`oracle.reference`) is the specification, a Python loop per score:
seconds at ``T = 256``. This backend computes the same formula (Vaswani et al. 2017, eq. 1)::

    s_j = scale * (query . key_j)  (-> c tanh(s_j / c))  (+ attn_mask_j)  (- slope |p - j|)
    w_j = exp(x_j) / (sum_k exp(x_k) (+ exp(sigma_h - s_m))),  x_j = s_j - s_m
                                       (m: a visible key of largest score; sigma_h: the sink)
    o   = sum_j w_j * value_j

in interval ("ball") arithmetic, where every number is a midpoint and a radius that provably
encloses the exact value (Johansson 2017, "Arb: efficient arbitrary-precision midpoint-radius
interval arithmetic", IEEE Trans. Computers 66(8)). The dot products and the weighted sums are
``arb_mat`` products, in C, over the key tiles a block of rows sees (:mod:`oracle.ball_tiles`);
a row's softmax (:mod:`oracle.ball_row`) runs once per visible score in Python.

Exactness. Binary64 (and float16/float32) inputs enter exactly. At the working precision
(:data:`PRECISION` bits to start) the dot products of binary64 numbers with exponents in the
usual range are exact (radius 0), and ``x_j = scale * (dot_j - dot_m) + (b_j - b_m)`` is an
exact 0 for a key tied with the maximum, so ``exp(x_j) == 1`` exactly, as in the 50-digit
oracle. Each returned float64 is the **correctly rounded** value of the exact result (round to
nearest, ties to even): it is returned only when both ends of its ball round to the same
float64. Where they do not, what is known exactly decides (a rational value's Fraction, the
side of its limit a saturated value lies on: :mod:`oracle.ball_rounding`); otherwise the whole
call is recomputed with twice the precision, up to :data:`MAX_PRECISION` bits, and a value
still unresolved then raises :class:`ReferenceUnresolvedError`, never a guess. The rulebook's
score-overflow rule is decided the same way (a ball straddling the dtype's maximum is
refined).

Rows. ``rows=`` computes only the listed query rows (every row by default), so a property can
check a kernel-sized call on the rows at its tile boundaries at a cost proportional to
``len(rows) * Tk``; the rules (shapes, dtypes, finiteness, masks, fully masked rows) are still
applied to the whole call by :func:`oracle.rules.check_attention_inputs`, and the overflow
rule to every row that could break it (a float64 bound on |s_j| decides which).

Checked against the 50-digit oracle, bit for bit, by ``oracle/tests/test_ball.py``.
"""

from __future__ import annotations

from typing import NamedTuple

import ml_dtypes
import numpy as np
from flint import arb
from flint import arb_mat
from flint import ctx

from attnprops.oracle import ball_tiles
from attnprops.oracle.ball_estimates import score_bound
from attnprops.oracle.ball_estimates import score_estimates
from attnprops.oracle.ball_groups import RowKeys
from attnprops.oracle.ball_groups import grouped_limit
from attnprops.oracle.ball_rounding import CappedRow
from attnprops.oracle.ball_rounding import Unresolved
from attnprops.oracle.ball_rounding import beside_mean
from attnprops.oracle.ball_rounding import capped_lse_parts
from attnprops.oracle.ball_rounding import exact_mean
from attnprops.oracle.ball_rounding import exact_score
from attnprops.oracle.ball_rounding import first_known
from attnprops.oracle.ball_rounding import just_above
from attnprops.oracle.ball_rounding import rational_scale
from attnprops.oracle.ball_rounding import to_float
from attnprops.oracle.ball_row import ZERO
from attnprops.oracle.ball_row import softmax_row
from attnprops.oracle.ball_tiles import Tiles
from attnprops.oracle.ball_tiles import matrix
from attnprops.oracle.ball_tiles import padded
from attnprops.oracle.rules import AttentionProblem
from attnprops.oracle.rules import check_attention_inputs
from attnprops.oracle.rules import check_flag
from attnprops.oracle.rules import compute_dtype
from attnprops.oracle.rules import overflow_threshold
from attnprops.oracle.rules import takes_options

PRECISION = 256  # bits to start with
MAX_PRECISION = 8192  # bits; past this an unresolved value raises

__all__ = [
    "MAX_PRECISION",
    "PRECISION",
    "BallParts",
    "BallResult",
    "ReferenceUnresolvedError",
    "attention",
    "attention_parts",
    "attention_weights",
]


class ReferenceUnresolvedError(ArithmeticError):
    """A value's ball still straddles a float64 rounding boundary at :data:`MAX_PRECISION`."""


class BallResult(NamedTuple):
    """``value``: float64 array, each element the exact result correctly rounded (the same
    attribute as :class:`oracle.OracleResult`, so :mod:`properties.bounds` reads either)."""

    value: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.shape


class BallParts(NamedTuple):
    """Scores (``-inf`` where hidden), weights and output of the query rows ``rows``:
    ``(B, Hq, len(rows), Tk)``, ``(B, Hq, len(rows), Tk)``, ``(B, Hq, len(rows), Dv)`` (2-D
    inputs: without the two leading axes); ``scores`` and ``weights`` are None when not asked
    for (``scores_and_weights=False``), ``output`` without a value. ``lse``: the
    rows' log-sum-exp over their visible keys, ``(B, Hq, len(rows))`` (as
    :class:`oracle.OracleParts`'s), when asked for (else None)."""

    scores: BallResult | None
    weights: BallResult | None
    output: BallResult | None
    rows: tuple[int, ...]
    lse: BallResult | None = None


def _rounded(x: arb, exact_of, *args) -> float:
    """:func:`to_float` of ``x``, with ``exact_of(*args)`` as its ``exact`` only when the
    ball's ends round apart (building it costs more than rounding most balls)."""
    try:
        return to_float(x)
    except Unresolved:
        return to_float(x, exact_of(*args))


def _output_exact(value: np.ndarray, c: int, tied, keys, nearly):
    """``exact`` for an output component ``c``: what is known exactly of its row (see
    :mod:`oracle.ball_rounding`)."""
    return first_known(
        exact_mean(value, tied, c), beside_mean(value, nearly, c), grouped_limit(value, keys, c)
    )


def _parts(
    problem: AttentionProblem,
    rows: tuple[int, ...],
    rows_out: tuple[int, ...],
    risky: np.ndarray,
    estimates: np.ndarray,
    want_lse: bool = False,
    want_scores: bool = True,
):
    """The balls of the computation at the current precision, correctly rounded to float64,
    for ``rows_out`` (``rows``: every row computed, ``rows_out`` plus the rows whose scores
    may overflow, ``risky[b, h, i]``); the scores and weights only when ``want_scores``
    (else they stay ``-inf`` and 0). Raises Unresolved to refine.

    The rows go in blocks of :data:`~oracle.ball_tiles.ROW_BLOCK`; a block multiplies only
    the key tiles (:data:`~oracle.ball_tiles.KEY_TILE` keys) that one of its rows sees, so a
    causal, windowed or packed call costs about its visible scores."""
    B, Hq, _, D = problem.query.shape
    Tk = problem.key.shape[2]
    Dv = 0 if problem.value is None else problem.value.shape[3]
    limit = arb(overflow_threshold(compute_dtype(problem.dtype)))  # exact
    scale = arb(D).rsqrt() if problem.scale is None else arb(problem.scale)
    slot = {i: k for k, i in enumerate(rows_out)}  # rows_out and rows are sorted
    scores = np.full((B, Hq, len(rows_out), Tk), -np.inf)
    weights = np.zeros((B, Hq, len(rows_out), Tk))
    output = np.zeros((B, Hq, len(rows_out), Dv))
    lse = np.full((B, Hq, len(rows_out)), -np.inf)
    rational = rational_scale(problem)
    # exp (and the weighted sum) at half the working precision: as rigorous, radii about
    # 2**-128 relative at the start (far inside float64's 2**-53), about 40% less time than
    # at 256 bits; exp(0) stays exactly 1. The last refinement: all of it.
    half = max(64, ctx.prec // 2) if ctx.prec < MAX_PRECISION else ctx.prec
    # fewer keys than a tile: one tile of just those (no zero keys to multiply)
    key_tile, row_block = min(ball_tiles.KEY_TILE, Tk), ball_tiles.ROW_BLOCK
    tiles = range(-(-Tk // key_tile))
    width = len(tiles) * key_tile  # the keys, padded to whole tiles
    for b in range(B):
        for g in range(problem.key.shape[1]):
            key_t = Tiles(problem.key[b, g], key_tile, transpose=True)  # (D, key_tile) each
            value = None if problem.value is None else problem.value[b, g]
            value_tiles = None if value is None else Tiles(value, key_tile)  # (key_tile, Dv)
            for h in range(g * problem.group, (g + 1) * problem.group):
                for start in range(0, len(rows), row_block):
                    block = list(rows[start : start + row_block])
                    seen = problem.visible[b, h, block].any(axis=0)  # (Tk,)
                    used = [t for t in tiles if seen[t * key_tile : (t + 1) * key_tile].any()]
                    if not used:  # only under fully_masked_rows="zeros": weights 0
                        continue
                    query = problem.query[b, h, block]
                    pad = padded(len(block), D, key_tile) - len(block)
                    query = matrix(np.pad(query, ((0, pad), (0, 0))))
                    dots = {t: (query * key_t[t]).entries() for t in used}  # exact
                    weight_rows = []
                    tied: dict[int, tuple] = {}  # row -> (visible keys, terms), all tied
                    nearly: dict[int, CappedRow] = {}  # rows tied but for saturated caps
                    keys: dict[int, RowKeys] = {}  # what ties each row's keys
                    for n, i in enumerate(block):
                        w_row = [ZERO] * width
                        weight_rows.append(w_row)
                        if not problem.visible[b, h, i].any():  # fully_masked_rows="zeros"
                            continue
                        d = [ZERO] * width  # the row's dot products, exact where visible
                        for t in used:
                            d[t * key_tile : (t + 1) * key_tile] = dots[t][
                                n * key_tile : (n + 1) * key_tile
                            ]
                        m = int(np.argmax(estimates[b, h, i]))
                        out_row = i in slot
                        row = softmax_row(
                            problem,
                            scale,
                            d,
                            (b, h, i),
                            m,
                            limit=limit,
                            check_overflow=bool(risky[b, h, i]),
                            want_scores=want_scores and out_row,
                            exp_precision=half,
                        )
                        visible, m = row.visible, row.m
                        for j, w_j in zip(visible, row.weights):
                            w_row[j] = w_j
                        if row.tied():
                            tied[i] = (visible, len(row.exps))  # the sink's 0 joins
                        no_sink = len(row.exps) == len(visible)
                        keys[i] = RowKeys(problem, d, visible, b, h, i, m, scale)
                        if i not in tied and problem.softcap is not None and no_sink:
                            if all(e.contains(1) for e in row.exps):  # tied but for caps?
                                nearly[i] = CappedRow(problem, scale, d, visible, m, b, h, i)
                        if out_row and want_scores:
                            k = slot[i]
                            scores[b, h, k, visible] = [  # exact balls (most) round at once
                                _rounded(t, exact_score, rational, d[j], (b, h, i, j), problem)
                                for t, j in zip(row.scores, visible)
                            ]
                            weights[b, h, k, visible] = [to_float(t) for t in row.weights]
                        if out_row and want_lse:
                            # s_m + log(sum_j exp(x_j)); one key: log(1) = 0, s_m exactly
                            exact_m = exact_score(rational, d[m], (b, h, i, m), problem)
                            lse[b, h, slot[i]] = to_float(
                                row.score_m + row.keys_total.log(),
                                exact_m
                                if len(visible) == 1
                                else just_above(
                                    exact_m, *capped_lse_parts(problem, scale, d[m], row)
                                ),
                            )
                    if value is None:
                        continue
                    rows_in = padded(len(block), key_tile, Dv)
                    weight_rows += [[ZERO] * width] * (rows_in - len(block))
                    out = None  # sum over the used tiles of (weights tile) (values tile)
                    with ctx.workprec(half):
                        for t in used:
                            lo, hi = t * key_tile, (t + 1) * key_tile
                            entries = [w for r in weight_rows for w in r[lo:hi]]
                            part = arb_mat(rows_in, key_tile, entries) * value_tiles[t]
                            out = part if out is None else out + part
                    out = out.entries()  # (len(block), Dv)
                    for n, i in enumerate(block):
                        if i not in slot:
                            continue
                        info = (tied.get(i), keys.get(i), nearly.get(i))
                        output[b, h, slot[i]] = [
                            _rounded(t, _output_exact, value, c, *info)
                            for c, t in enumerate(out[n * Dv : (n + 1) * Dv])
                        ]
    return scores, weights, output, lse


def _rows(rows, Tq: int) -> tuple[int, ...]:
    """``rows`` as sorted distinct ints in ``[0, Tq)``; ValueError for anything else (a
    float, a string, a bool, a bare int, a row out of range, an empty selection)."""
    if rows is None:
        return tuple(range(Tq))
    if isinstance(rows, (str, bytes)) or np.ndim(rows) != 1:
        raise ValueError(f"rows: a sequence of row indices (ints in [0, Tq={Tq})); got {rows!r}")
    picked = set()
    for i in rows:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise ValueError(f"rows: every row must be an int in [0, Tq={Tq}); got {i!r}")
        if not 0 <= i < Tq:
            raise ValueError(f"rows: every row must lie in [0, Tq={Tq}); got {int(i)}")
        picked.add(int(i))
    if not picked:
        raise ValueError("rows: empty; pass None for every row")
    return tuple(sorted(picked))


@takes_options
def attention_parts(
    query,
    key,
    value=None,
    *,
    fully_masked_rows="raise",
    rows=None,
    precision: int = PRECISION,
    lse: bool = False,
    scores_and_weights: bool = True,
    **options,
) -> BallParts:
    """Scores, weights and output of one attention call, each correctly rounded to float64.

    Args:
        query: ``(B, Hq, Tq, D)`` or ``(Tq, D)``; key ``(B, Hkv, Tk, D)`` or ``(Tk, D)``; value
            ``(B, Hkv, Tk, Dv)`` or ``(Tk, Dv)`` or None (then no output); float16, float32 or
            float64, one dtype. The keyword options of :mod:`oracle.rules.options`, and
            ``fully_masked_rows`` as in :func:`oracle.attention` (the rules of
            :mod:`oracle.rules`).
        rows: the local query rows to compute (a non-empty sequence of ints in ``[0, Tq)``,
            any order, repeats dropped); None for every row. Results keep the sorted order.
        precision: bits to start with (doubled until every value is resolved).
        lse: also compute the rows' log-sum-exp (off by default). A dominant key whose score
            is a float64 midpoint puts ``lse`` within ``exp(-gap)`` above that midpoint,
            which no precision short of the gap's resolves: rounded from above when the
            score is rational, and from the side of ``log1p(other terms) - c (1 - tanh
            a_m)`` around a capped score's limit (:func:`just_above`).
        scores_and_weights: a bool; False: the scores and weights are not rounded (their
            fields are None), which spares about a fifth of a call that wants only the
            output (ValueError without a value).

    Returns:
        :class:`BallParts` over the sorted rows.

    Raises:
        oracle.rules.AttentionInputError for a broken rule, as the 50-digit oracle (the
        score-overflow rule on every row that could break it); ValueError for a row out of
        range, not an int, or no row at all; ReferenceUnresolvedError (see the module
        docstring).
    """
    problem = check_attention_inputs(
        query,
        key,
        value,
        fully_masked_rows=fully_masked_rows,
        needs_value=value is not None,
        **options,
    )
    scores_and_weights = check_flag(scores_and_weights, "scores_and_weights")
    if not scores_and_weights and problem.value is None:
        raise ValueError("scores_and_weights=False leaves nothing to return without a value")
    wanted = _rows(rows, problem.query.shape[2])
    # The overflow rule is checked on every row whose float64 bound reaches half the
    # dtype's maximum: those rows are computed too (exactly), even when not asked for.
    limit = float(ml_dtypes.finfo(compute_dtype(problem.dtype)).max)
    risky = (~(score_bound(problem) <= 0.5 * limit) & problem.visible).any(axis=-1)
    computed = tuple(sorted(set(wanted) | set(np.flatnonzero(risky.any(axis=(0, 1))).tolist())))
    estimates = score_estimates(problem)
    bits = precision
    while True:
        try:
            with ctx.workprec(bits):
                s, w, o, sums = _parts(
                    problem, computed, wanted, risky, estimates, lse, scores_and_weights
                )
            break
        except Unresolved:
            if bits >= MAX_PRECISION:
                raise ReferenceUnresolvedError(
                    f"a value's ball straddles a float64 rounding boundary at {bits} bits"
                ) from None
            bits *= 2
    cut = (lambda x: BallResult(x[0, 0])) if problem.two_d else BallResult
    output = None if problem.value is None else cut(o)
    if not scores_and_weights:
        return BallParts(None, None, output, wanted, cut(sums) if lse else None)
    return BallParts(cut(s), cut(w), output, wanted, cut(sums) if lse else None)


@takes_options
def attention(
    query, key, value, *, fully_masked_rows="raise", rows=None, precision=PRECISION, **options
) -> np.ndarray:
    """The output ``(B, Hq, Tq, Dv)`` (or ``(Tq, Dv)``, of ``rows`` only when given), each
    element the exact attention output correctly rounded to float64. Arguments, rules and
    errors as :func:`attention_parts`."""
    return attention_parts(
        query,
        key,
        value,
        fully_masked_rows=fully_masked_rows,
        rows=rows,
        precision=precision,
        scores_and_weights=False,
        **options,
    ).output.value


@takes_options
def attention_weights(
    query, key, *, fully_masked_rows="raise", rows=None, precision=PRECISION, **options
) -> np.ndarray:
    """The weights ``(B, Hq, Tq, Tk)`` (or ``(Tq, Tk)``), correctly rounded to float64;
    hidden keys exactly 0. Arguments, rules and errors as :func:`attention_parts`."""
    return attention_parts(
        query,
        key,
        None,
        fully_masked_rows=fully_masked_rows,
        rows=rows,
        precision=precision,
        **options,
    ).weights.value
