"""Mutant: a local window sees one key more on the left than its convention says.

What is broken: ``window=(left, right)`` hides key ``j`` from the query at position ``p`` only
when ``j < p - left - 1``, so every query sees ``left + 2 + right`` keys where the rulebook
says ``left + 1 + right`` (FlashAttention's ``window_size=(left, right)``, inclusive). Calls
without a window, and a window whose left side reaches key 0 anyway, are exactly impl's.

Real-world mistake: mixing the two conventions of the field. Hugging Face's
``sliding_window=W`` counts the query itself (``kv_idx > q_idx - W``: ``W`` keys), while
FlashAttention's ``window_size=(W, 0)`` sees ``W`` keys *before* it (``W + 1``); code that
passes one as the other is one key too wide (vllm#3385, transformers#39408, mlx-lm PR#390 and
onnxruntime PR#25927 are off by one this way or the other).
"""

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _OneKeyTooWide(impl.Attention):
    def window_hidden(self, call, rows, keys):
        if call.window is None or call.window[0] is None:
            return super().window_hidden(call, rows, keys)
        left, right = call.window
        # FAULT: a count that includes the query itself read as keys before it (W + 1 keys).
        return super().window_hidden(call._replace(window=(left + 1, right)), rows, keys)


MUTANT = Mutant(
    name="window_one_key_too_wide",
    description="window=(left, right) lets each query see left + 1 keys before it instead of "
    "left (one key too wide)",
    models="Hugging Face's sliding_window=W (W keys, itself included) passed as "
    "FlashAttention's window_size=(W, 0) (W + 1 keys): vllm#3385, transformers#39408",
    killed_by=("test_each_query_sees_exactly_its_keys", "test_windowed_output_matches_oracle"),
    steps=_OneKeyTooWide,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
