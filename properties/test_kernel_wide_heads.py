"""Head dims past 256 at kernel sizes: the sizes DeepSeek's multi-head latent attention decodes
with (a query-key dim of 576, 512 latent and 64 rotary, and a value dim of 512) and 320.

:data:`properties.sizes.HEAD_DIMS` stops at 256, the largest head dim FlashAttention builds;
kernels for wider heads split the head dim or the value dim into tiles of 64-256 and
accumulate them apart, and a fault past 256 (a chunk of the value dim accumulated in the
input dtype, a second rotary block dropped) shows only there. Two properties, judged like
the other kernel-sized ones (:func:`properties.kernel_checks.matches_reference`): values as
drawn, and values of one sign (where a sum kept in too little precision shows); their
lengths are cut so one (batch, K/V head) pair stays within the profile's ``max_kv``. One
file: the derandomized profiles seed each property from its file and function name.

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
from attnprops.properties.subject_dtypes import narrowest_first

SUBJECT = current_subject()
WIDE_DIMS = (512, 576, 320)  # MLA's value and query-key dims, and one between (shrinks to 512)


@st.composite
def wide_head_specs(draw, subject, **kwargs):
    """A decode, chunk or prefill whose value dim is past 256 and whose head dim is past 256 or a
    common one (64, 128), no mask; its lengths at most ``max_kv // (2 (D + Dv))`` (so two
    (batch, K/V head) pairs fit) and the profile's lengths (``max_kv`` grows with a raised
    decode length: prefill lengths went past ``ATTNPROPS_MAX_LEN``), and one batch element and
    K/V head when more would not fit. ``kwargs``: more of
    :func:`~properties.kernel_cases.kernel_specs`'."""
    head_dim = draw(st.sampled_from((*WIDE_DIMS, 64, 128)), label="head_dim")
    value_dim = draw(st.sampled_from(WIDE_DIMS), label="value_dim")
    lim = limits()
    longest = max(2, lim.max_kv // (2 * (head_dim + value_dim)))
    spec = draw(
        subject_kernel_specs(
            subject,
            shapes=("decode", "chunk", "prefill"),
            masks=False,
            max_len=min(longest, lim.max_len),
            max_decode_len=min(longest, lim.max_decode_len),
            **kwargs,
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


@pytest.mark.kernel_sized
@given(
    spec=wide_head_specs(
        SUBJECT, magnitudes=("positive",), dtypes=narrowest_first(SUBJECT.capabilities.dtypes)
    )
)
def test_kernel_sized_same_sign_sums_match_reference(subject, spec):
    """Every entry of the query, key and value in [0.25, 1] (the ``positive`` regime of
    :meth:`~properties.kernel_spec.KernelSpec.build`), the widths as above, the narrowest
    declared dtype first: sums of one sign, in which nothing cancels, so the rounding errors
    of a sum kept in too little precision (a 16-bit accumulator carried across key blocks,
    in a part of the value dim or all of it) stand against a bound that follows the result
    (a sum of one sign has relative condition number 1: Higham 2002, sec. 4.2); with mixed
    signs the bound follows ``sum |w_j v_j|`` and hides them. Judged as the property above."""
    matches_reference(subject, spec)
