"""F10 (docs/findings.md): transformers' eager_attention_forward computes q k^T * scaling in
the input dtype; in float16 a score past 65504 is inf and the float32 softmax of its row is
NaN, where SDPA (scores in float32 on the CPU) returns the value. The suite's shrunk case:
one query 140, one key 156, scaling 3: 140 * 156 * 3 = 65520, which rounds to inf in float16
(huggingface/transformers#33317 and QwenLM/Qwen3#910 report it in real models).

Run: python docs/reproductions/f10_hf_eager_float16_scores_overflow.py
Exits 1 when eager's output is NaN.
"""

import sys
import types

import torch
import transformers
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.models.llama.modeling_llama import eager_attention_forward

module = types.SimpleNamespace(num_key_value_groups=1, is_causal=False, training=False)
q = torch.tensor([140.0], dtype=torch.float16).reshape(1, 1, 1, 1)
k = torch.tensor([156.0], dtype=torch.float16).reshape(1, 1, 1, 1)
v = torch.tensor([0.5], dtype=torch.float16).reshape(1, 1, 1, 1)
eager, weights = eager_attention_forward(module, q, k, v, None, scaling=3.0)
sdpa, _ = sdpa_attention_forward(module, q, k, v, None, scaling=3.0)
print(f"transformers {transformers.__version__}, torch {torch.__version__}")
print(f"float16, one key, score 140 * 156 * 3 = 65520: eager weights {weights.item()},"
      f" eager output {eager.item()}, sdpa output {sdpa.item()} (the value: 0.5)")  # fmt: skip
sys.exit(1 if eager.isnan().any() else 0)
