"""The per-query-head float arguments, ``alibi_slopes`` (:mod:`oracle.rules.alibi`) and
``sinks`` (:mod:`oracle.rules.sinks`), are read by one function,
:func:`oracle.rules.arguments.check_head_floats`: each refuses the same mistakes, naming its
own argument. What each rule adds (ALiBi's ``(B, Hq)`` form, a sink's ``-inf``) is tested
beside the rule."""

from __future__ import annotations

import numpy as np
import pytest

from attnprops.oracle.rules import AlibiError
from attnprops.oracle.rules import SinksError
from attnprops.oracle.rules import check_alibi_slopes
from attnprops.oracle.rules import check_sinks

RULES = [
    pytest.param(lambda x: check_alibi_slopes(x, batch=1, num_heads=2), AlibiError, id="alibi"),
    pytest.param(lambda x: check_sinks(x, num_heads=2), SinksError, id="sinks"),
]
MISTAKES = [
    pytest.param(np.ones(3), id="one per head, plus one"),
    pytest.param(np.ones(2, dtype=np.int64), id="integers"),
    pytest.param(np.array([np.nan, 1.0]), id="NaN"),
    pytest.param("0.5", id="a string"),
    # np.asarray would read the hidden 50: a masked array is refused, not unmasked
    pytest.param(np.ma.array([50.0, 0.25], mask=[True, False]), id="masked"),
]


@pytest.mark.parametrize("check, error", RULES)
@pytest.mark.parametrize("value", MISTAKES)
def test_each_per_head_argument_refuses_the_same_mistakes_naming_itself(check, error, value):
    name = "alibi_slopes" if error is AlibiError else "sinks"
    with pytest.raises(error, match=rf"^{name}: "):
        check(value)
