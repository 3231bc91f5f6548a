"""Mutant: a 2-D mask with ``B`` rows is read as a ``(B, Tk)`` key-padding mask.

What is broken: the rulebook broadcasts masks by NumPy rules, so a 2-D mask ``(Tq, Tk)`` (or
``(1, Tk)``) applies to every batch element and head, row ``i`` to query ``i``. This subject
guesses: when a 2-D mask's first axis has the batch size ``B > 1`` (which the rules allow only
when ``B == Tq``), it takes it as PyTorch's key-padding mask ``(B, Tk)`` and reshapes it to
``(B, 1, 1, Tk)``: batch element ``b`` uses row ``b`` for all its queries. The expanded
``(B, Hq, Tq, Tk)`` form of the same mask is handled correctly. Validation is impl's; rows the
misreading leaves empty come out as zeros.

Real-world mistake: PyTorch ``nn.MultiheadAttention`` takes a 2-D ``attn_mask (L, S)`` AND a
2-D ``key_padding_mask (N, S)``; code that accepts "a mask" and dispatches on its shape mixes
them up when ``N == L``. 003 cheat sheet: key padding ``[B,Tk]`` must be arranged as
``[B,1,1,Tk]``; "不要只看 mask 自身 shape；要写出它与 [B,Hq,Tq,Tk] 对齐后的每个轴".
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant


class _MaskReadAsPadding(impl.Attention):
    def validate(self, query, key, value, options, **checks):
        call = super().validate(query, key, value, options, **checks)
        mask = options["attn_mask"]
        batch = call.query.shape[0]
        if (
            call.two_d
            or not isinstance(mask, np.ndarray)
            or mask.ndim != 2
            or batch == 1
            or mask.shape[0] != batch
        ):
            return call
        # FAULT: (B, Tk) key-padding layout assumed: row b -> batch b, all queries.
        padding = {**options, "attn_mask": mask[:, None, None, :]}
        return super().validate(query, key, value, padding, **checks)


MUTANT = Mutant(
    name="mask_2d_read_as_key_padding",
    description="a 2-D attn_mask with B rows (B == Tq > 1) is taken as a (B, Tk) key-padding "
    "mask: batch b uses row b for every query",
    models="nn.MultiheadAttention's 2-D attn_mask (L, S) vs key_padding_mask (N, S) mixed up by "
    "shape-based dispatch when N == L",
    killed_by=(
        "test_two_d_mask_applies_to_every_batch_element",
        "test_broadcast_mask_equals_expanded",
    ),
    steps=_MaskReadAsPadding,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
