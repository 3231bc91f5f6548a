"""Mutant: ``key.T`` on the 4-D key (reverses ALL axes), then reshaped to the expected shape.

What is broken: the scores are computed as ``query @ key.T.reshape(B, Hkv, D, Tk)``. For a 2-D
key ``.T`` is the right transpose, and with ``B == Hkv == 1`` the reshape happens to restore the
right layout too, so the 2-D/single-head results are exact. For ``B > 1`` or ``Hkv > 1``
``key.T`` has shape ``(D, Tk, Hkv, B)``; reshaping it (instead of transposing) silently mixes
batch elements, heads, positions and features. The shapes are right, the values finite.

Real-world mistake: 2-D prototype code ``Q @ K.T`` carried over to batched multi-head tensors,
then "fixed" with a reshape when the matmul complained. The source lab (000, section 2) warns
"NumPy 的 K.T 会反转四维张量的全部轴，应该使用 K.swapaxes(-1, -2)"; the 003 fault table's
first row is "K 是否转置最后两轴".
"""

from attnprops import impl
from attnprops.mutants import Mutant


class _FullTranspose(impl.Attention):
    def key_transposed(self, call, compute):
        B, Hkv, Tk, D = call.key.shape
        # FAULT: .T reverses all four axes -> (D, Tk, Hkv, B); the reshape does not undo that.
        return call.key.astype(compute, copy=False).T.reshape(B, Hkv, D, Tk)[:, :, None]


MUTANT = Mutant(
    name="full_transpose",
    description="scores use key.T (all axes reversed) reshaped to (B, Hkv, D, Tk) instead of "
    "key.swapaxes(-1, -2); right only for 2-D inputs or B == Hkv == 1",
    models="2-D prototype `Q @ K.T` carried over to (B, H, T, D) tensors and patched with a "
    "reshape (source lab section 2: use K.swapaxes(-1, -2), not K.T)",
    killed_by=("test_output_matches_oracle", "test_batch_and_heads_independent"),
    steps=_FullTranspose,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
