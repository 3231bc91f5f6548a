"""Mutant: ``cached_attention`` does not roll the cache back when the attention step fails.

What is broken: the new K/V are appended (atomically, by impl's ``KVCache``), then the
attention over the cache runs; if it raises (a mask of the wrong shape, a query whose heads do
not fit, an overflowing score, ``Tnew`` mismatch caught late) the error propagates but the
appended positions stay in the cache, so the next decode step sees tokens that were never
processed and positions are off by ``Tnew``. Successful calls are exactly impl's.

Real-world mistake: Hugging Face-style ``past_key_value.update(...)`` done before the attention
kernel, with no undo on failure (a retried request then decodes against a corrupted cache).
The source lab (000, section 5): after a failed append the existing K/V must stay unchanged.
"""

from attnprops import impl
from attnprops.mutants import Mutant


class KVCache(impl.KVCache):
    """impl's cache that cannot be rolled back."""

    def _restore(self, snapshot) -> None:
        # FAULT: no restore: a cached_attention that fails after its append keeps the append.
        return None


MUTANT = Mutant(
    name="no_rollback_on_failed_attention",
    description="cached_attention keeps the appended K/V when the attention step raises (no "
    "rollback)",
    models="cache update before the attention kernel with no undo on failure (HF-style "
    "past_key_value.update then attention)",
    killed_by=("test_failed_cached_attention_rolls_back",),
    cache=KVCache,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
