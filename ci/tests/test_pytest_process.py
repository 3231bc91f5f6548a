"""The fork-server pytest runner behaves as ``python -m pytest`` in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

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


class _LostStatus:
    """A fork-server context whose processes report 255 as their exit status once they end,
    as CPython's fork server does when it cannot read it."""

    def __init__(self, context):
        self._context = context

    def Process(self, *args, **kwargs):  # noqa: N802 (multiprocessing's name)
        return _LostProcess(self._context.Process(*args, **kwargs))


class _LostProcess:
    """A started process, but for the exit status it reports (see :class:`_LostStatus`)."""

    def __init__(self, process):
        self._process = process

    def __getattr__(self, name):  # start, is_alive, join
        return getattr(self._process, name)

    @property
    def exitcode(self):
        code = self._process.exitcode
        return None if code is None else 255  # CPython's popen_forkserver: status unread


def test_a_status_the_fork_server_loses_is_read_from_the_child(tmp_path, monkeypatch):
    context = pytest_process._fork_server()
    if context is None:
        pytest.skip("no fork server on this platform")
    monkeypatch.setattr(pytest_process, "_fork_server", lambda: _LostStatus(context))
    (tmp_path / "test_probe.py").write_text(PROBE, encoding="utf-8")
    (tmp_path / "probe_helper.py").write_text("VALUE = 7\n", encoding="utf-8")
    run = pytest_process.run_pytest(
        ["-q", "-p", "no:cacheprovider", "-o", "addopts=", "test_probe.py"],
        cwd=tmp_path,
        env=dict(os.environ, PROBE_VALUE="from the parent"),
    )
    assert run.returncode == 1, run.output  # what the child wrote, not the 255 reported
    assert "1 failed, 1 passed" in run.output


def test_a_status_nobody_wrote_stays_lost(tmp_path):
    written = tmp_path / "pytest.log.status"
    lost = pytest_process.STATUS_LOST
    assert pytest_process._status(lost, str(written)) == lost  # the child wrote nothing
    written.write_text("1", encoding="utf-8")
    assert pytest_process._status(lost, str(written)) == 1
    assert pytest_process._status(0, str(written)) == 0  # a status that came back stands
    assert pytest_process._status(-9, str(written)) == -9  # so does a signal
    written.write_text("", encoding="utf-8")  # cut short while writing
    assert pytest_process._status(lost, str(written)) == lost


SLEEPER = textwrap.dedent("""\
    import os, pathlib, time

    def test_sleeps():  # in an xdist worker: note it and the pytest process above it
        here = pathlib.Path(__file__).parent
        (here / "pids.tmp").write_text(f"{os.getpid()} {os.getppid()}")
        (here / "pids.tmp").rename(here / "pids")
        time.sleep(300)
""")

DRIVER = textwrap.dedent("""\
    import os, sys
    from pathlib import Path
    from attnprops.ci.pytest_process import run_pytest

    folder = Path(sys.argv[1])
    args = ["-q", "-p", "no:cacheprovider", "-o", "addopts=", "-n", "1", "test_sleeper.py"]
    run_pytest(args, cwd=folder, env=dict(os.environ))
""")


def _ended(pid: int) -> bool:
    """Whether process ``pid`` is gone or a zombie: the watchdog's own test of its caller."""
    return not pytest_process._alive(pid)


def test_the_run_ends_with_the_process_that_started_it(tmp_path):
    """A SIGKILL of the process that called run_pytest (it can clean nothing up) ends the
    pytest run and its xdist worker within a few seconds, also while that process is a
    zombie: its starter reads its output to the end before it waits (``communicate()``);
    they ran on for as long as their properties took before (a killed ``attnprops check``
    left two workers busy for 20 minutes)."""
    if pytest_process._fork_server() is None or not os.path.exists("/proc/self/stat"):
        pytest.skip("the fork-server path on Linux (process groups, /proc)")
    (tmp_path / "test_sleeper.py").write_text(SLEEPER, encoding="utf-8")
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "pids").exists():
            assert driver.poll() is None and time.monotonic() < deadline, "no worker started"
            time.sleep(0.1)
        worker, run = map(int, (tmp_path / "pids").read_text().split())
        assert not _ended(worker) and not _ended(run)
    finally:
        driver.kill()  # not reaped before its output ends: a zombie meanwhile
    try:
        driver.communicate(timeout=10 * pytest_process.WATCH_SECONDS)
        deadline = time.monotonic() + 10 * pytest_process.WATCH_SECONDS
        while not (_ended(worker) and _ended(run)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _ended(run), "the pytest run outlived the process that started it"
        assert _ended(worker), "its xdist worker outlived it"
    finally:  # a failing run leaves nothing behind either
        for pid in (worker, run):
            if not _ended(pid):
                os.kill(pid, 9)


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


def test_a_child_whose_output_folder_is_gone_ends_quietly(tmp_path, capfd):
    """A Ctrl-C while the fork server starts a child: the caller ends the run and removes the
    folder of the child's output file on its way out, and the child, started after, printed
    a traceback of the missing file on the terminal. Now it ends at once, silently."""
    import multiprocessing

    log = str(tmp_path / "removed" / "pytest.log")
    child = multiprocessing.get_context("fork").Process(
        target=pytest_process._child, args=(["--version"], str(tmp_path), {}, log, os.getpid())
    )
    child.start()
    child.join(30)
    assert child.exitcode == pytest_process.LOG_GONE
    assert capfd.readouterr() == ("", "")
