"""Two laws at kernel sizes that need more than one call shape per example: grouped K/V read
by every group size on one long decode, and a local window equal to its own mask on every row.

A kernel's decode path (split-KV, FlashAttention 3's packed GQA) maps query heads to K/V heads
for the group it was tuned for; one group per example
(``test_kernel_sizes.py::test_kernel_sized_gqa_equals_repeated_kv``) seldom meets a long decode
with a given group. A window rule that slips in one tile shows on that tile's rows, which the
reference checks (on the rows at tile boundaries) may not visit. Both compare two calls of the
subject within twice the agreement bound (:func:`properties.kernel_checks.agree`); no reference.
One file: the derandomized profiles seed each property from its file and function name.

Shape legend: query (B, Hq, Tq, D), key (B, Hkv, Tk, D), value (B, Hkv, Tk, Dv).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import note

from attnprops.oracle.rules import window_visible
from attnprops.properties._support import attend
from attnprops.properties._support import repeat_kv
from attnprops.properties.kernel_cases import GROUPS
from attnprops.properties.kernel_cases import subject_kernel_specs
from attnprops.properties.kernel_checks import agree
from attnprops.properties.plugin import current_subject
from attnprops.properties.sizes import limits
from attnprops.properties.variant_draws import with_keys_hidden

SUBJECT = current_subject()


@pytest.mark.kernel_sized
@given(spec=subject_kernel_specs(SUBJECT, shapes=("decode",), grouped=True))
def test_kernel_sized_decode_reads_each_groups_kv_head(subject, spec):
    """A decode against a long cache (where kernels split the keys across workers, and
    FlashAttention 3 folds a group's query heads into one tile) with two K/V heads, once for
    every group of 2 to 8 query heads the score budget allows: grouped K/V equals K/V
    repeated to the query heads. A head mapping written for the group a decode path was
    tuned for (``h >> 2`` for groups of 4) fails at the others, which one group per example
    (``test_kernel_sized_gqa_equals_repeated_kv``) reaches on a long decode seldom."""
    lim = limits()
    checked = []
    for group in GROUPS[1:]:
        heads = spec.num_kv_heads * group
        if spec.batch * heads * spec.query_len * spec.key_len > lim.max_scores:
            continue
        case = spec._replace(num_heads=heads).build()
        repeated = case._replace(key=repeat_kv(case.key, group), value=repeat_kv(case.value, group))
        agree(
            subject,
            case,
            attend(subject, case, f"grouped K/V, G={group}"),
            attend(subject, repeated, f"K/V repeated to Hq={heads}"),
            what=f"GQA (G={group}, Hkv={spec.num_kv_heads}, Tk={spec.key_len}) vs K/V repeated",
        )
        checked.append(group)
    note(f"groups checked: {checked}")


@pytest.mark.requires("window")
@pytest.mark.kernel_sized
@given(spec=subject_kernel_specs(SUBJECT, shapes=("prefill",), windows=True))
def test_kernel_sized_window_equals_its_mask(subject, spec):
    """A local window equals the bool mask of the keys it keeps (joined with the call's own
    mask: AND for a bool one, ``-inf`` outside the window for a float one), on every row, as
    drawn and, where the subject's windows allow, not causal (so a window's right side is
    always tried): a kernel whose window rule is skipped or
    slips in one tile (a ragged last query block on a template branch without the local
    mask; a key block the window starts inside) fails on that tile's rows, which the
    reference checks (``test_kernel_sized_window_matches_reference``, on the rows at
    tile boundaries) may not visit."""
    base = spec.build()
    Tq, Tk = base.query.shape[2], base.key.shape[2]
    causal_only = subject.capabilities.window == "sliding_window"
    for is_causal in sorted({spec.is_causal, causal_only}):
        case = base._replace(is_causal=is_causal)
        keep = window_visible(case.window, case.start, Tq, Tk)
        masked = with_keys_hidden(case._replace(window=None), ~keep, "the window as a mask")
        agree(
            subject,
            case,
            attend(subject, case, f"window {case.window}, is_causal={is_causal}"),
            attend(subject, masked, "the window as a bool mask"),
            what=f"window {case.window} vs its mask (is_causal={is_causal}, T={Tq})",
        )
