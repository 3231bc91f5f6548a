"""Mutant: the query is scaled in place after ``astype(copy=False)``: in the caller's array.

What is broken: to save a temporary, the scale is folded into the query before the matmul:
``q = query.astype(compute_dtype, copy=False); q *= scale``. For float16 inputs ``astype``
makes a float32 copy and nothing leaks; for float32/float64 inputs ``copy=False`` returns the
caller's own array, which is then multiplied by ``1/sqrt(D)`` in place (read-only arrays are
skipped, NumPy could not write into them). The returned result is right to rounding, but the
caller's query has changed: calling again with the same array gives another answer, and when
the same array is passed as query and key (``Q = K``, as in the 003 example) the second call's
scores are scaled twice. Validation is impl's.

Real-world mistake: in-place ops on an alias of an input (``astype(copy=False)``, ``.to(dtype)``
returning ``self``, fairseq-style ``q *= self.scaling`` on a tensor the function does not own);
the rulebook: "Nothing is ever modified".
"""

from attnprops import impl
from attnprops.mutants import Mutant


class _InplaceQueryScaling(impl.Attention):
    def scaled_query(self, call, compute):
        query = call.query.astype(compute, copy=False)  # float32/64: the caller's array itself
        if not query.flags.writeable:
            return super().scaled_query(call, compute)
        query *= compute.type(
            self.scale(call)
        )  # FAULT: in place, on what may be the caller's array
        B, Hq, Tq, D = query.shape
        Hkv = call.key.shape[1]
        return query.reshape(B, Hkv, Hq // Hkv, Tq, D)


MUTANT = Mutant(
    name="inplace_query_scaling",
    description="q = query.astype(compute, copy=False); q *= scale: float32/float64 callers' query "
    "arrays are scaled in place (result right, input modified)",
    models="in-place op on an alias of an input (astype(copy=False), fairseq-style "
    "`q *= self.scaling` on a tensor the function does not own)",
    killed_by=("test_valid_inputs_not_modified",),
    steps=_InplaceQueryScaling,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
