"""The sections of the audit that reproduce the source lab's figures (:mod:`oracle.lab`).

Each section recomputes one part of the lab with :mod:`impl` (NumPy, float64) and
:mod:`oracle` (50 significant digits), checks the results against the printed figures and
records the arrays as CSV. Only the lab's own figures are checked here: the rules they
illustrate (rows sum to one, causality, future invariance, cache copies and rollback) are
the property suite's and the unit tests' to check, for every input, not the audit's.
"""

from __future__ import annotations

import math

import numpy as np

from attnprops.ci.audit.kv_figures import kv_bytes
from attnprops.ci.audit.mutant_figures import mutants
from attnprops.ci.audit.record import Audit
from attnprops.ci.audit.record import max_abs_error
from attnprops.ci.audit.record import ulp_tolerance
from attnprops.oracle import lab


def example(audit: Audit) -> None:
    """§3: scaled scores, masked scores, weights, context of the 3-token causal example;
    and the 50-digit check of §5 (float64 against the oracle)."""
    from attnprops import impl
    from attnprops import oracle

    Q, K, V = lab.QUERY, lab.KEY, lab.VALUE
    # The lab's own float64 NumPy scores (impl has no scores function: its dense path fuses
    # them into the softmax), -inf above the diagonal for the masked ones.
    scaled = Q @ K.T / math.sqrt(Q.shape[-1])
    masked = np.where(np.triu(np.ones((3, 3), dtype=bool), 1), -np.inf, scaled)
    computed = {
        "scaled_scores": ("numpy", scaled),
        "masked_scores": ("numpy", masked),
        "weights": ("impl", impl.attention_weights(Q, K, is_causal=True)),
        "context": ("impl", impl.attention(Q, K, V, is_causal=True)),
    }
    exact = {
        "scaled_scores": oracle.attention_scores(Q, K),
        "masked_scores": oracle.attention_scores(Q, K, is_causal=True),
        "weights": oracle.attention_weights(Q, K, is_causal=True),
        "context": oracle.attention(Q, K, V, is_causal=True),
    }
    figures = {
        "scaled_scores": lab.SCALED_SCORES,
        "masked_scores": lab.MASKED_SCORES,
        "weights": lab.WEIGHTS,
        "context": lab.CONTEXT,
    }
    labels = {
        "scaled_scores": "scaled scores Q K^T / sqrt(4)",
        "masked_scores": "causally masked scaled scores (-inf above the diagonal)",
        "weights": "causal attention weights (softmax over keys)",
        "context": "context = weights @ V",
    }
    for name, (who, array) in computed.items():
        for by, measured in ((who, array), ("oracle", exact[name].value)):
            audit.printed(
                f"example.{name}.{by}_vs_published",
                "example",
                f"3-token example, {labels[name]}, {by} vs the published values",
                measured,
                figures[name],
            )
        columns = "dim" if name == "context" else "key"
        audit.array(f"example_{name}.csv", array, columns=columns)
        audit.array(f"example_{name}_oracle.csv", exact[name].value, columns=columns)
    for name, count in (("scaled_scores", 9), ("weights", 9), ("context", 6)):
        who, array = computed[name]
        note = None
        if name == "scaled_scores":
            note = (
                f"the lab reports a maximum score error of {lab.SCORE_ERROR:g} against "
                "its 50-digit Decimal computation"
            )
        audit.near(
            f"oracle.{name}.max_abs_error",
            "oracle",
            f"max |{who} - 50-digit oracle| over the example's {count} {labels[name]}",
            max_abs_error(array, exact[name].exact),
            0.0,
            ulp_tolerance(exact[name].value),
            "seed 000 §5 (50-digit check)",
            note,
        )


def decode(audit: Audit) -> None:
    """§4: the last query (absolute position 2) against the 3 cached keys, with the right
    offset, with the offset-0 trap, and through each KV cache token by token."""
    import mpmath

    from attnprops import impl
    from attnprops import oracle

    Q, K, V = lab.QUERY, lab.KEY, lab.VALUE
    start = lab.DECODE_QUERY_START
    q = Q[start : start + 1]  # (1, 4): one query at absolute position 2
    right = impl.attention(q, K, V, is_causal=True, query_start=start)  # (1, 2)
    wrong = impl.attention(q, K, V, is_causal=True, query_start=0)
    right_o = oracle.attention(q, K, V, is_causal=True, query_start=start)
    wrong_o = oracle.attention(q, K, V, is_causal=True, query_start=0)
    for who, r, w in (("impl", right, wrong), ("oracle", right_o.value, wrong_o.value)):
        audit.printed(
            f"decode.offset2.{who}",
            "decode",
            f"single query at position 2, query_start=2 ({who}): the context row",
            r[0],
            lab.DECODE,
        )
        audit.printed(
            f"decode.offset0.{who}",
            "decode",
            f"same query with the wrong query_start=0 ({who}): it reads key 0 only",
            w[0],
            lab.OFFSET_ZERO_DECODE,
        )
    audit.printed(
        "decode.offset0.max_error.impl",
        "decode",
        "max |offset-0 output - offset-2 output| (impl)",
        float(np.max(np.abs(wrong - right))),
        lab.OFFSET_ZERO_MAX_ERROR,
    )
    with mpmath.workdps(oracle.DIGITS):
        exact_err = max(abs(a - b) for a, b in zip(wrong_o.exact.ravel(), right_o.exact.ravel()))
    audit.printed(
        "decode.offset0.max_error.oracle",
        "decode",
        "max |offset-0 output - offset-2 output| (oracle, 50 digits)",
        float(exact_err),
        lab.OFFSET_ZERO_MAX_ERROR,
    )
    for name, query_start, out in (("offset2", start, right), ("offset0", 0, wrong)):
        weights = impl.attention_weights(q, K, is_causal=True, query_start=query_start)
        audit.array(f"decode_{name}_weights.csv", weights, columns="key", query_positions=[start])
        audit.array(f"decode_{name}_context.csv", out, columns="dim", query_positions=[start])
    for who, module in (("impl", impl), ("oracle", oracle)):
        cache = module.KVCache(1, 1, Q.shape[-1], V.shape[-1])
        for t in range(len(Q)):
            out = module.cached_attention(
                Q[None, None, t : t + 1], K[None, None, t : t + 1], V[None, None, t : t + 1], cache
            )
        out = out if who == "impl" else out.value  # (1, 1, 1, 2)
        audit.printed(
            f"decode.kv_cache.{who}",
            "decode",
            f"{who}.KVCache + cached_attention, token by token: the third token's "
            "output (query_start = 2 cached tokens)",
            out[0, 0, 0],
            lab.DECODE,
        )


def batch(audit: Audit) -> None:
    """§5's batch test (:data:`oracle.lab.BATCH`): causal attention full and token by token
    through ``impl.KVCache``, both against the 50-digit oracle."""
    from attnprops import impl
    from attnprops import oracle

    q, k, v = lab.batch_inputs()
    B, H, L = q.shape[:3]
    src = "seed 000 §5 (批量测试 B=2 H=3 L=7 dk=4 dv=5 seed 42)"
    full = impl.attention(q, k, v, is_causal=True)  # (B, H, L, dv)
    cache = impl.KVCache(B, H, q.shape[3], v.shape[3])
    cached = np.concatenate(
        [
            impl.cached_attention(q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1], cache)
            for t in range(L)
        ],
        axis=2,
    )  # (B, H, L, dv)
    exact = oracle.attention(q, k, v, is_causal=True)
    tol = ulp_tolerance(exact.value)
    audit.near(
        "batch.cached_vs_full",
        "batch",
        "max |token-by-token KVCache output - full causal attention| (impl)",
        float(np.max(np.abs(cached - full))),
        0.0,
        tol,
        src,
    )
    audit.near(
        "batch.full_vs_oracle",
        "batch",
        "max |impl full causal attention - 50-digit oracle|",
        max_abs_error(full, exact.exact),
        0.0,
        tol,
        "oracle, 50 digits",
    )
    audit.near(
        "batch.cached_vs_oracle",
        "batch",
        "max |impl token-by-token cached attention - 50-digit oracle|",
        max_abs_error(cached, exact.exact),
        0.0,
        tol,
        "oracle, 50 digits",
    )
    audit.array("batch_full_output.csv", full, columns="dim")
    audit.array("batch_cached_output.csv", cached, columns="dim")
    audit.array("batch_full_output_oracle.csv", exact.value, columns="dim")


SECTIONS = (
    ("example", example),
    ("decode", decode),
    ("mutants", mutants),
    ("batch", batch),
    ("kv_bytes", kv_bytes),
)
