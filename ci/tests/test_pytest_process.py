"""The fork-server pytest runner behaves as ``python -m pytest`` in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from attnprops.ci import pytest_process
from attnprops.properties.threads import THREAD_ENV_VARS
from attnprops.properties.threads import one_thread_per_process

PROBE = textwrap.dedent("""\
    import os, sys

    def test_environment_and_folder():
        print("ENV", os.environ.get("PROBE_VALUE"), "CWD", os.getcwd() == sys.path[0])
        import probe_helper  # importable from the working folder, as with python -m pytest
        assert probe_helper.VALUE == 7

    def test_fails():
        assert os.environ.get("PROBE_VALUE") == "something else"
""")


@pytest.fixture(params=["fork server", "subprocess"])
def runner(request, monkeypatch):
    if request.param == "subprocess":  # the path taken where there is no fork server
        monkeypatch.setattr(pytest_process, "_fork_server", lambda: None)
    return pytest_process.run_pytest


def test_child_gets_the_environment_folder_output_and_exit_status(runner, tmp_path):
    (tmp_path / "test_probe.py").write_text(PROBE, encoding="utf-8")
    (tmp_path / "probe_helper.py").write_text("VALUE = 7\n", encoding="utf-8")
    env = dict(os.environ, PROBE_VALUE="from the parent")
    run = runner(
        ["-q", "-s", "-p", "no:cacheprovider", "-o", "addopts=", "test_probe.py"],
        cwd=tmp_path,
        env=env,
    )
    assert run.returncode == 1, run.output
    assert "ENV from the parent CWD True" in run.output
    assert "1 failed, 1 passed" in run.output
    assert "PROBE_VALUE" not in os.environ  # the parent's own environment is untouched


def test_usage_error_exit_status_comes_back(tmp_path):
    run = pytest_process.run_pytest(["--no-such-option"], cwd=tmp_path, env=dict(os.environ))
    assert run.returncode == 4, run.output  # pytest's ExitCode.USAGE_ERROR
    assert "--no-such-option" in run.output


def test_one_thread_per_process_only_for_parallel_runs(monkeypatch):
    for name in THREAD_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    one_thread_per_process(workers=1)
    one_thread_per_process(workers=None)
    assert not any(name in os.environ for name in THREAD_ENV_VARS)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the user's own setting wins
    one_thread_per_process(workers=2)
    assert os.environ["OMP_NUM_THREADS"] == "3"
    assert all(os.environ[name] == "1" for name in THREAD_ENV_VARS if name != "OMP_NUM_THREADS")


def test_preloaded_modules_do_not_read_the_subject():
    """The fork server's preloaded modules are the same for every subject: importing them
    (in a fresh interpreter) imports no property test module, subject, mutant or torch, and
    none of them is missing."""
    code = textwrap.dedent(f"""\
        import sys
        for name in {pytest_process.PRELOAD!r}:
            __import__(name)
        print("\\n".join(sorted(sys.modules)))
    """)
    env = dict(os.environ, ATTN_IMPL="no_such_subject_zzz")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert set(pytest_process.PRELOAD) <= set(out)
    subject_dependent = [
        name
        for name in out
        if name.startswith(("attnprops.properties.test_", "attnprops.properties.subjects"))
        or name.startswith(("attnprops.mutants", "attnprops.ci", "torch", "jax", "no_such"))
    ]
    assert subject_dependent == []
