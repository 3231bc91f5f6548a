"""F9 (docs/findings.md): transformers hides a key by adding torch.finfo(dtype).min to its
score (masking_utils.eager_mask; create_position_bias_mask in integrations/sdpa_attention.py
where a float bias meets the causal mask), not -inf. Four consequences, each shown here
directly against transformers (no attnprops code):

1. eager, float64: a row whose every key is hidden is NaN (finfo(float64).min is -inf once
   eager_attention_forward casts the scores to float32 for its softmax).
2. eager, float32: the same row is a softmax over s_j + min: the mean of the hidden values.
3. eager, float16: a hidden key with a positive score s gets s - 65504, more than a visible
   key's score below that: the query at position 0 (score -30000 with key 0) takes the
   value of the future key 1 (score +40000).
4. SDPA with a position bias: causality hidden with finfo.min next to a bias of -inf: row 0
   (bias [-inf, 0], key 1 hidden by causality) attends to the causally hidden key 1.

Run: python docs/reproductions/f9_hf_finfo_min_does_not_hide.py
Exits 1 when any of the four rows is not what hiding means (0 weight on hidden keys).
"""

import sys
import types

import torch
import transformers
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import eager_mask
from transformers.models.llama.modeling_llama import eager_attention_forward

module = types.SimpleNamespace(num_key_value_groups=1, is_causal=True, training=False)
print(f"transformers {transformers.__version__}, torch {torch.__version__}")
wrong = []
v = torch.tensor([1.0, 3.0]).reshape(1, 1, 2, 1)
for dtype in (torch.float64, torch.float32):
    padding = torch.tensor([[False, False]])  # the 2-D attention_mask: both keys padding
    mask = eager_mask(batch_size=1, q_length=1, kv_length=2, q_offset=1, attention_mask=padding,
                      dtype=dtype)  # fmt: skip
    zeros = torch.zeros(1, 1, 1, 1, dtype=dtype)
    out, _ = eager_attention_forward(module, zeros, zeros.expand(1, 1, 2, 1), v.to(dtype), mask,
                                     scaling=1.0)  # fmt: skip
    print(f"1-2. eager {dtype}, every key hidden (values 1, 3): output {out.item()}")
    wrong.append(not out.isfinite().all() or out.item() != 0.0)

q = torch.tensor([200.0], dtype=torch.float16).reshape(1, 1, 1, 1)
k = torch.tensor([-150.0, 200.0], dtype=torch.float16).reshape(1, 1, 2, 1)
v16 = torch.tensor([0.0, 1.0], dtype=torch.float16).reshape(1, 1, 2, 1)
mask = eager_mask(batch_size=1, q_length=1, kv_length=2, q_offset=0, dtype=torch.float16)
out, weights = eager_attention_forward(module, q, k, v16, mask, scaling=1.0)
print(f"3. eager float16, query at 0, scores [-30000, 40000 hidden]: mask {mask[0, 0, 0].tolist()},"
      f" weights {weights[0, 0, 0].tolist()}, output {out.item()} (key 0's value: 0.0)")  # fmt: skip
wrong.append(out.item() != 0.0)

q = torch.zeros(1, 1, 2, 1, dtype=torch.float64)
bias = torch.tensor([[-float("inf"), 0.0], [0.0, 0.0]], dtype=torch.float64).reshape(1, 1, 2, 2)
out, _ = sdpa_attention_forward(module, q, q, torch.tensor([0.0, 1.0], dtype=torch.float64)
                                .reshape(1, 1, 2, 1), None, scaling=1.0, position_bias=bias)  # fmt: skip
print(f"4. sdpa with position_bias [-inf, 0], key 1 causally hidden: row 0 output {out[0, 0].item()}"
      " (no visible key: SDPA's zeros would be 0.0)")  # fmt: skip
wrong.append(out[0, 0].item() != 0.0)
sys.exit(1 if any(wrong) else 0)
