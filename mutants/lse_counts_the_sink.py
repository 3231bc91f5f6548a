"""Mutant: the returned log-sum-exp includes the heads' sinks.

What is broken: with ``return_lse=True`` and ``sinks``, each row's ``lse`` is ``log(e^{lse}
+ e^{sigma_h})``, the log of the whole denominator, instead of the keys' alone: merging two
parts then counts the sink in each, and applying the sink after the merge counts it once
more. Calls without sinks, and the output, are impl's.

Real-world mistake: a sink counted twice in a split-KV merge (rocm-libraries#12227): each
split's partial ``lse`` carries the sink, and the combine step adds them.
"""

import numpy as np

from attnprops import impl
from attnprops.mutants import Mutant

ATTNPROPS_CAPABILITIES = impl.ATTNPROPS_CAPABILITIES


class _LseWithSink(impl.Attention):
    def output(self, call, compute, block_size, lse=None):
        out = super().output(call, compute, block_size, lse)
        if lse is not None and call.sinks is not None:
            sinks = call.sinks.astype(lse.dtype)[:, None]  # (Hq, 1)
            np.logaddexp(lse, sinks, out=lse)  # FAULT: the sink joins the keys' lse
        return out


MUTANT = Mutant(
    name="lse_counts_the_sink",
    description="return_lse includes the sink: log(e^lse + e^sink) instead of the keys' lse",
    models="a partial lse that carries the sink into a split-KV merge (rocm-libraries#12227)",
    killed_by=("test_lse_with_sinks_counts_only_the_keys", "test_lse_matches_oracle"),
    steps=_LseWithSink,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
