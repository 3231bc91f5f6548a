"""Mutant: NaN and infinity in query/key/value are not rejected by ``attention``.

What is broken: the rulebook's check "every entry must be finite" is missing from the input
validation of ``attention``/``attention_weights``; every other rule is impl's (shapes, dtypes,
masks, query_start, scale, fully masked rows, and the overflow check of the visible scores). A
NaN in the query or in a visible key is still caught indirectly, as a ScoreOverflowError; but a
NaN or inf in ``value`` propagates silently into the output, and one in a hidden key is
ignored. ``KVCache.append`` (impl's) still rejects them.

Real-world mistake: validating shapes and dtypes but not values (an ``isfinite`` check thought
too expensive), so a NaN from an upstream layer is passed on instead of reported at its source.
The source lab (000, section 5) lists "非有限值" first among the rejected inputs.
"""

from attnprops import impl
from attnprops.mutants import Mutant


class _NoFiniteCheck(impl.Attention):
    # FAULT: the rulebook's "every entry must be finite" is skipped in both places impl
    # applies it: the validation (scan=False) and the scans of the two paths.
    def validate(self, query, key, value, options, **checks):
        return super().validate(query, key, value, options, **{**checks, "scan": False})

    def check_finite(self, array, name):
        return None


MUTANT = Mutant(
    name="no_validation_nonfinite",
    description="attention does not reject NaN/inf in query/key/value (other rules kept): NaN "
    "in value reaches the output",
    models="input validation that checks shapes and dtypes but not values; NaN from an "
    "upstream layer passed on instead of reported",
    killed_by=("test_invalid_inputs_raise",),
    steps=_NoFiniteCheck,
)
__all__ = MUTANT.export(globals())  # attention, KVCache, ...: the API's names (mutants.API)
