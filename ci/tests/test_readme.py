"""The README's Python examples (the adapter, bfloat16) are executed, so the documentation
cannot rot."""

from __future__ import annotations

import os
import re
import runpy
from pathlib import Path
from typing import NamedTuple

import numpy as np

from attnprops import oracle
from attnprops.ci.pytest_process import run_pytest
from attnprops.properties.bounds import attention_bounds
from attnprops.properties.options import suite_args
from attnprops.properties.strategies import AttentionCase
from attnprops.properties.subject import load_subject

REPO = Path(__file__).resolve().parents[2]


class _Run(NamedTuple):
    returncode: int
    stdout: str


def _pytest(args: list[str], env: dict) -> _Run:
    """``python -m pytest args`` in this repository, as a fresh process (forked with the
    libraries imported: ci.pytest_process)."""
    run = run_pytest(args, cwd=REPO, env=env)
    return _Run(run.returncode, run.output)


def readme_block(name: str) -> str:
    """The README's python block that starts with the comment ``# name``."""
    readme = (REPO / "README.md").read_text()
    match = re.search(rf"```python\n(# {re.escape(name)}.*?)```", readme, re.S)
    assert match, f"README.md lost its '# {name}' example"
    return match.group(1)


def run_readme_block(name: str, folder: Path) -> dict:
    """Write the README's block ``name`` into ``folder`` and run it as a script would run;
    its globals."""
    path = folder / name
    path.write_text(readme_block(name))
    return runpy.run_path(str(path))


def test_readme_adapter_passes_the_suite(tmp_path, monkeypatch):
    """The README's 20-odd-line adapter loads with its declared capabilities and passes the
    oracle-agreement, causality and seed-example properties. The whole suite (ci profile,
    about 50 s here) runs on it in CI: .ci/run copies the block into a folder of its own and
    runs `attnprops check --impl my_adapter` there, as the README says."""
    (tmp_path / "my_adapter.py").write_text(readme_block("my_adapter.py"))
    monkeypatch.syspath_prepend(str(tmp_path))
    subject = load_subject("my_adapter")
    assert subject.capabilities.dtypes == ("float32", "float64")
    assert (
        not subject.capabilities.validates_inputs
        and not subject.capabilities.kv_cache
        and not subject.capabilities.float_masks
    )
    env = dict(
        os.environ,
        PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        HYPOTHESIS_PROFILE="dev",
    )
    proc = _pytest(
        [
            str(REPO / "properties"),
            *suite_args("my_adapter"),
            "-k",
            "test_output_matches_oracle or test_hidden_keys_do_not_change_output or "
            "test_seed_examples or test_kv_cache_bytes_formula",
        ],
        env,
    )
    tail = proc.stdout[-3000:]
    assert proc.returncode == 0, tail
    assert "attnprops subject: my_adapter" in proc.stdout, tail
    assert re.search(r"3 passed, 2 skipped", proc.stdout), tail  # skipped: weights, kv_cache_bytes
    assert "attnprops robustness tier: report" in proc.stdout, tail


def test_readme_adapter_misses_only_the_robustness_tier(tmp_path):
    """What the README says of its adapter: it misses the robustness-tier property (values
    near the dtype's maximum), which is reported (a non-strict xfail: the run passes), not
    failed, by default (ci profile, so the failure is found and shrunk)."""
    (tmp_path / "my_adapter.py").write_text(readme_block("my_adapter.py"))
    env = dict(
        os.environ,
        PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        HYPOTHESIS_PROFILE="ci",
    )
    base = [
        str(REPO / "properties" / "test_values.py"),
        *suite_args("my_adapter"),
        "-k",
        "test_values_near_the_dtype_maximum",
    ]
    for mode, code, summary in (("report", 0, "1 xfailed"),):
        proc = _pytest(base + [f"--attn-robustness={mode}"], env)
        tail = proc.stdout[-3000:]
        assert proc.returncode == code and summary in proc.stdout, (mode, tail)


def test_readme_bfloat16_example_runs_within_impls_bound(tmp_path, capsys):
    """The README's bfloat16 block runs as written, prints the output's dtype and its largest
    error, and that error is within impl's declared bound (bfloat16 computed in float32)."""
    run = run_readme_block("bfloat16.py", tmp_path)
    dtype, error = capsys.readouterr().out.split()
    q, k, v, out = run["q"], run["k"], run["v"], run["out"]
    assert dtype == "bfloat16" == out.dtype.name
    parts = oracle.attention_parts(q, k, v, is_causal=True)
    case = AttentionCase(q, k, v, None, True, None, None, "none", "unit")
    bound = attention_bounds(case, parts, load_subject("attnprops.impl").arithmetic(q.dtype))
    diff = np.abs(out.astype(np.float64) - parts.output.value)
    assert (diff <= bound.output).all()
    assert float(error) == diff.max() > 0


def test_readme_fp8_cache_example_runs_within_the_round_trip_bound(tmp_path, capsys):
    """The README's fp8 cache block runs as written: the codes are float8_e4m3fn, the output
    has the query's heads, and the largest round-trip error it prints is that of the cache's
    keys, within properties/quantization_bounds.py and not zero (the keys were quantized)."""
    from attnprops.properties.quantization_bounds import quantization_bounds

    run = run_readme_block("fp8_cache.py", tmp_path)
    codes, *shape, error = capsys.readouterr().out.replace(",", " ").replace("(", " ").split()
    cache, k = run["cache"], run["k"]
    assert codes == "float8_e4m3fn" and run["out"].shape == (1, 4, 5, 8)
    bound = quantization_bounds(k, cache.key_codes, cache.key_scale, cache.storage, k.dtype)
    diff = np.abs(cache.keys.astype(np.float64) - k)
    assert (diff <= bound.round_trip).all()
    assert float(error) == diff.max() > 0
