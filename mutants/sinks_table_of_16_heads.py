"""Mutant: the tiled kernel reads each query head's sink from a table of 16, ``sinks[h % 16]``.

What is broken: from 256 keys on, the kernel (query tiles of 64 rows, key tiles of 128) stages
the sinks in a 16-entry table and reads query head ``h``'s from entry ``h % 16``: heads 16 and
on take the sink of a head 16, 32, ... below them. Right with at most 16 query heads (every
other property's draws, and the models the kernel was first tuned on), without sinks, and on
every call with fewer than 256 keys (impl runs there).

Real-world mistake: a per-head parameter staged in a fixed-size table (shared memory,
constant memory, a register array sized for one block of heads) and indexed with the head
number modulo its size, kept when the kernel met models with more heads (gpt-oss-120b has 64
query heads, each with its own sink).
"""

import numpy as np

from attnprops.mutants import Mutant
from attnprops.mutants._tiled import TILED_CAPABILITIES
from attnprops.mutants._tiled import TiledKernel

ATTNPROPS_CAPABILITIES = TILED_CAPABILITIES
TABLE = 16  # sink entries the table holds


class _Kernel(TiledKernel):
    q_tile = 64
    k_tile = 128
    min_key_len = 256

    def sink_part(self, problem, rows, compute):
        if problem.sinks is not None:
            heads = np.arange(problem.num_heads) % TABLE  # FAULT: head h reads entry h % 16
            problem = problem.replace(sinks=problem.sinks[heads])
        return super().sink_part(problem, rows, compute)


MUTANT = Mutant(
    name="sinks_table_of_16_heads",
    description="tiled kernel (from 256 keys on) reads query head h's sink from entry h % 16 "
    "of a 16-entry table: heads past 16 take another head's sink",
    models="a per-head parameter staged in a fixed table of 16 entries and indexed modulo "
    "its size, met by a model with more heads",
    killed_by=("test_kernel_sized_many_heads_match_reference",),
    steps=_Kernel,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
