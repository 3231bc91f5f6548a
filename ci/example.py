"""``attnprops example``: the source lab's 3-token causal example, printed as the lab prints it.

Inputs are the lab's fixed illustrative tensors (Q/K head_dim 4, V dim 2); the scores, causal
mask, weights and context come from :func:`impl.attention_weights`, :func:`impl.attention` and
:func:`oracle.attention_scores`.
"""

from __future__ import annotations

import numpy as np

# The source lab's fixed tensors (not embeddings of a trained model).
QUERY = np.array([[1.0, 0.5, -0.2, 0.1], [-0.5, 1.2, 0.8, -0.4], [0.2, -0.1, 1.5, 0.9]])
KEY = np.array([[0.8, 0.4, -0.3, 0.0], [-0.2, 1.0, 0.5, -0.1], [0.1, -0.2, 1.1, 0.7]])
VALUE = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])


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
    parser.set_defaults()


def run(args) -> int:
    with np.printoptions(precision=6, suppress=True):
        for name, array in example_arrays().items():
            print(f"{name}:\n", array)
    return 0
