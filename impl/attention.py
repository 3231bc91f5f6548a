"""Vectorized NumPy scaled dot-product attention (the project's default subject).

Formula (Vaswani et al. 2017, "Attention Is All You Need", eq. 1)::

    scores  = scale * query @ key^T  (+ float attn_mask)       # (B, Hq, Tq, Tk)
    weights = softmax(scores masked to -inf, axis=keys)        # (B, Hq, Tq, Tk)
    output  = weights @ value                                  # (B, Hq, Tq, Dv)

Shape legend: B batch, Hq query heads, Hkv key/value heads, G = Hq // Hkv, Tq query
positions, Tk key positions, D head_dim, Dv value head dim. Query head ``h`` reads K/V head
``h // G``; K/V are never repeated to Hq (the query heads are grouped by a reshape instead).
The softmax subtracts the row maximum of the visible scores (no overflow in ``exp``) and masked
keys get weight exactly 0. float16 and bfloat16 inputs are computed in float32 and the result
is rounded back to the input dtype (:func:`oracle.rules.compute_dtype`). Every rule on inputs is in :mod:`oracle.rules`; this module applies it.

:class:`Attention` is the computation as *steps*, one method each, so that a variant (each
mutant in :mod:`mutants`) subclasses it and overrides exactly one step; :data:`ATTENTION` is
the instance behind the public functions. Its parts, one module each:

- :mod:`impl.scores`: scaling, masking and the fully-masked-row rule, shared by both paths;
- :mod:`impl.dense` (``block_size="dense"``): the whole ``(B, Hq, Tq, Tk)`` score array,
  bitwise the straightforward formula;
- :mod:`impl.blocked` (``block_size=n``): tiles with an online softmax (Milakov & Gimelshein
  2018; Dao et al. 2022), peak extra memory O(B Hq n (n + Dv));
- :mod:`impl.default_path`: which path ``block_size=None`` takes, by size, and the
  measurements behind it;
- :mod:`impl.kv_cache`: the KV cache and attention over it (also over
  :mod:`impl.rolling_cache`'s rolling cache);
- :mod:`impl.serving`: attention over ragged and paged caches (:mod:`impl.paged_cache`).

Validation does not build a ``(B, Hq, Tq, Tk)`` visibility array either: every rule but one
is :func:`oracle.rules.check_attention_call` (the rulebook's array-free checks, shared with
:func:`oracle.rules.check_attention_inputs`), and the "fully masked row" rule is checked one
key block at a time (:meth:`impl.scores.Scores.check_rows`; ``impl/tests/test_blocked.py``
checks that both paths raise what the rulebook raises).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from attnprops.impl.blocked import BlockedPath
from attnprops.impl.default_path import DENSE
from attnprops.impl.default_path import default_block_size
from attnprops.impl.dense import DensePath
from attnprops.impl.kv_cache import CachedAttention
from attnprops.impl.kv_cache import KVCache
from attnprops.impl.scores import Scores
from attnprops.impl.serving import ServingAttention
from attnprops.oracle.rules import AttentionCall
from attnprops.oracle.rules import AttentionInputError
from attnprops.oracle.rules import check_attention_call
from attnprops.oracle.rules import check_block_size
from attnprops.oracle.rules import check_flag
from attnprops.oracle.rules import check_float_array
from attnprops.oracle.rules import compute_dtype
from attnprops.oracle.rules import takes_options

__all__ = [
    "ATTENTION",
    "Attention",
    "attention",
    "attention_weights",
    "attention_with_kvcache",
    "cached_attention",
]


class Attention(Scores, DensePath, BlockedPath, CachedAttention, ServingAttention):
    """impl's attention, one method per step (module docstring); the public API is
    :meth:`attention`, :meth:`attention_weights`, :meth:`cached_attention` and
    :meth:`attention_with_kvcache`.

    A variant overrides one step and exposes its instance's bound methods (every mutant in
    :mod:`mutants` does, through its ``MUTANT.api()``)::

        class Unscaled(Attention):
            def default_scale(self, call):
                return 1.0  # scale=None means 1 instead of 1/sqrt(D)

        steps = Unscaled()
        attention, attention_weights = steps.attention, steps.attention_weights

    Steps call each other through ``self``, so the override reaches every path that takes the
    step (here both the dense and the blocked path). The steps are the methods below and those
    of :class:`impl.scores.Scores`, :class:`impl.dense.DensePath`,
    :class:`impl.blocked.BlockedPath`, :class:`impl.kv_cache.CachedAttention` and
    :class:`impl.serving.ServingAttention`; their
    arguments are the validated call (:class:`oracle.rules.AttentionCall`) and the compute
    dtype.

    Args:
        cache_type: the KV cache class :meth:`cached_attention` accepts, a subclass of
            :class:`impl.KVCache` (default: that class).

    Raises:
        oracle.rules.AttentionInputError: ``cache_type`` is not such a class.
    """

    def __init__(self, cache_type: type | None = None):
        if cache_type is not None:
            if not (isinstance(cache_type, type) and issubclass(cache_type, KVCache)):
                raise AttentionInputError(
                    f"cache_type: {cache_type!r} is not a subclass of impl.KVCache "
                    "(cached_attention appends to it and rolls it back)"
                )
            self.cache_type = cache_type

    # -- validation -----------------------------------------------------------------------
    def validate(
        self, query, key, value, options: dict, *, needs_value: bool = True, scan: bool = True
    ) -> AttentionCall:
        """Every rule but the fully-masked-row rule (:func:`oracle.rules.check_attention_call`;
        ``options``: attn_mask, is_causal, query_start, scale, window, segment_ids,
        chunk_size, alibi_slopes, softcap, sinks). ``scan=False``: query, key
        and value are not scanned for NaN/infinity (the paths call :meth:`check_finite`)."""
        return check_attention_call(
            query, key, value, **options, needs_value=needs_value, scan=scan
        )

    def check_finite(self, array: np.ndarray, name: str) -> None:
        """The rulebook's finiteness rule on one array (NonFiniteInputError naming it)."""
        check_float_array(array, name)

    # -- the output -----------------------------------------------------------------------
    def output(
        self,
        call: AttentionCall,
        compute: np.dtype,
        block_size: int | None,
        lse: np.ndarray | None = None,
    ) -> np.ndarray:
        """``(B, Hq, Tq, Dv)`` in the compute dtype: the dense path for ``block_size=None``,
        else the blocked path with tiles of ``block_size``; each fills ``lse`` (``(B, Hq,
        Tq)``, the compute dtype) with the rows' log-sum-exp when given."""
        if block_size is None:
            return self.dense_output(call, compute, lse)
        return self.blocked_output(call, compute, block_size, lse)

    def rescaled_output(
        self, call: AttentionCall, compute: np.dtype, block_size: int | None
    ) -> np.ndarray:
        """The output recomputed with ``value`` scaled by ``2**-k``, for calls whose output came
        out non-finite although every input is finite; the caller takes from it only the
        elements that came out non-finite.

        Each output is a convex combination of values, so ``|output| <= max|value|`` always
        fits the dtype; but with values near the dtype's maximum the sums on the way overflow:
        the blocked path's running sum of ``exp(s - m) * v`` over up to ``Tk`` terms before
        dividing, and the dense path's ``weights @ value`` when the rounded weights sum to
        slightly more than 1. Scaling by a power of two is exact (barring values that become
        subnormal, which are below ``2**(k - 1022)`` in float64); ``k`` leaves room for ``Tk``
        terms. The result is scaled back and clipped to ``[-max|value|, max|value|]``, which
        contains every exact output, so rounding at the top of the range cannot produce
        infinity.

        Only the non-finite elements are replaced: an element overflows only when its own
        column of values reaches near the maximum, so the scaling costs it nothing (values
        ``2**k`` below the maximum and smaller contribute at most ``2**(k - 1074)`` of error),
        whereas an element whose visible values are all tiny would lose digits to the
        subnormal range (``5e-324`` scaled by ``2**-k`` is 0). Overflow on the way never comes
        back finite (``inf`` stays ``inf`` or turns into NaN), so every finite element is
        already right.
        """
        value = call.value.astype(compute, copy=False)
        vmax = np.abs(value).max()
        Tk = call.shape[3]
        # vmax == 0 (every value 0): nothing overflows, but a variant whose weights are not
        # finite (a mutant) gets here too; any k then keeps the non-finite elements as they are
        top = int(np.ceil(np.log2(float(vmax)))) if vmax > 0 else 0
        k = max(1, top + int(np.ceil(np.log2(Tk + 1))) + 1 - int(ml_dtypes.finfo(compute).maxexp))
        scaled = call._replace(value=np.ldexp(value, -k).astype(compute, copy=False))
        output = self.output(scaled, compute, block_size)
        with np.errstate(over="ignore"):
            output = np.ldexp(output, k).astype(compute, copy=False)
        return np.clip(output, -vmax, vmax)

    # -- the public API -------------------------------------------------------------------
    @takes_options
    def attention_weights(
        self,
        query,
        key,
        **options,
    ) -> np.ndarray:
        """Attention weights ``softmax(scale * query @ key^T + mask)`` along the key axis.

        Args:
            query: ``(B, Hq, Tq, D)`` or ``(Tq, D)``; float16, bfloat16, float32 or float64.
            key: ``(B, Hkv, Tk, D)`` or ``(Tk, D)``, same dtype, ``Hq % Hkv == 0``.
            attn_mask, is_causal, query_start, scale, window, segment_ids, chunk_size,
                alibi_slopes, softcap, sinks: the keyword options of
                :mod:`oracle.rules.options` (names, defaults, meanings and the other
                libraries' conventions); ALiBi's bias is computed in the compute dtype.

        Returns:
            ``(B, Hq, Tq, Tk)`` (or ``(Tq, Tk)``) in the input dtype; rows sum to 1 (with
            sinks to ``sigmoid(lse - sigma_h)``, 0 for a row left to its sink), hidden keys
            are exactly 0. Always the dense path.

        Raises:
            oracle.rules.AttentionInputError (a ValueError) for any broken rule, including a
            query row with no visible key and scaled scores that overflow. Inputs are not
            modified. Source: Vaswani et al. 2017, eq. 1.
        """
        call = self.validate(query, key, None, options, needs_value=False)
        self.check_rows(call)
        weights = self.dense_weights(call, compute_dtype(call.dtype)).astype(call.dtype)
        return weights[0, 0] if call.two_d else weights

    @takes_options
    def attention(
        self,
        query,
        key,
        value,
        *,
        block_size=None,
        return_lse=False,
        **options,
    ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """Scaled dot-product attention ``softmax(scale * query @ key^T + mask) @ value``.

        Args:
            query: ``(B, Hq, Tq, D)`` or ``(Tq, D)``; float16, bfloat16, float32 or float64.
            key: ``(B, Hkv, Tk, D)`` or ``(Tk, D)``, same dtype, ``Hq % Hkv == 0``.
            value: ``(B, Hkv, Tk, Dv)`` or ``(Tk, Dv)``, same dtype.
            attn_mask, is_causal, query_start, scale, window, segment_ids, chunk_size,
                alibi_slopes, softcap, sinks: as in :meth:`attention_weights` (a row that sees
                no key but has a finite sink gives 0).
            block_size: which path computes the call; the result differs between paths by
                rounding only, and every path follows the same rules with the same errors.

                - ``None`` (default): the faster path for the call's size
                  (:func:`impl.default_path.default_block_size`, with the reasons and how
                  they were measured): dense when ``Tk <= 128`` or ``B * Hq * Tq * Tk <
                  2**15``; else blocked with ``n = 128`` for causal calls whose query tiles
                  see at most 3/4 of the keys, for ``B * Hq * 128 * (D + Dv) >= 2**19`` and
                  for ``B * Hq * Tq * Tk >= 2**24``; else dense. Small calls are dense,
                  bitwise.
                - ``"dense"``: the dense path (:mod:`impl.dense`), one ``(B, Hq, Tq, Tk)``
                  score array; bitwise the straightforward formula.
                - an int ``n >= 1``: tiles of ``n`` queries by ``n`` keys with an online
                  softmax (:mod:`impl.blocked`), peak extra memory O(B Hq n (n + Dv))
                  (Milakov & Gimelshein 2018; Dao et al. 2022).

            return_lse: also return each query row's log-sum-exp (FlashAttention's
                ``softmax_lse``, FlexAttention's ``return_lse``).

        Returns:
            ``(B, Hq, Tq, Dv)`` (or ``(Tq, Dv)``) in the input dtype (float16 and bfloat16 are
            computed in float32); with ``return_lse=True`` the pair ``(output, lse)``, ``lse`` of shape
            ``(B, Hq, Tq)`` (or ``(Tq,)``) in the compute dtype (float32 for float16, bfloat16 and
            float32 inputs, as FlashAttention's; float64 for float64): ``log sum_j
            exp(s_j)`` over the row's visible keys, natural log, in the scores' units (the
            sink not counted, so two disjoint key sets merge into their union, and a sink is
            applied once after the merge); ``-inf`` for a row that sees no key. The output is
            always finite: should values near the dtype's maximum make a sum on the
            way overflow, the output is recomputed with the values scaled by a power of two
            (:meth:`rescaled_output`).

        Raises:
            oracle.rules.AttentionInputError for any broken rule (see :mod:`oracle.rules`),
            the first one in the rulebook's order whichever the path. ``block_size`` other
            than ``"dense"`` is checked by :func:`oracle.rules.check_block_size` (``None`` or
            an int >= 1, else ShapeError; the name ``"dense"`` is this package's and is read
            before that check); ``return_lse`` must be a bool (AttentionInputError). Inputs are
            not modified. Source: Vaswani et al. 2017, eq. 1;
            GQA grouping from Ainslie et al. 2023.
        """
        dense = isinstance(block_size, str) and block_size == DENSE
        block_size = None if dense else check_block_size(block_size)
        return_lse = check_flag(return_lse, "return_lse")
        # Every rule but finiteness first (array-free, the same for both paths); then the dense
        # path scans query, key and value whole, the blocked path block by block as it reads
        # them (one pass over K and V instead of two). Should any rule fail, the full
        # validation reruns first, so the error is the rulebook's first broken rule.
        try:
            call = self.validate(query, key, value, options, scan=False)
            if block_size is None and not dense:
                block_size = default_block_size(
                    call.query.shape,
                    call.key.shape,
                    call.value.shape,
                    call.is_causal,
                    call.query_start,
                )
            if block_size is None:
                for name in ("query", "key", "value"):
                    self.check_finite(getattr(call, name), name)
            self.check_rows(call, block_size)
            compute = compute_dtype(call.dtype)
            lse = np.empty(call.shape[:3], dtype=compute) if return_lse else None
            output = self.output(call, compute, block_size, lse)
            error = None
        except AttentionInputError as exc:
            error = exc
        if error is not None:
            self.validate(query, key, value, options)
            raise error
        finite = np.isfinite(output)
        if not finite.all():  # values near the dtype's max: see rescaled_output
            output = np.where(
                finite, output, self.rescaled_output(call, compute_dtype(call.dtype), block_size)
            )
        output = output.astype(call.dtype)
        if call.two_d:
            output = output[0, 0]
            lse = None if lse is None else lse[0, 0]
        return (output, lse) if return_lse else output


ATTENTION = Attention()
attention = ATTENTION.attention
attention_weights = ATTENTION.attention_weights
cached_attention = ATTENTION.cached_attention
attention_with_kvcache = ATTENTION.attention_with_kvcache
