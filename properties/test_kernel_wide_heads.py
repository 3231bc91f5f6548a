"""Head dims past 256 at kernel sizes: the sizes DeepSeek's multi-head latent attention decodes
with (a query-key dim of 576, 512 latent and 64 rotary, and a value dim of 512) and 320.

:data:`properties.sizes.HEAD_DIMS` stops at 256, the largest head dim FlashAttention builds;
kernels for wider heads split the head dim or the value dim into tiles of 64-256 and
accumulate them apart, and a fault past 256 (a chunk of the value dim accumulated in the
input dtype, a second rotary block dropped) shows only there. One property, judged like the
other kernel-sized ones (:func:`properties.kernel_checks.matches_reference`); its lengths are
cut so one (batch, K/V head) pair stays within the profile's ``max_kv``. One file: the
derandomized profiles seed each property from its file and function name.

Shape legend: query (B, Hq, Tq, D), key (B, Hkv, Tk, D), value (B, Hkv, Tk, Dv).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnprops.properties.kernel_cases import subject_kernel_specs
from attnprops.properties.kernel_checks import matches_reference
from attnprops.properties.plugin import current_subject
from attnprops.properties.sizes import limits

SUBJECT = current_subject()
WIDE_DIMS = (512, 576, 320)  # MLA's value and query-key dims, and one between (shrinks to 512)


@st.composite
def wide_head_specs(draw, subject):
    """A decode, chunk or prefill whose value dim is past 256 and whose head dim is past 256
    or a common one (64, 128), no mask; its lengths at most ``max_kv // (2 (D + Dv))`` (so
    two (batch, K/V head) pairs fit) and one batch element and K/V head when more would not
    fit."""
    head_dim = draw(st.sampled_from((*WIDE_DIMS, 64, 128)), label="head_dim")
    value_dim = draw(st.sampled_from(WIDE_DIMS), label="value_dim")
    lim = limits()
    longest = max(2, lim.max_kv // (2 * (head_dim + value_dim)))
    spec = draw(
        subject_kernel_specs(
            subject,
            shapes=("decode", "chunk", "prefill"),
            masks=False,
            max_len=longest,
            max_decode_len=longest,
        )
    )
    if spec.batch * spec.num_kv_heads * spec.key_len * (head_dim + value_dim) > lim.max_kv:
        group = spec.num_heads // spec.num_kv_heads
        spec = spec._replace(batch=1, num_kv_heads=1, num_heads=group)
    return spec._replace(head_dim=head_dim, value_dim=value_dim)


@pytest.mark.kernel_sized
@given(spec=wide_head_specs(SUBJECT))
def test_kernel_sized_wide_heads_match_reference(subject, spec):
    """Head dims 576, 512 or 320 (or 64, 128) with value dims 512, 576 or 320 (multi-head
    latent attention's decode): every row within the agreement bound of a float64
    evaluation, the rows at tile boundaries within the exact result's per-element bound (see
    matches_reference). A kernel that drops, or accumulates in the input dtype, the part of
    a head past 256 fails here."""
    matches_reference(subject, spec)
