"""Query heads past 16 at kernel sizes: a decode or a chunk with 17 to 128 query heads over 1,
2, 4 or 8 K/V heads or one each (multi-head attention), each query head's own sink, ALiBi slope
and mask where the subject declares them.

The other kernel-sized properties draw one or two K/V heads and groups up to 8, so at most 16
query heads; the models people serve have more (Llama 3 70B: 64 over 8; Falcon 7B: 71 over
one; DeepSeek V3: 128). A kernel lays the heads out in a grid, a per-head parameter (sinks,
slopes, per-head scales) in a table, and a head index that wraps at the count it was written
for (16 heads of a block, a table of 16 sinks) is right on every call the other properties
draw. The output is judged like theirs (:func:`properties.kernel_checks.matches_reference`:
every row of every head against a float64 evaluation), the rows at tile boundaries against the
exact result on the heads next to 16, 32 and 64 and the ends
(:func:`~properties.reference_rows.boundary_heads`: the exact reference costs per head).
One file: the derandomized profiles seed each property from its file and function name.

Shape legend: query (B, Hq, Tq, D), key (B, Hkv, Tk, D), value (B, Hkv, Tk, Dv).
"""

from __future__ import annotations

import pytest
from hypothesis import given

from attnprops.properties.kernel_cases import many_head_specs
from attnprops.properties.kernel_checks import matches_reference
from attnprops.properties.plugin import current_subject
from attnprops.properties.reference_rows import boundary_heads

SUBJECT = current_subject()


@pytest.mark.kernel_sized
@given(spec=many_head_specs(SUBJECT))
def test_kernel_sized_many_heads_match_reference(subject, spec):
    """17 to 128 query heads over 1 to 8 K/V heads or one each, a decode against a long cache
    or a chunk (the serving calls of the models with that many heads), each head's sink, slope
    and mask where declared: every query head's output is its own (see matches_reference). A head index, or
    a table of per-head parameters, that wraps at 16 or 32 heads, or a grid that leaves the
    heads past its size unwritten, fails here."""
    matches_reference(subject, spec, heads=boundary_heads(spec.num_heads))
