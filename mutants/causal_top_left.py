"""Mutant: ``query_start=None`` means 0 (top-left causal alignment) instead of ``Tk - Tq``.

What is broken: with ``is_causal=True`` and no ``query_start``, the queries are aligned to the
FIRST ``Tq`` key positions (``j <= i``), not to the last ones (``j <= Tk - Tq + i``). For
``Tq == Tk`` nothing changes; for ``Tq < Tk`` (decoding several new tokens against a longer
context) every query misses its latest keys. An explicit ``query_start`` is honored and all
validation is impl's (``Tq > Tk`` with ``None`` still raises).

Real-world mistake: relying on PyTorch's ``scaled_dot_product_attention(is_causal=True)`` for a
non-square problem: its causal mask is top-left aligned (the source lab, 000 section 4: "PyTorch
… SDPA … 非方形因果掩码采用左上对齐"), whereas the KV-cache convention is bottom-right.
"""

from attnprops import impl
from attnprops.mutants import Mutant


class _TopLeft(impl.Attention):
    def validate(self, query, key, value, options, **checks):
        call = super().validate(query, key, value, options, **checks)
        if not call.is_causal or options["query_start"] is not None:
            return call
        # FAULT: default start 0 (PyTorch's top-left is_causal) instead of Tk - Tq.
        return super().validate(query, key, value, {**options, "query_start": 0}, **checks)


MUTANT = Mutant(
    name="causal_top_left",
    description="is_causal with query_start=None aligns the queries top-left (start 0) instead "
    "of bottom-right (start Tk - Tq)",
    models="PyTorch SDPA is_causal=True used for Tq < Tk (its mask is top-left aligned), where "
    "the KV-cache convention is bottom-right",
    killed_by=("test_is_causal_equals_explicit_mask", "test_output_matches_oracle"),
    steps=_TopLeft,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
