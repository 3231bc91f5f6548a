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

import numpy as np

from attnprops.impl import KVCache, kv_cache_bytes
from attnprops.impl.kv_cache import cached_attention as _impl_cached_attention
from attnprops.mutants import Mutant
from attnprops.mutants._common import Pipeline, rebind
from attnprops.oracle import rules


def _check_float_array(x, name, *, scan=True):
    """oracle.rules.check_float_array without its finiteness check."""
    x = rules._as_array(x, name)
    if x.dtype not in rules.FLOAT_DTYPES:
        raise rules.DtypeError(
            f"{name}: dtype {x.dtype} is not supported; use float16, float32 or float64"
        )
    if x.size == 0:
        raise rules.ShapeError(
            f"{name}: shape {x.shape} has a zero-size axis; every axis must be >= 1"
        )
    # FAULT: the `np.isfinite(x).all()` check (NonFiniteInputError) is missing here.
    return x


# The rulebook's check_attention_inputs, its check_attention_call calling the check above.
_check_attention_call = rebind(rules.check_attention_call, check_float_array=_check_float_array)
_check_attention_inputs = rebind(
    rules.check_attention_inputs, check_attention_call=_check_attention_call
)


class _NoFiniteCheck(Pipeline):
    def validate(self, query, key, value, needs_value, options, fully_masked_rows="raise"):
        return _check_attention_inputs(
            query,
            key,
            value,
            needs_value=needs_value,
            fully_masked_rows=fully_masked_rows,
            **options,
        )

    def weighted_values(self, weights, problem, compute):
        with np.errstate(invalid="ignore", over="ignore"):  # NaN/inf pass through silently
            return super().weighted_values(weights, problem, compute)


_PIPELINE = _NoFiniteCheck()
attention = _PIPELINE.attention
attention_weights = _PIPELINE.attention_weights
cached_attention = rebind(_impl_cached_attention, attention=attention)

__all__ = ["KVCache", "attention", "attention_weights", "cached_attention", "kv_cache_bytes"]

MUTANT = Mutant(
    name="no_validation_nonfinite",
    description="attention does not reject NaN/inf in query/key/value (other rules kept): NaN "
    "in value reaches the output",
    models="input validation that checks shapes and dtypes but not values; NaN from an "
    "upstream layer passed on instead of reported",
    killed_by=("test_invalid_inputs_raise",),
)
