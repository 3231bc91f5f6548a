"""Mutant: with packed documents, the tiled kernel drops the local window.

What is broken: from 128 keys on, a call with ``segment_ids`` (the varlen path: documents
packed into one row) builds each tile's visibility from the mask, causality and the
documents, leaving out the window: every query sees its whole document (as far as causality
lets it) instead of the window's keys of it. Right without documents, without a window, when
every document is shorter than the window, and on every call with fewer than 128 keys (impl
runs there).

Real-world mistake: a packed-sequence (varlen) path added to a kernel as a separate code
path whose mask is built from the document boundaries alone, while the padded path applies
the sliding window: packed training of a sliding-window model (Mistral's, Gemma 2's local
layers) then attends past its window, silently, only on the packed path.
"""

from attnprops.mutants import Mutant
from attnprops.mutants._tiled import TILED_CAPABILITIES
from attnprops.mutants._tiled import TiledKernel
from attnprops.mutants._tiled import seen_as

ATTNPROPS_CAPABILITIES = {**TILED_CAPABILITIES, "segment_ids": True, "window": "offsets"}


class _Kernel(TiledKernel):
    q_tile = 64
    k_tile = 128
    min_key_len = 128

    def tiled_output(self, problem):
        if problem.segments is not None and problem.window is not None:
            problem = seen_as(problem, window=None)  # FAULT: the documents replace the window
        return super().tiled_output(problem)


MUTANT = Mutant(
    name="window_dropped_on_the_varlen_path",
    description="tiled kernel (from 128 keys on) drops the local window when the call has "
    "segment_ids: each query sees its whole document",
    models="a packed-sequence (varlen) path whose mask is built from the document boundaries "
    "alone, without the sliding window the padded path applies",
    killed_by=("test_kernel_sized_documents_match_reference",),
    steps=_Kernel,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
