"""Mutant: the blocked path drops the last key block when ``block_size`` does not divide Tk.

What is broken: the key loop runs over ``Tk // block_size`` full blocks (floor instead of
ceiling), so the last ``Tk % block_size`` keys never enter the online softmax; when
``block_size > Tk`` no block runs at all. The output is right whenever ``block_size`` divides
the number of keys the queries can see, and otherwise is the attention over a prefix of the
keys (NaN for a row whose visible keys all lie in the dropped tail). Validation, masking and the
dense path are impl's.

Real-world mistake: ``num_blocks = seq_len // BLOCK_N`` instead of ``cdiv(seq_len, BLOCK_N)``
in a tiled attention kernel, tested only with sequence lengths that are multiples of the tile.
"""

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = {"block_size": True}


class _LastPartialBlockDropped(impl.Attention):
    def key_block_starts(self, stop, block_size):
        return range(0, stop // block_size * block_size, block_size)  # FAULT: floor(stop / n)


MUTANT = Mutant(
    name="online_softmax_last_partial_block_dropped",
    description="blocked online softmax: only Tk // block_size key blocks are processed, so a "
    "partial last block (or every key, when block_size > Tk) is ignored",
    models="`num_blocks = seq_len // BLOCK_N` instead of a ceiling division in a tiled "
    "attention kernel",
    killed_by=(
        "test_single_visible_key_returns_its_value",
        "test_output_matches_oracle",
        "test_key_permutation_invariance",
    ),
    steps=_LastPartialBlockDropped,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
