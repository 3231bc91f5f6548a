"""Shared plumbing for the mutants: :mod:`impl`'s attention pipeline, cut into overridable steps.

:class:`Pipeline` computes exactly what :func:`impl.attention` / :func:`impl.attention_weights`
compute on their dense path (``block_size="dense"``; impl's default ``block_size=None`` takes it
too for calls with ``Tk <= 128`` or fewer than ``2**15`` scores, every call the property suite
draws among them): the same NumPy operations in the same order, so its results are bitwise
equal to impl's; ``python -m attnprops.mutants._common`` checks this against ``block_size="dense"``, and
must be rerun when impl's dense path changes. It is a copy of impl's steps rather than calls into
impl's private helpers so that the mutants do not break when impl reorganizes its internals.
A mutant subclasses it, overrides the ONE step that holds its fault, and exposes the bound
methods as its ``attention`` / ``attention_weights`` (dense only: no ``block_size`` keyword, and
no ``ATTNPROPS_CAPABILITIES``, so the suite skips the blocked-path properties for them)::

    validate        -> oracle.rules.check_attention_inputs (every input rule)
    default_scale   -> 1/sqrt(D) when scale is None
    scaled_query    -> query * scale (impl scales the query before the product)
    key_transposed  -> key with its last two axes swapped
    scores          -> scaled query @ key^T + float mask, (B, Hq, Tq, Tk), GQA by grouping
    hide            -> -inf where a key is not visible
    softmax         -> impl's max-subtracted softmax over keys
    probabilities   -> softmax(hide(scores))
    weighted_values -> weights @ value, (B, Hq, Tq, Dv)

:func:`rebind` makes a copy of one of impl's functions whose global names (e.g. ``attention``)
point at the mutant's versions, so a mutant reuses impl's ``cached_attention`` code verbatim.
Nothing here is a mutant (the module name starts with ``_``).
"""

from __future__ import annotations

import dataclasses
import types

import numpy as np

from attnprops.oracle.rules import (
    AttentionProblem,
    check_attention_inputs,
    compute_dtype,
    raise_score_overflow,
)

__all__ = ["Pipeline", "causal_positions", "rebind", "replace_visible"]


def rebind(function: types.FunctionType, **names) -> types.FunctionType:
    """A copy of ``function`` whose module globals ``names`` are replaced (the code is shared).

    ``rebind(impl.kv_cache.cached_attention, attention=mutant_attention)`` is impl's
    ``cached_attention``, line for line, calling the mutant's ``attention``.
    """
    namespace = dict(function.__globals__)
    namespace.update(names)
    copy = types.FunctionType(
        function.__code__,
        namespace,
        function.__name__,
        function.__defaults__,
        function.__closure__,
    )
    copy.__kwdefaults__ = dict(function.__kwdefaults__ or {})
    copy.__doc__ = function.__doc__
    copy.__qualname__ = function.__qualname__
    return copy


def causal_positions(problem: AttentionProblem) -> tuple[np.ndarray, np.ndarray]:
    """Local query index ``i`` ``(Tq, 1)`` and key position ``j`` ``(1, Tk)`` of ``problem``."""
    Tq, Tk = problem.query.shape[2], problem.key.shape[2]
    return np.arange(Tq)[:, None], np.arange(Tk)[None, :]


def replace_visible(problem: AttentionProblem, visible: np.ndarray) -> AttentionProblem:
    """``problem`` with another visibility (broadcast to ``(B, Hq, Tq, Tk)``, read-only)."""
    target = problem.query.shape[:3] + (problem.key.shape[2],)
    visible = np.array(np.broadcast_to(visible, target), dtype=bool)
    visible.setflags(write=False)
    return dataclasses.replace(problem, visible=visible)


class Pipeline:
    """impl's attention, one method per step (see the module docstring)."""

    # -- validation -------------------------------------------------------------------------
    def validate(
        self, query, key, value, needs_value: bool, options: dict, fully_masked_rows: str = "raise"
    ) -> AttentionProblem:
        """Apply the rulebook. ``options``: attn_mask, is_causal, query_start, scale."""
        return check_attention_inputs(
            query,
            key,
            value,
            needs_value=needs_value,
            fully_masked_rows=fully_masked_rows,
            **options,
        )

    def mask_visibility(self, query, key, value, needs_value: bool, options: dict) -> np.ndarray:
        """Visibility from ``attn_mask`` alone (no causality), ``(B, Hq, Tq, Tk)``."""
        return self.validate(
            query,
            key,
            value,
            needs_value,
            {**options, "is_causal": False},
            fully_masked_rows="zeros",
        ).visible

    # -- scores -----------------------------------------------------------------------------
    def default_scale(self, problem: AttentionProblem):
        return 1.0 / np.sqrt(problem.head_dim)

    def scaled_query(self, problem: AttentionProblem, compute: np.dtype, scale) -> np.ndarray:
        """``query * scale`` ``(B, Hq, Tq, D)`` in the compute dtype (impl scales before the
        product so that a dot product only the scale brings into range does not overflow)."""
        return problem.query.astype(compute, copy=False) * compute.type(scale)

    def key_transposed(self, problem: AttentionProblem, compute: np.dtype) -> np.ndarray:
        """``key^T`` ``(B, Hkv, 1, D, Tk)``: the last two axes swapped, a group axis added."""
        return problem.key.astype(compute, copy=False)[:, :, None].swapaxes(-1, -2)

    def scores(self, problem: AttentionProblem) -> np.ndarray:
        """Scaled scores plus float mask ``(B, Hq, Tq, Tk)``, hidden keys NOT yet set to -inf.

        Query head h reads K/V head h // G (the query heads are grouped by a reshape). Raises
        ScoreOverflowError when a visible score is not finite, as impl does.
        """
        compute = compute_dtype(problem.dtype)
        B, Hq, Tq, D = problem.query.shape
        Hkv, Tk, G = problem.num_kv_heads, problem.key.shape[2], problem.group
        scale = self.default_scale(problem) if problem.scale is None else problem.scale
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            query = self.scaled_query(problem, compute, scale).reshape(B, Hkv, G, Tq, D)
            scores = np.matmul(query, self.key_transposed(problem, compute)).reshape(B, Hq, Tq, Tk)
            if problem.bias is not None:
                scores = scores + problem.bias.astype(compute, copy=False)
        if not np.isfinite(scores[problem.visible]).all():
            raise_score_overflow(problem)
        return scores

    # -- weights ----------------------------------------------------------------------------
    def hide(self, scores: np.ndarray, visible: np.ndarray, compute: np.dtype) -> np.ndarray:
        return np.where(visible, scores, compute.type(-np.inf))

    def softmax(self, scores: np.ndarray, visible: np.ndarray) -> np.ndarray:
        """Softmax over the keys, max subtracted, rows with no visible key 0 (impl's dense
        path does the same in place)."""
        has_key = visible.any(axis=-1, keepdims=True)  # (B, Hq, Tq, 1)
        row_max = np.where(has_key, scores.max(axis=-1, keepdims=True), 0)
        with np.errstate(invalid="ignore"):
            exp = np.exp(scores - row_max)  # exp(-inf) == 0 for hidden keys
        total = exp.sum(axis=-1, keepdims=True)
        return exp / np.where(has_key, total, 1)

    def probabilities(
        self, scores: np.ndarray, visible: np.ndarray, compute: np.dtype
    ) -> np.ndarray:
        return self.softmax(self.hide(scores, visible, compute), visible)

    def weighted_values(
        self, weights: np.ndarray, problem: AttentionProblem, compute: np.dtype
    ) -> np.ndarray:
        """``weights @ value`` ``(B, Hq, Tq, Dv)`` in the compute dtype."""
        B, Hq, Tq, _ = problem.query.shape
        Hkv, G, Dv = problem.num_kv_heads, problem.group, problem.value.shape[3]
        grouped = weights.reshape(B, Hkv, G, Tq, -1)  # (B, Hkv, G, Tq, Tk)
        value = problem.value.astype(compute, copy=False)[:, :, None]  # (B, Hkv, 1, Tk, Dv)
        return np.matmul(grouped, value).reshape(B, Hq, Tq, Dv)

    # -- the public API ---------------------------------------------------------------------
    def attention_weights(
        self, query, key, *, attn_mask=None, is_causal=False, query_start=None, scale=None
    ):
        """Like :func:`impl.attention_weights`, with this pipeline's steps."""
        options = dict(
            attn_mask=attn_mask, is_causal=is_causal, query_start=query_start, scale=scale
        )
        problem = self.validate(query, key, None, False, options)
        compute = compute_dtype(problem.dtype)
        weights = self.probabilities(self.scores(problem), problem.visible, compute)
        weights = weights.astype(problem.dtype)
        return weights[0, 0] if problem.two_d else weights

    def attention(
        self, query, key, value, *, attn_mask=None, is_causal=False, query_start=None, scale=None
    ):
        """Like :func:`impl.attention`, with this pipeline's steps."""
        options = dict(
            attn_mask=attn_mask, is_causal=is_causal, query_start=query_start, scale=scale
        )
        problem = self.validate(query, key, value, True, options)
        compute = compute_dtype(problem.dtype)
        weights = self.probabilities(self.scores(problem), problem.visible, compute)
        output = self.weighted_values(weights, problem, compute).astype(problem.dtype)
        return output[0, 0] if problem.two_d else output


def _self_check(trials: int = 200) -> None:
    """The unmodified Pipeline is bitwise equal to impl's dense path (``block_size="dense"``
    for attention; attention_weights has only that path) on random valid inputs."""
    from attnprops import impl

    rng = np.random.default_rng(0)
    base = Pipeline()
    for n in range(trials):
        dtype = (np.float16, np.float32, np.float64)[n % 3]
        B, Hkv = rng.integers(1, 3, size=2)
        G, Tq, D, Dv = rng.integers(1, 4, size=4)
        Tk = Tq + rng.integers(0, 3)
        Hq = Hkv * G
        q = rng.normal(size=(B, Hq, Tq, D)).astype(dtype)
        k = rng.normal(size=(B, Hkv, Tk, D)).astype(dtype)
        v = rng.normal(size=(B, Hkv, Tk, Dv)).astype(dtype)
        mask = None
        if n % 4 == 1:
            mask = rng.normal(size=(Tq, Tk))
        elif n % 4 == 2:
            mask = rng.random((B, 1, 1, Tk)) < 0.7
            mask[..., -1] = True
        kw = dict(attn_mask=mask, is_causal=bool(n % 2), scale=None if n % 5 else 0.3)
        for name, args, path in (
            ("attention", (q, k, v), {"block_size": "dense"}),
            ("attention_weights", (q, k), {}),
        ):
            want = getattr(impl, name)(*args, **kw, **path)
            got = getattr(base, name)(*args, **kw)
            if want.dtype != got.dtype or not np.array_equal(want, got):
                raise AssertionError(f"Pipeline.{name} differs from impl on trial {n}")
    print(f"Pipeline == impl's dense path (bitwise) on {trials} random problems")


if __name__ == "__main__":
    _self_check()
