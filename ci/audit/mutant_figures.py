"""The audit's section on the two mutants the source lab builds (reversed mask, column softmax):
their published figures, through the mutants' own modules (:mod:`ci.audit.figures`)."""

from __future__ import annotations

import importlib
import math

import numpy as np

from attnprops.ci.audit.record import Audit
from attnprops.ci.audit.record import max_abs_error
from attnprops.ci.audit.record import ulp_tolerance
from attnprops.oracle import lab


def _forbidden_total(weights: np.ndarray) -> float:
    """Total weight on keys after the query (key > query) of a square ``(T, T)`` matrix."""
    return float(weights[np.triu(np.ones(weights.shape, dtype=bool), 1)].sum())


def mutants(audit: Audit) -> None:
    """§5: ``mutants.reversed_mask`` and ``mutants.column_softmax`` on the example.

    Each mutant is called through its real module with :mod:`impl`'s API
    (``attention_weights(query, key, *, is_causal=True)``) and compared with the published
    figure and with the 50-digit oracle computing the same wrong thing on purpose: the reversed
    mask is ``key >= query``; column normalization is the softmax of the transposed scores
    under the transposed causal mask, transposed back.
    """
    from attnprops import oracle

    Q, K = lab.QUERY, lab.KEY
    causal = np.arange(3)[None, :] <= np.arange(3)[:, None]  # (Tq, Tk): key <= query
    specs = (
        (
            "reversed_mask",
            "forbidden_weight",
            "total weight on forbidden (future, key > query) positions",
            _forbidden_total,
            lab.REVERSED_MASK_FORBIDDEN_WEIGHT,
            lambda: oracle.attention_weights(Q, K, attn_mask=~causal | np.eye(3, dtype=bool)),
            False,
        ),
        (
            "column_softmax",
            "row_sum_error",
            "max |row sum - 1|",
            lambda w: float(np.max(np.abs(w.sum(axis=-1) - 1))),
            lab.COLUMN_SOFTMAX_ROW_SUM_ERROR,
            lambda: oracle.attention_weights(K, Q, attn_mask=causal.T),
            True,
        ),
    )
    for name, check, what, figure, published, oracle_call, transposed in specs:
        module_name = f"attnprops.mutants.{name}"
        try:
            module = importlib.import_module(module_name)
            weights = np.asarray(module.attention_weights(Q, K, is_causal=True))
        except Exception as exc:  # missing or broken module: the check fails, naming why
            audit.failed(
                f"mutants.{name}.{check}",
                "mutants",
                f"{module_name}: {what} on the 3-token causal example",
                published.value,
                exc,
                published.source,
            )
            continue
        audit.printed(
            f"mutants.{name}.{check}",
            "mutants",
            f"{module_name}.attention_weights(Q, K, is_causal=True): {what}",
            figure(weights),
            published,
        )
        exact = oracle_call()
        value, digits = (exact.value.T, exact.exact.T) if transposed else (exact.value, exact.exact)
        audit.near(
            f"mutants.{name}.vs_oracle",
            "mutants",
            f"{module_name}'s weights vs the oracle computing the same mistake at 50 "
            "digits (max abs error)",
            max_abs_error(weights, digits) if weights.shape == (3, 3) else math.inf,
            0.0,
            ulp_tolerance(value),
            "oracle, 50 digits",
        )
        audit.array(f"{name}_weights.csv", weights, columns="key")
