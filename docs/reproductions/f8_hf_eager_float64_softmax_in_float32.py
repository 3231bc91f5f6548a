"""F8 (docs/findings.md): transformers' eager_attention_forward (Llama) computes the
softmax with dtype=torch.float32 whatever the input dtype, so float64 inputs get float32
weights: three equal scores give float32(1/3), and the seed-003 example of the suite is off
in the 8th digit, some 10^7 times float64's rounding (huggingface/transformers#48459
reports the same line in GPT-NeoX).

Run: python docs/reproductions/f8_hf_eager_float64_softmax_in_float32.py
Exits 1 when the float64 weights are not float64's.
"""

import sys
import types

import torch
import transformers
from transformers.masking_utils import eager_mask
from transformers.models.llama.modeling_llama import eager_attention_forward

module = types.SimpleNamespace(num_key_value_groups=1, is_causal=True, training=False)
q = torch.zeros(1, 1, 1, 1, dtype=torch.float64)
k = torch.zeros(1, 1, 3, 1, dtype=torch.float64)
_, weights = eager_attention_forward(module, q, k, k, None, scaling=1.0)
print(f"transformers {transformers.__version__}, torch {torch.__version__}")
print(f"three equal float64 scores: weight {weights[0, 0, 0, 0].item()!r}, 1/3 = {1 / 3!r}")
# the suite's seed-003 example: 2 tokens, causal, D = 2 (docs/findings.md F1)
q = k = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64).reshape(1, 1, 2, 2)
v = torch.tensor([[2.0, 0.0], [0.0, 4.0]], dtype=torch.float64).reshape(1, 1, 2, 2)
mask = eager_mask(batch_size=1, q_length=2, kv_length=2, dtype=torch.float64)
out, _ = eager_attention_forward(module, q, k, v, mask, scaling=2**-0.5)
e = torch.exp(torch.tensor(2**-0.5, dtype=torch.float64))  # row 1: weights 1/(1+e), e/(1+e)
exact = [2 / (1 + e.item()), 4 * e.item() / (1 + e.item())]
print(f"seed 003 row 1: eager {out[0, 1, 0].tolist()}, float64 {exact}")
sys.exit(0 if weights[0, 0, 0, 0].item() == 1 / 3 else 1)
