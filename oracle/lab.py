"""The source lab's data, in one place: its inputs and the figures it prints.

The *source lab* is the Chinese-language teaching lab this project grew from (shared seed
``000``, "Transformer Attention 数学"; seed ``003`` is its two-token quick reference). It
works one fixed 3-token causal example through scores, mask, weights and context in NumPy,
decodes the last token through a KV cache (the right offset and the offset-0 trap), shows two
deliberately broken variants with their measured figures, a seeded batch test, and the
KV-cache byte formula. Its printed numbers are this project's regression values: the oracle's
and impl's tests, the seed-example properties, ``attnprops example`` and ``attnprops audit``
all read them from here.

Every printed figure is a :class:`Printed`: the value as the lab prints it and its number of
decimals. It stands for the interval ``value ± 0.5 * 10**-decimals`` (half a unit in the last
printed place), which is how a computed value is compared with it
(:attr:`Printed.tolerance`). Inputs are float64 arrays, shapes ``(tokens, head_dim)`` and
``(tokens, value_dim)`` (one head); tests add the batch and head axes themselves.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

# One or two sentences for a reader who has not seen the lab (``attnprops example --help``).
DESCRIPTION = (
    "The source lab is the Chinese-language teaching lab on transformer attention "
    "this project grew from: it works this fixed 3-token causal example through "
    "scores, mask, weights and context in NumPy, then covers decoding with a KV "
    "cache (a cached query's absolute offset) and the KV-cache byte formula. Its "
    "printed numbers are this project's regression values (attnprops audit "
    "re-checks them)."
)


class Printed(NamedTuple):
    """A figure as the lab prints it: ``value`` (a number or nested lists, ``-inf`` for a
    hidden key) rounded to ``decimals`` places, and where it is printed (``source``)."""

    value: object
    decimals: int
    source: str

    @property
    def tolerance(self) -> float:
        """Half a unit in the last printed place: ``0.5 * 10**-decimals``."""
        return 0.5 * 10.0**-self.decimals

    def array(self) -> np.ndarray:
        """The value as a float64 array."""
        return np.array(self.value, dtype=np.float64)

    def assert_matches(self, computed, what: str = "") -> None:
        """Raise ``AssertionError`` (NumPy's report) unless ``computed`` has the value's shape
        and is within :attr:`tolerance` of it everywhere (``-inf`` where it has ``-inf``)."""
        np.testing.assert_allclose(
            np.asarray(computed, dtype=np.float64),
            self.array(),
            rtol=0,
            atol=self.tolerance,
            err_msg=f"{what} vs {self.source}",
        )


# --- seed 000 §3: the 3-token causal example (fixed illustrative tensors, not embeddings) ---
QUERY = np.array([[1.0, 0.5, -0.2, 0.1], [-0.5, 1.2, 0.8, -0.4], [0.2, -0.1, 1.5, 0.9]])
KEY = np.array([[0.8, 0.4, -0.3, 0.0], [-0.2, 1.0, 0.5, -0.1], [0.1, -0.2, 1.1, 0.7]])
VALUE = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])

SCALED_SCORES = Printed(
    ((0.530, 0.095, -0.075), (-0.080, 0.870, 0.155), (-0.165, 0.260, 1.160)), 3, "seed 000 §3"
)  # Q K^T / sqrt(4)
MASKED_SCORES = Printed(
    tuple(
        tuple(-math.inf if j > i else s for j, s in enumerate(row))
        for i, row in enumerate(SCALED_SCORES.value)
    ),
    3,
    "seed 000 §3",
)  # -inf above the diagonal (key > query)
WEIGHTS = Printed(
    ((1.0, 0.0, 0.0), (0.278885, 0.721115, 0.0), (0.158938, 0.243109, 0.597953)), 6, "seed 000 §3"
)  # causal softmax over keys
CONTEXT = Printed(
    ((1.0, 0.0), (0.278885, 0.721115), (-0.439015, -0.354843)), 6, "seed 000 §3"
)  # weights @ V

# --- seed 000 §4: decode of the last token (absolute position 2) against the 3 cached keys ---
DECODE_QUERY_START = 2
DECODE = Printed((-0.439015, -0.354843), 6, "seed 000 §4")  # query_start = 2: context row 2
OFFSET_ZERO_DECODE = Printed((1.0, 0.0), 6, "seed 000 §7 (复现错误的 [1,0])")  # query_start = 0
OFFSET_ZERO_MAX_ERROR = Printed(1.439015, 6, "seed 000 §4")  # max |offset 0 - offset 2|

# --- seed 000 §5: the 50-digit check and the two broken variants ---
SCORE_ERROR = (
    1.1e-16  # "最大分数误差为 1.1e-16": float64 scores vs 50-digit Decimal (informational)
)
REVERSED_MASK_FORBIDDEN_WEIGHT = Printed(0.872569, 6, "seed 000 §5 (故意写错的反例)")
COLUMN_SOFTMAX_ROW_SUM_ERROR = Printed(0.596413, 6, "seed 000 §5 (故意写错的反例)")

# --- seed 000 §5: the seeded batch test (B=2, H=3, L=7, dk=4, dv=5, default_rng(42)) ---
BATCH = dict(seed=42, batch=2, heads=3, length=7, head_dim=4, value_dim=5)


def batch_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The lab's batch case: ``numpy.random.default_rng(42)``, ``standard_normal`` q, k, v in
    that order; q, k ``(2, 3, 7, 4)``, v ``(2, 3, 7, 5)`` (B, H, L, dk / dv), float64."""
    rng = np.random.default_rng(BATCH["seed"])
    b, h, n = BATCH["batch"], BATCH["heads"], BATCH["length"]
    q = rng.standard_normal((b, h, n, BATCH["head_dim"]))
    k = rng.standard_normal((b, h, n, BATCH["head_dim"]))
    v = rng.standard_normal((b, h, n, BATCH["value_dim"]))
    return q, k, v


# --- seed 000 §6: KV-cache bytes ---
# bytes = 2 * layers * batch * tokens * kv_heads * head_dim * bytes_per_element; the lab's
# configuration (32 KV heads is its MHA), and its table for MHA / GQA / MQA.
KV_CONFIG = dict(
    num_layers=32, batch=1, tokens=10_000, num_kv_heads=32, head_dim=128, dtype="float16"
)
KV_TABLE = (("MHA", 32, 5_242_880_000), ("GQA", 8, 1_310_720_000), ("MQA", 1, 163_840_000))
# the table's configuration: KV_CONFIG but for the KV heads (KV_TABLE's second column)
KV_TABLE_CONFIG = {k: v for k, v in KV_CONFIG.items() if k != "num_kv_heads"}
WEIGHTS_PARAMS = 7_000_000_000  # "7B 参数" at 2 bytes each
WEIGHTS_BYTES_PER_PARAM = 2
WEIGHTS_GIB = Printed(13.04, 2, "seed 000 §6 (约为 13.04 GiB)")
# A real fp16 pair of 480 bytes; the lab gives only the total. The shapes chosen here: one
# layer, batch 1, 2 KV heads, the example's 3 tokens, head_dim 20 (240 bytes each).
SMALL_PAIR = dict(num_layers=1, batch=1, tokens=3, num_kv_heads=2, head_dim=20, dtype="float16")
SMALL_PAIR_BYTES = 480

# --- seed 003: the 2-token quick reference (Q = K = I, causal) ---
QUICK_QUERY = np.eye(2)  # also the key
QUICK_VALUE = np.array([[2.0, 0.0], [0.0, 4.0]])
QUICK_SCORES = Printed(((0.7071, 0.0), (0.0, 0.7071)), 4, "seed 003")  # I / sqrt(2)
QUICK_WEIGHTS = Printed(((1.0, 0.0), (0.3302, 0.6698)), 4, "seed 003")
QUICK_OUTPUT = Printed(((2.0, 0.0), (0.6605, 2.6790)), 4, "seed 003")
