"""F6 (docs/findings.md): FlexAttention's PagedAttention.erase leaves the freed slot's
physical_to_logical row in place, and the next sequence in that slot attends to the freed
sequence's old tokens.

Run: python docs/reproductions/f6_flex_paged_attention_erase.py   (needs torch; CPU, eager)
Prints the output of a query over a sequence whose values are all 1 (so the right output is
exactly 1.0) and exits 1 when it is not.
"""

import sys
import warnings

import torch
from torch.nn.attention.experimental._paged_attention import PagedAttention
from torch.nn.attention.flex_attention import create_block_mask
from torch.nn.attention.flex_attention import flex_attention

warnings.simplefilter("ignore", UserWarning)  # "called without torch.compile()": eager, chosen
H, D, PAGE, PAGES = 1, 1, 2, 4
paged = PagedAttention(PAGES, PAGE, 1, device="cpu")
k_cache = torch.zeros(1, H, PAGES * PAGE, D, dtype=torch.float64)
v_cache = torch.zeros(1, H, PAGES * PAGE, D, dtype=torch.float64)
slot = torch.tensor([0])


def fill(tokens: int, value: float) -> None:
    """Reserve ``tokens`` positions in batch slot 0 and write keys 0 and values ``value``."""
    paged.reserve(slot[0], torch.tensor(tokens))
    keys = torch.zeros(1, H, tokens, D, dtype=torch.float64)
    values = torch.full((1, H, tokens, D), value, dtype=torch.float64)
    paged.assign(slot, torch.arange(tokens)[None], keys, values, k_cache, v_cache)


fill(4, 100.0)  # sequence A: 4 tokens, 2 pages
paged.erase(slot)  # A is freed ...
print("after erase: page_table", paged.page_table.tolist(), "physical_to_logical",
      paged.physical_to_logical.tolist())  # fmt: skip
fill(2, 1.0)  # ... and sequence C takes slot 0: 2 tokens, 1 page
kv_len = torch.tensor([2])
logical = create_block_mask(
    lambda b, h, q, kv: kv < kv_len[b], 1, H, 1, PAGES * PAGE, device="cpu", BLOCK_SIZE=(128, PAGE)
)
physical = paged.convert_logical_block_mask(logical, kv_len=kv_len)
out = flex_attention(
    torch.zeros(1, H, 1, D, dtype=torch.float64), k_cache, v_cache, block_mask=physical
)
print(f"torch {torch.__version__}: output {out.item()} (C's values are all 1: expected 1.0)")
sys.exit(0 if out.item() == 1.0 else 1)
