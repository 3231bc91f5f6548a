"""Mutant: from 200 keys on, ALiBi's bias uses the signed distance, ``-slope * (p - j)``.

What is broken: a key after its query (``j > p``) gets the bonus ``slope * (j - p)`` instead
of the penalty ``-slope * (j - p)``. Right under causality (no key after a query is visible),
for keys at or before the query, on calls of fewer than 200 keys and without
``alibi_slopes`` (impl's there): only a bidirectional call (an encoder, a chunk that sees
the keys after it) at kernel sizes shows it.

Real-world mistake: ALiBi written for a decoder, where ``p - j >= 0`` on every visible key and
``-slope * (p - j)`` equals ``-slope * |p - j|``, reused in a bidirectional kernel (ALiBi's
symmetric form: Press et al. 2022, and MosaicML's BERT).
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES
MIN_KEYS = 200


class _SignedDistance(impl.Attention):
    def alibi_block(self, call, rows, keys, compute):
        bias = super().alibi_block(call, rows, keys, compute)
        if bias is None or call.shape[3] < MIN_KEYS:
            return bias
        p = call.query_start + np.arange(rows.start, rows.stop)[:, None]
        j = np.arange(keys.start, keys.stop)
        return np.where(j > p, -bias, bias).astype(compute)  # FAULT: +slope (j - p) past p


MUTANT = Mutant(
    name="alibi_signed_distance_past_200_keys",
    description="from 200 keys on, ALiBi biases by the signed distance -slope (p - j): keys "
    "after the query gain instead of losing",
    models="a decoder's one-sided ALiBi, -slope (p - j), reused in a bidirectional kernel",
    killed_by=("test_kernel_sized_alibi_and_softcap_match_reference",),
    steps=_SignedDistance,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
