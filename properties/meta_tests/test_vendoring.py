"""The vendoring recipe of docs/use-in-your-codebase.md ("2. Copy the suite into your tests"),
done for real in a clean temporary project: copy ``attnprops/__init__.py``, ``oracle/`` and
``properties/`` into ``tests/attnprops/``, add the two-line ``conftest.py`` and a small subject,
run pytest on a few properties. The run must pass, its header must name the subject, and
nothing may come from this repository: attnprops is made uninstalled in the subprocess (no
editable finder, no pytest11 entry point), ``attnprops.impl``, ``.mutants`` and ``.ci`` are
unimportable, and ``attnprops.properties``/``attnprops.oracle`` must be the copies.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from attnprops import properties
from attnprops.properties.options import FAST_START

SUITE_ROOT = Path(properties.__file__).resolve().parent.parent

# The guide's files, verbatim.
PYPROJECT = """\
[tool.pytest.ini_options]
testpaths = ["tests"]
"""

CONFTEST = """\
# tests/conftest.py -- load the attention property suite's pytest plugin
pytest_plugins = ["attnprops.properties.plugin"]
"""

SUBJECT = '''\
"""my_attention: a float64 NumPy attention in attnprops' conventions (the subject)."""
import numpy as np

__version__ = "1.2.3"
ATTNPROPS_CAPABILITIES = {"dtypes": ("float64",), "validates_inputs": False}


def attention(query, key, value, *, attn_mask=None, is_causal=False, query_start=None,
              scale=None):
    two_d = query.ndim == 2
    if two_d:
        query, key, value = query[None, None], key[None, None], value[None, None]
    group = query.shape[1] // key.shape[1]  # query head h reads K/V head h // group
    key, value = np.repeat(key, group, axis=1), np.repeat(value, group, axis=1)
    scale = 1 / np.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query * scale) @ key.swapaxes(-1, -2)  # (B, Hq, Tq, Tk)
    tq, tk = scores.shape[-2:]
    if attn_mask is not None:  # bool: True = attend; float: added
        scores = scores + (np.where(attn_mask, 0.0, -np.inf) if attn_mask.dtype == bool
                           else attn_mask)
    if is_causal:
        start = tk - tq if query_start is None else query_start
        scores = np.where(np.arange(tk) <= np.arange(tq)[:, None] + start, scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    out = (weights / weights.sum(axis=-1, keepdims=True)) @ value
    return out[0, 0] if two_d else out
'''

# Runs pytest with this repository made invisible: the editable install's finder is removed,
# the attnprops distribution is hidden from entry-point discovery (pytest would load the
# installed plugin), and a finder in front of every other refuses attnprops.impl/.mutants/.ci
# (also for a non-editable install); prints where properties/oracle came from.
BOOTSTRAP = r"""
import importlib.abc, importlib.metadata, sys
suite_root = sys.argv[1]
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
sys.path_hooks[:] = [h for h in sys.path_hooks if "__editable__" not in getattr(h, "__module__", "")]
sys.path[:] = [p for p in sys.path if p.rstrip("/") != suite_root]
_distributions = importlib.metadata.distributions
importlib.metadata.distributions = lambda **kw: (
    d for d in _distributions(**kw) if (d.metadata["Name"] or "").lower() != "attnprops")

class HideRestOfRepo(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("impl", "mutants", "ci") or name.split(".")[:2] in (
                ["attnprops", "impl"], ["attnprops", "mutants"], ["attnprops", "ci"]):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by test_vendoring)", name=name)
        return None

sys.meta_path.insert(0, HideRestOfRepo())
import pytest
rc = pytest.main(sys.argv[2:])
for name in ("attnprops.properties", "attnprops.oracle"):
    module = sys.modules.get(name)
    print(f"VENDORED {name} from {getattr(module, '__file__', None)}")
sys.exit(rc)
"""

TESTS = (
    "test_seed_examples or test_output_matches_oracle or test_gqa_equals_repeated_kv "
    "or test_is_causal_equals_explicit_mask or test_ids_match_as_path_suffixes"
)


def _copy(src: Path, dst: Path) -> None:
    shutil.copytree(
        src,
        dst,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", ".pytest_cache"),
    )


@pytest.mark.e2e
def test_vendored_copy_runs_without_this_repository(tmp_path):
    """The guide's recipe works in a clean project: the copied suite runs against the
    project's own subject, passes, and names the subject in its header."""
    project = tmp_path / "my_project"
    tests = project / "tests"
    tests.mkdir(parents=True)
    vendored = tests / "attnprops"
    vendored.mkdir()
    shutil.copy(SUITE_ROOT / "attnprops" / "__init__.py", vendored / "__init__.py")
    _copy(SUITE_ROOT / "oracle", vendored / "oracle")
    _copy(SUITE_ROOT / "properties", vendored / "properties")
    (project / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (tests / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (tests / "my_attention.py").write_text(SUBJECT, encoding="utf-8")

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "ATTN_IMPL", "ATTN_XFAIL", "PYTEST_ADDOPTS")
    }
    env.update(HYPOTHESIS_PROFILE="dev", PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(BOOTSTRAP),
            str(SUITE_ROOT),
            "tests/attnprops/properties",
            "--attn-impl",
            "my_attention",
            "-k",
            TESTS,
            "-p",
            "no:cacheprovider",
            *FAST_START,
            "-rs",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "attnprops subject: my_attention 1.2.3 (dtypes=('float64',)" in out, out[-4000:]
    assert " passed" in out and "failed" not in out and "error" not in out.lower(), out[-4000:]
    assert f"VENDORED attnprops.properties from {vendored / 'properties' / '__init__.py'}" in out, (
        out[-2000:]
    )
    assert f"VENDORED attnprops.oracle from {vendored / 'oracle' / '__init__.py'}" in out, out[
        -2000:
    ]
