"""Mutant: in the self-attention case the output is indexed by keys: ``weights^T @ V``.

What is broken: when ``Tq == Tk`` (self-attention) the weighted sum contracts the weights'
QUERY axis with the values' position axis, ``out[i] = sum_j w[j, i] * v[j]``: output row ``i``
is built from column ``i`` of the weights. NumPy only accepts this contraction when the weight
matrix is square, so cross-attention (``Tq != Tk``) goes through the correct path. Scores,
weights and validation are impl's; ``attention_weights`` is right.

Real-world mistake: the multiplication direction of ``weights`` and ``V``: writing
``einsum('...ij,...id->...jd', w, v)`` / ``w.T @ v`` (003 fault table: "输出 token 数变成 Tk →
weights 与 V 的乘法方向"; in self-attention the token count does not change, so nothing
complains). With a causal mask a query then reads FUTURE values.
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant


class _WeightsTransposed(impl.Attention):
    def weighted_values(self, weights, call, compute):
        B, Hq, Tq, Tk = call.shape
        if Tq != Tk:
            return super().weighted_values(weights, call, compute)
        Hkv, Dv = call.key.shape[1], call.value.shape[3]
        grouped = weights.reshape(B, Hkv, Hq // Hkv, Tq, Tk)
        value = call.value.astype(compute, copy=False)[:, :, None]  # (B, Hkv, 1, Tk, Dv)
        # FAULT: indices of the weights swapped: out[i] = sum_j w[j, i] v[j].
        output = np.einsum("...ji,...jd->...id", grouped, value)
        return output.reshape(B, Hq, Tq, Dv)


MUTANT = Mutant(
    name="weights_times_v_transposed",
    description="for Tq == Tk the output is weights^T @ V (output indexed by keys): "
    "out[i] = sum_j w[j, i] v[j]",
    models="wrong multiplication direction of weights and V (003 fault table: 'output token "
    "count becomes Tk'); invisible in self-attention where Tq == Tk",
    killed_by=("test_single_visible_key_returns_its_value", "test_output_matches_oracle"),
    steps=_WeightsTransposed,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
