"""F7 (docs/findings.md): transformers' sdpa_mask returns None ("use SDPA's is_causal")
for a single query without padding whatever its q_offset, and sdpa_attention_forward then
runs SDPA without causality: the query at position 0 of three keys sees all three. The
eager builder, eager_mask, given the same arguments, hides keys 1 and 2.

Not reached through create_causal_mask with transformers' caches (a DynamicCache always
has q_offset = kv_length - 1 for one query; a StaticCache decoding one token turns the
skip off), only by calling the public builder with an offset of its own.

Run: python docs/reproductions/f7_hf_sdpa_mask_one_query_ignores_its_offset.py
Exits 1 when the query sees a key past its position.
"""

import sys
import types

import torch
import transformers
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import eager_mask
from transformers.masking_utils import sdpa_mask

q = torch.zeros(1, 1, 1, 1, dtype=torch.float64)  # one query, at position 0 (q_offset=0)
k = torch.zeros(1, 1, 3, 1, dtype=torch.float64)  # keys at positions 0, 1, 2
v = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64).reshape(1, 1, 3, 1)
mask = sdpa_mask(batch_size=1, q_length=1, kv_length=3, q_offset=0)
additive = eager_mask(batch_size=1, q_length=1, kv_length=3, q_offset=0, dtype=torch.float64)
module = types.SimpleNamespace(num_key_value_groups=1, is_causal=True, training=False)
out, _ = sdpa_attention_forward(module, q, k, v, mask, scaling=1.0)
print(f"transformers {transformers.__version__}, torch {torch.__version__}")
print("sdpa_mask(1, q_length=1, kv_length=3, q_offset=0) ->", mask)
print("eager_mask, same arguments ->", additive[0, 0, 0].tolist())
print(f"sdpa_attention_forward output {out.item()} (causal at position 0 sees key 0: 1.0)")
sys.exit(0 if out.item() == 1.0 else 1)
