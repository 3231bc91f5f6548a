"""Mutant: grouped-query attention maps query head ``h`` to K/V head ``h % Hkv``, not ``h // G``.

What is broken: K/V are expanded to the ``Hq`` query heads by TILING
(``np.tile(key, (1, G, 1, 1))``: heads ``0, 1, .., Hkv-1, 0, 1, ..``) instead of repeating each
head ``G`` times (``np.repeat(key, G, axis=1)``: ``0, 0, .., 1, 1, ..``). Multi-head
(``G == 1``) and multi-query (``Hkv == 1``) attention are unaffected; with ``1 < Hkv < Hq``
most query heads read another group's K/V. The cache still stores ``Hkv`` heads; validation is
impl's.

Real-world mistake: ``key.repeat(1, G, 1, 1)`` (PyTorch's ``repeat`` tiles) where
``repeat_interleave(G, dim=1)`` / Llama's ``repeat_kv`` is meant, or ``jnp.tile`` for
``jnp.repeat``. 003 cheat sheet: query head h reads K/V head g(h).
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant


class _TiledKV(impl.Attention):
    def validate(self, query, key, value, options, **checks):
        call = super().validate(query, key, value, options, **checks)
        reps = (1, call.query.shape[1] // call.key.shape[1], 1, 1)
        # FAULT: np.tile (h % Hkv) where np.repeat(..., G, axis=1) (h // G) is meant.
        expanded = {"key": np.tile(call.key, reps)}
        if call.value is not None:
            expanded["value"] = np.tile(call.value, reps)
        return call._replace(**expanded)


MUTANT = Mutant(
    name="gqa_wrong_head",
    description="GQA: query head h reads K/V head h % Hkv (K/V tiled) instead of h // G "
    "(K/V repeated)",
    models="tensor.repeat(1, G, 1, 1) (tiles) where repeat_interleave / repeat_kv is meant",
    killed_by=("test_gqa_equals_repeated_kv", "test_output_matches_oracle"),
    steps=_TiledKV,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
