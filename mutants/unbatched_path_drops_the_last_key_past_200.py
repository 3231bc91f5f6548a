"""Mutant: unbatched ``(T, D)`` inputs past 200 keys lose their last key.

What is broken: a 2-D call (``query (Tq, D)``, ``key (Tk, D)``) with ``Tk > 200`` attends over
keys ``0 .. Tk - 2`` only (its mask's last column dropped with them); the 4-D path, and every
2-D call with at most 200 keys, is impl's. The small cases' 2-D draws (at most 6 keys) never
reach it; a batched call of the same rows is right.

Real-world mistake: a convenience entry point for unbatched inputs, written apart from the
batched kernel launch (``seqlen_k = k.shape[0] - 1`` taken for the last index and then used as
the length), tested on short sequences only.
"""

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _Steps(impl.Attention):
    def output(self, call, compute, block_size, lse=None):
        Tk = call.key.shape[2]
        if call.two_d and Tk > 200:
            mask = call.mask
            if mask is not None and mask.shape[-1] == Tk:
                mask = mask[..., :-1]
            call = call._replace(  # FAULT: the last key (and its mask column) dropped
                key=call.key[:, :, :-1], value=call.value[:, :, :-1], mask=mask
            )
        return super().output(call, compute, block_size, lse)


MUTANT = Mutant(
    name="unbatched_path_drops_the_last_key_past_200",
    description="2-D (unbatched) calls past 200 keys attend over all keys but the last",
    models="a separate unbatched entry point that takes the last key index for the length",
    killed_by=(
        "test_kernel_sized_batch_and_heads_independent",
        "test_kernel_sized_unbatched_call_equals_batched",
    ),
    steps=_Steps,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
