"""Mutant: decode with query groups of 8 past 4096 keys maps query head h to K/V head
``(h // 4) % Hkv``.

What is broken: when ``Hq / Hkv == 8``, ``Tq <= 64`` and ``Tk > 4096`` (the split-KV decode
path), each query head reads K/V head ``(h // 4) % Hkv`` instead of ``h // 8``. With one K/V
head, another group size, a prefill or up to 4096 keys: exact.

Real-world mistake: the split path's head mapping hard-coded for the group of 4 it was first
tuned for (``kv_head = q_head >> 2``), taken only by long decodes of GQA-8 models.
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _Steps(impl.Attention):
    def output(self, call, compute, block_size, lse=None):
        B, Hq, Tq, Tk = call.shape
        Hkv = call.key.shape[1]
        if Hq == 8 * Hkv and Hkv > 1 and Tq <= 64 and Tk > 4096:
            heads = (np.arange(Hq) // 4) % Hkv  # FAULT: group of 4 assumed
            call = call._replace(
                key=call.key[:, heads], value=call.value[:, heads]
            )  # now MHA over the wrongly chosen heads
        return super().output(call, compute, block_size, lse)


MUTANT = Mutant(
    name="gqa8_split_decode_reads_head_by_4",
    description="GQA-8 decode past 4096 keys reads K/V head (h // 4) % Hkv",
    models="a split-KV head mapping hard-coded for groups of 4",
    killed_by=("test_kernel_sized_decode_reads_each_groups_kv_head",),
    steps=_Steps,
)
__all__ = MUTANT.export(globals())
