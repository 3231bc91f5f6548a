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

from attnprops.impl import KVCache, attention_weights, kv_cache_bytes
from attnprops.impl.attention import _blocked_output as _impl_blocked_output
from attnprops.impl.attention import attention as _impl_attention
from attnprops.impl.kv_cache import cached_attention as _impl_cached_attention
from attnprops.mutants import Mutant
from attnprops.mutants._common import rebind

ATTNPROPS_CAPABILITIES = {"block_size": True}


def _key_block_starts(stop, block_size):
    return range(0, stop // block_size * block_size, block_size)  # FAULT: floor(stop / n) blocks


_blocked_output = rebind(_impl_blocked_output, _key_block_starts=_key_block_starts)
attention = rebind(_impl_attention, _blocked_output=_blocked_output)
cached_attention = rebind(_impl_cached_attention, attention=attention)

__all__ = ["KVCache", "attention", "attention_weights", "cached_attention", "kv_cache_bytes"]

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
)
