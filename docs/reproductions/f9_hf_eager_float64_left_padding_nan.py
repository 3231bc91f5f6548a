"""F9 at model level (docs/findings.md): a randomly initialised tiny Llama (2 layers, hidden
32, no weights downloaded) in float64 with attn_implementation="eager" and a left-padded
batch. The pad tokens' query rows hide every key; finfo(float64).min becomes -inf in eager's
float32 softmax, so those rows are NaN, and in the next layer the pad positions' NaN keys
and values reach the real tokens (0 * NaN is NaN in P @ V). SDPA, float32 and the unpadded
sequence are fine.

Run: python docs/reproductions/f9_hf_eager_float64_left_padding_nan.py
Exits 1 when a real token of the padded batch is NaN.
"""

import sys

import torch
import transformers
from transformers import LlamaConfig
from transformers import LlamaModel

print(f"transformers {transformers.__version__}, torch {torch.__version__}")
ids = torch.tensor([[0, 0, 5, 6, 7], [3, 4, 5, 6, 7]])  # sequence 0 left-padded by 2
attention_mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
nan_at_real_tokens = False
for dtype in (torch.float64, torch.float32):
    for implementation in ("eager", "sdpa"):
        torch.manual_seed(0)
        config = LlamaConfig(vocab_size=16, hidden_size=32, intermediate_size=64,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             attn_implementation=implementation)  # fmt: skip
        model = LlamaModel(config).to(dtype).eval()
        with torch.no_grad():
            padded = model(input_ids=ids, attention_mask=attention_mask).last_hidden_state
            alone = model(input_ids=ids[:1, 2:]).last_hidden_state
        real = padded[0, 2:]
        print(f"{str(dtype):14} {implementation:5}: NaN at the real tokens {real.isnan().any().item()},"
              f" max |padded - unpadded| {(real - alone[0]).abs().max().item():.3g}")  # fmt: skip
        nan_at_real_tokens |= bool(real.isnan().any())
sys.exit(1 if nan_at_real_tokens else 0)
