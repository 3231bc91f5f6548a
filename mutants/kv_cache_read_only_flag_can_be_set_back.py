"""Mutant: the KV cache's ``keys``/``values`` are views marked read-only that a caller can
make writable again.

What is broken: ``keys`` and ``values`` are the slices ``buffer[:, :, :T]`` of the cache's
storage with ``flags.writeable = False`` set on the slice. NumPy lets a caller set the flag
back on a view whose base is writable, and a write through it then changes the cached keys.
Everything the cache computes is exact.

Real-world mistake: "returning a read-only view" by clearing the flag on a slice of a
writable buffer (the same slip as a bfloat16 view of a writable integer view: a PyTorch
tensor's ``numpy()`` is writable). impl uses ``as_strided(..., writeable=False)``, whose flag
cannot be set back.
"""

from attnprops import impl
from attnprops.mutants import Mutant


class KVCache(impl.KVCache):
    """impl's cache whose views keep a writable base."""

    def _read_only(self, buffer):
        view = buffer[:, :, : len(self)]
        view.flags.writeable = False  # FAULT: the base stays writable; the flag can be set back
        return view


MUTANT = Mutant(
    name="kv_cache_read_only_flag_can_be_set_back",
    description="KV cache whose keys/values are slices of its storage marked read-only on "
    "the slice only (a caller can set the flag back and write into the cache)",
    models="a 'read-only view' made by clearing the flag of a slice of a writable buffer",
    killed_by=("test_cache_cannot_be_written_through_its_keys_and_values",),
    cache=KVCache,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
