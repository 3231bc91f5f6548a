"""One warnings policy for every way of running the suite: a RuntimeWarning from this
project's own code (impl, oracle, properties) is an error, one from a subject's code is shown
and never fails a property (the plugin's WARNINGS_POLICY, added to filterwarnings; README
"Warnings")."""

from __future__ import annotations

import warnings

import pytest

from attnprops.ci.suite_runner import run_suite

WARNS = """\
import numpy as np
from attnprops import impl
from attnprops.impl import KVCache, attention_weights, cached_attention, kv_cache_bytes

def attention(query, key, value, **kwargs):
    np.exp(np.float64(1000.0))  # overflow: a harmless RuntimeWarning in the subject's code
    return impl.attention(query, key, value, **kwargs)
"""


@pytest.mark.parametrize(
    "module, is_error",
    [
        ("impl.attention", True),
        ("oracle", True),
        ("properties.bounds", True),
        ("attnprops.impl.attention", True),
        ("attnprops.oracle.ball", True),
        ("my_subject", False),
        ("implement", False),
    ],
)
def test_runtime_warnings_are_errors_only_in_this_projects_code(module, is_error):
    def warn():
        warnings.warn_explicit("overflow", RuntimeWarning, f"{module}.py", 1, module=module)

    if is_error:
        with pytest.raises(RuntimeWarning):
            warn()
    else:
        with pytest.warns(RuntimeWarning):
            warn()


def test_a_subject_that_warns_passes_under_attnprops_check(tmp_path):
    path = tmp_path / "warns.py"
    path.write_text(WARNS, encoding="utf-8")
    result = run_suite(
        str(path),
        tmp_path / "work",
        tests=["test_single_visible_key_returns_its_value"],
        profile="dev",
    )
    assert result.returncode == 0 and result.tests_run == 1, result.output_tail
    assert "RuntimeWarning" in result.output_tail  # shown in the warnings summary
