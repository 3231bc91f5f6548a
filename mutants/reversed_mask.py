"""Mutant: the causal comparison is flipped, query ``i`` sees keys ``j >= query_start + i``.

What is broken: with ``is_causal=True`` a query attends to its own position and every LATER
key instead of every earlier one (``j >= start + i`` instead of ``j <= start + i``). Masks and
all input rules are impl's; only the direction of the causal comparison is reversed.

Real-world mistake: building the causal mask with ``np.triu`` instead of ``np.tril`` (or
``torch.triu(..., diagonal=1)`` used as the *keep* mask instead of the *hide* mask), a classic
in hand-written decoders; the 003 fault table lists "causal mask 方向" under "training loss too
low, generation collapses". The source lab (000) builds exactly this counterexample: on its
3-token example the weights on forbidden (future) positions total 0.872569.
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant


class _ReversedMask(impl.Attention):
    def causal_hidden(self, call, rows, keys):
        if not call.is_causal:
            return None
        i = np.arange(rows.start, rows.stop)[:, None]
        j = np.arange(keys.start, keys.stop)[None, :]
        # FAULT: visible where "j >= query_start + i" (the rule: "j <= query_start + i"): the
        # query sees the future, not the past.
        return j < call.query_start + i


MUTANT = Mutant(
    name="reversed_mask",
    description="causal visibility flipped: key j visible to query i iff j >= query_start + i",
    models="np.triu instead of np.tril (keep-mask vs hide-mask confusion) in a causal decoder; "
    "the source lab's reversed-mask counterexample (forbidden weight 0.872569)",
    killed_by=("test_hidden_keys_get_zero_weight", "test_seed_examples"),
    steps=_ReversedMask,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
