"""F16 (docs/findings.md): FlexAttention (CPU, eager) reads the key/value positions that its
block mask hides, when they lie in a block it computes: a NaN stored there makes the output
NaN (its weight 0 times NaN), where a serving cache's storage past a sequence's length holds
whatever an ``empty`` preallocation left.

Run: python docs/reproductions/f16_flex_nan_past_the_length.py   (needs torch; CPU, eager)
One sequence, storage of 2 positions, length 1: the mask hides position 1. Prints the output
with position 1's value finite, then NaN, and the same call through torch's SDPA with a bool
mask (the math kernel: the same 0 * NaN); exits 1 when the flex output with NaN is not the
finite one.
"""

import sys
import warnings

import torch
from torch.nn.attention.flex_attention import create_block_mask
from torch.nn.attention.flex_attention import flex_attention

warnings.simplefilter("ignore", UserWarning)  # "called without torch.compile()": eager, chosen
LENGTH, STORAGE = 1, 2
q = torch.zeros(1, 1, 1, 1, dtype=torch.float64)
k = torch.zeros(1, 1, STORAGE, 1, dtype=torch.float64)


def within_length(b, h, q_idx, kv_idx):
    return kv_idx < LENGTH


mask = create_block_mask(within_length, 1, 1, 1, STORAGE, device="cpu")


def flex(past: float) -> float:
    v = torch.zeros(1, 1, STORAGE, 1, dtype=torch.float64)
    v[0, 0, LENGTH:] = past  # storage past the length: never read, by the serving rule
    return flex_attention(q, k, v, block_mask=mask).item()


def sdpa(past: float) -> float:
    v = torch.zeros(1, 1, STORAGE, 1, dtype=torch.float64)
    v[0, 0, LENGTH:] = past
    visible = (torch.arange(STORAGE) < LENGTH)[None, :]  # (Tq, Tk)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=visible).item()


finite, nan = flex(7.0), flex(float("nan"))
print(f"torch {torch.__version__}: flex_attention, position {LENGTH} = 7.0: {finite}; = NaN: {nan}")
print(
    f"  scaled_dot_product_attention with a bool mask: {sdpa(7.0)}; with NaN: {sdpa(float('nan'))}"
)
sys.exit(0 if nan == finite else 1)
