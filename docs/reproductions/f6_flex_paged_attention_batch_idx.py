"""F6 (docs/findings.md), first part: FlexAttention's PagedAttention reads physical_to_logical by
the block mask's batch position, not by the batch slot given as ``batch_idx``, so attending
through any slot but the first reads another sequence's mapping (the suite's shrunk case: two
sequences, one token appended to the second, pages of 1).

Run: python docs/reproductions/f6_flex_paged_attention_batch_idx.py   (needs torch; CPU)
Exits 1 when the output is not the one value the sequence holds (0.5).
"""

import sys
import warnings

import torch
from torch.nn.attention.experimental._paged_attention import PagedAttention
from torch.nn.attention.flex_attention import create_block_mask
from torch.nn.attention.flex_attention import flex_attention

warnings.simplefilter("ignore", UserWarning)  # "called without torch.compile()": eager, chosen
H, D, PAGE, PAGES = 1, 1, 1, 1
paged = PagedAttention(PAGES, PAGE, 2, device="cpu")  # two batch slots: sequences 0 and 1
k_cache = torch.zeros(1, H, PAGES * PAGE, D, dtype=torch.float64)
v_cache = torch.zeros(1, H, PAGES * PAGE, D, dtype=torch.float64)
slot = torch.tensor([1])  # sequence 1 gets one token; sequence 0 stays empty
paged.reserve(slot[0], torch.tensor(1))
paged.assign(slot, torch.zeros(1, 1, dtype=torch.int64), torch.zeros(1, H, 1, D, dtype=torch.float64),
             torch.full((1, H, 1, D), 0.5, dtype=torch.float64), k_cache, v_cache)  # fmt: skip
kv_len = torch.tensor([1])
logical = create_block_mask(
    lambda b, h, q, kv: kv < kv_len[b], 1, H, 1, PAGES * PAGE, device="cpu", BLOCK_SIZE=(128, PAGE)
)
physical = paged.convert_logical_block_mask(logical, batch_idx=slot, kv_len=kv_len)
out = flex_attention(
    torch.zeros(1, H, 1, D, dtype=torch.float64), k_cache, v_cache, block_mask=physical
)
print(
    "page_table",
    paged.page_table.tolist(),
    "physical_to_logical",
    paged.physical_to_logical.tolist(),
)
print(f"torch {torch.__version__}: output {out.item()} (the sequence holds one value, 0.5)")
sys.exit(0 if out.item() == 0.5 else 1)
