"""``attnprops example``: the source lab's 3-token causal example, printed as the lab prints it.

The *source lab* is the teaching lab this project grew from: a Chinese-language walk-through
of transformer attention ("Transformer Attention math: Q/K/V, softmax weights, masks and the KV
cache") that works one fixed 3-token causal example in NumPy through scores, mask, weights and
context, then shows the single-query KV-cache decode-offset trap, the KV-cache byte formula and
an audit of its own figures. Its printed numbers are this project's regression values
(``attnprops audit`` re-checks every one of them).

The output first prints the inputs -- the lab's fixed illustrative tensors Q and K of shape
``(3, 4)`` (3 tokens, head_dim 4) and V of shape ``(3, 2)`` -- then the scaled scores, causal
mask, weights and context, which come from :func:`oracle.attention_scores`,
:func:`impl.attention_weights` and :func:`impl.attention`.
"""

from __future__ import annotations

import textwrap

import numpy as np

from attnprops.oracle.lab import DESCRIPTION as SOURCE_LAB  # what the source lab is
from attnprops.oracle.lab import KEY  # its fixed tensors
from attnprops.oracle.lab import QUERY  # its fixed tensors
from attnprops.oracle.lab import VALUE  # its fixed tensors


def example_inputs() -> dict[str, np.ndarray]:
    """The three inputs, labelled: Q and K ``(3, 4)``, V ``(3, 2)`` (one head, 3 tokens)."""
    return {"Q (query)": QUERY, "K (key)": KEY, "V (value)": VALUE}


def example_arrays() -> dict[str, np.ndarray]:
    """The four arrays of the example: scaled scores, masked scores, weights, context."""
    from attnprops import impl
    from attnprops import oracle

    scaled = oracle.attention_scores(QUERY, KEY).value  # (3, 3)
    masked = oracle.attention_scores(QUERY, KEY, is_causal=True).value  # (3, 3), -inf above
    return {
        "Scaled scores": scaled,
        "Masked scores": masked,
        "Attention weights": impl.attention_weights(QUERY, KEY, is_causal=True),
        "Context": impl.attention(QUERY, KEY, VALUE, is_causal=True),
    }


def add_arguments(parser) -> None:
    parser.description = (
        f"{parser.description or 'print the source lab example'}: its inputs "
        f"Q, K, V, then the scaled scores, causal mask, weights and context. "
        f"{SOURCE_LAB}"
    )


def decimals(array: np.ndarray, most: int = 6) -> int:
    """The fewest decimals (1 to ``most``) that print every entry of ``array`` exactly."""
    for places in range(1, most):
        if np.array_equal(np.round(array, places), array):
            return places
    return most


def run(args) -> int:
    print("The source lab's 3-token causal example (one head; token i reads keys 0..i).")
    print(textwrap.fill(SOURCE_LAB, width=96, break_on_hyphens=False))
    print()
    print("Inputs (the lab's fixed illustrative tensors, not embeddings of a trained model):")
    for name, array in example_inputs().items():
        with np.printoptions(precision=decimals(array), floatmode="fixed", suppress=True):
            print(f"{name}, shape {array.shape}:\n", array)
    print()
    print(
        f"Results (scores = Q @ K.T / sqrt({QUERY.shape[-1]}); weights = causal softmax over "
        "keys; context = weights @ V):"
    )
    with np.printoptions(precision=6, suppress=True):
        for name, array in example_arrays().items():
            print(f"{name}:\n", array)
    return 0
