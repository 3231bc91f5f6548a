"""Mutant: the local window is applied only when an ``attn_mask`` is given.

What is broken: the window is folded into the mask, and a call without a mask takes the
unmasked path, which sees every key (causality is still applied). With any mask the window
is impl's; rows that the window leaves without a key still raise (the rule is checked by
position, impl's).

Real-world mistake: ``jax.nn.dot_product_attention`` ignored ``local_window_size`` when no
mask was passed (jax#32300); more generally, a window implemented as one more mask that only
the masked code path reads.
"""

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _WindowIgnoredWithoutMask(impl.Attention):
    def window_hidden(self, call, rows, keys):
        if call.mask is None:
            return None  # FAULT: the unmasked path never reads the window
        return super().window_hidden(call, rows, keys)


MUTANT = Mutant(
    name="window_ignored_without_mask",
    description="window=(left, right) is ignored when attn_mask is None",
    models="a window folded into the mask, so the unmasked path sees every key (jax#32300: "
    "local_window_size ignored without a mask)",
    killed_by=("test_each_query_sees_exactly_its_keys", "test_windowed_output_matches_oracle"),
    steps=_WindowIgnoredWithoutMask,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
