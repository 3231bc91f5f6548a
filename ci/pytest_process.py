"""Run ``python -m pytest ARGS`` in a fresh process whose libraries are already imported.

The mutation runner starts one pytest process per mutant (and per pass), about seventy in all.
Each fresh interpreter spends about a second importing NumPy, Hypothesis, pytest, mpmath and
python-flint before it runs a single example, and then about half a second importing and
compiling the suite's own modules (the runs write no bytecode); most mutants die within a few
seconds, so that time was a fifth of ``attnprops mutants``' time. Here the processes are
forked from a :mod:`multiprocessing` *fork server* that imported those libraries and the
suite's subject-independent modules once (:data:`PRELOAD`): each child is still a fresh
process (its own module state, environment, working folder and output), and starts in
milliseconds. Measured here: a run that collects the suite and runs nothing took 0.72 s with
the libraries preloaded and 0.16 s with the suite's modules too.

The child runs ``pytest.main(args)`` with the given environment and working folder, the
folder and then ``$PYTHONPATH``'s entries first on ``sys.path`` (as ``python -m pytest``
started there would have them), and its standard output and error (file descriptors 1 and
2, so pytest's own capturing still works) written to a file.
The child also writes its exit status to a file before it exits, read when the fork server
reports it lost (:data:`STATUS_LOST`). The child leads a process group of its own, which ends
when the process that started it ends, however that happens (a SIGTERM or SIGKILL of
``attnprops check`` left the run and its xdist workers running for as long as their
properties took, a fork-server child of nobody).
Where the fork server is not available (Windows), a plain ``python -m pytest`` subprocess
runs instead; the result is the same.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable
from typing import NamedTuple

# Third-party libraries every suite run imports, then the suite's modules that are the same
# for every subject: the rulebook, the oracle, impl, and the properties' plugin, strategies,
# checks and bounds. The property test modules (``properties/test_*.py``, which read the
# subject at import), the subjects and the mutants are left to each child; a test
# (ci/tests/test_pytest_process.py) checks that importing these imports none of them.
PRELOAD = (
    "numpy",
    "hypothesis",
    "hypothesis.extra.numpy",
    "pytest",
    "mpmath",
    "flint",
    "attnprops.oracle",
    "attnprops.impl",
    "attnprops.properties.plugin",
    "attnprops.properties._support",
    "attnprops.properties.invalid",
    "attnprops.properties.kernel_cases",
    "attnprops.properties.serving_cases",
    "attnprops.properties.quantized_cases",
)


class PytestRun(NamedTuple):
    """Exit status and the combined standard output and error of one pytest run."""

    returncode: int
    output: str


@functools.cache
def _fork_server():
    """The fork-server context with its preload set; None where there is none. (The
    context is one object per process, so a first call made twice at once is harmless.)"""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return None
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOAD))
    return context


WATCH_SECONDS = 1.0  # how often a child checks that the process that started it is alive


def _end_with(parent: int) -> None:
    """In a child's watchdog thread: once process ``parent`` (the caller of
    :func:`run_pytest`) is gone, however it ended (a SIGTERM or SIGKILL runs no cleanup of
    its own), end the child's process group: the pytest run and its pytest-xdist workers,
    which would otherwise run on for as long as their properties take."""
    while True:
        time.sleep(WATCH_SECONDS)
        if not _alive(parent):
            os.killpg(0, signal.SIGTERM)
            return


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs: it exists and, where ``/proc`` tells (Linux), is not a
    zombie. A caller killed while whatever started it reads its output to the end before it
    waits (``subprocess.run(capture_output=True)``, ``communicate()``) stays a zombie until
    that reader sees end-of-file, which the run's own processes hold off: it must count as
    dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        pass
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):  # no /proc (macOS), or gone since
        return True


def _child(args: list[str], cwd: str, env: dict, log: str, parent: int) -> None:
    """In the forked child: become ``python -m pytest args`` run in ``cwd`` with ``env``, the
    leader of a process group of its own (its xdist workers join it), ended with ``parent``
    (:func:`_end_with`)."""
    os.setpgid(0, 0)
    threading.Thread(target=_end_with, args=(parent,), daemon=True).start()
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    # as a fresh interpreter would start: the folder first, then $PYTHONPATH's entries
    extra = [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:0] = [cwd] + [p for p in extra if p not in sys.path]
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError:  # its folder is gone: the caller was interrupted while it started us
        os._exit(LOG_GONE)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    import pytest

    code = int(pytest.main(args))
    sys.stdout.flush()
    sys.stderr.flush()
    try:  # see STATUS_LOST; a status that cannot be written leaves the reported one
        with open(log + STATUS_SUFFIX, "w", encoding="utf-8") as status:
            status.write(str(code))
    except OSError:
        pass
    os._exit(code)


# What CPython's multiprocessing fork server reports for a child whose exit status it could
# not read (``popen_forkserver``: "perhaps the forkserver process itself got killed");
# pytest's own exit statuses are 0-5. Seen once in a fresh-clone CI run (2026-12-06): the
# child had finished its run and recorded a property's failure. So each child also writes its
# status to a file next to its output (``STATUS_SUFFIX``) just before it exits, and
# :func:`run_pytest` reads it there when the fork server reports this.
STATUS_LOST = 255
STATUS_SUFFIX = ".status"


# A child's exit status when it found the folder of its output file removed: the caller was
# interrupted (Ctrl-C) while the fork server started the child, and has ended the run and
# removed the folder on its way out. The child ends at once and quietly (it printed a
# traceback of the missing file); nobody reads the status.
LOG_GONE = 1

POLL_SECONDS = 0.2  # how often ``poll`` is called while the process runs


def run_pytest(
    args: list[str], *, cwd: Path, env: dict, poll: Callable[[], None] | None = None
) -> PytestRun:
    """``python -m pytest *args`` in ``cwd`` with environment ``env`` (see the module
    docstring); returns its exit status and output. ``poll`` (no arguments) is called every
    :data:`POLL_SECONDS` while the process runs and once after it ended, in this process
    (``attnprops check`` reads the plugin's progress file there)."""
    context = _fork_server()
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "pytest.log")
        if context is None:
            with open(log, "w", encoding="utf-8") as out:
                process = subprocess.Popen(
                    [sys.executable, "-m", "pytest", *args],
                    cwd=cwd,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
                try:
                    while process.poll() is None:
                        _wait(poll, lambda: process.wait(POLL_SECONDS))
                except BaseException:  # as below (its xdist workers end when their pipes do)
                    process.kill()
                    raise
            code = process.returncode
        else:
            process = context.Process(
                target=_child, args=(list(args), str(cwd), dict(env), log, os.getpid())
            )
            process.start()
            try:
                while process.is_alive():
                    _wait(poll, lambda: process.join(POLL_SECONDS))
            except BaseException:  # KeyboardInterrupt, an error in poll: end the run with us
                _end_group(process.pid)
                process.terminate()  # in case it had not made its group yet
                raise
            process.join()
            code = _status(process.exitcode, log + STATUS_SUFFIX)
        if poll is not None:
            poll()
        output = (
            Path(log).read_text(encoding="utf-8", errors="replace") if os.path.exists(log) else ""
        )
    if code is None or code < 0:  # killed by a signal: report it as pytest's internal error
        output += f"\n{SIGNAL_MARK} {_signal_name(-(code or 0))}]"
        code = 3
    return PytestRun(code, output)


def _end_group(leader: int) -> None:
    """SIGTERM to the process group of the child ``leader`` (it may be gone already)."""
    try:
        os.killpg(leader, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass


SIGNAL_MARK = "[pytest process ended by signal"  # the line run_pytest adds after a signal


def _status(exitcode: int | None, written: str) -> int | None:
    """A fork-server child's exit status: ``exitcode`` as the fork server reports it, unless
    that is :data:`STATUS_LOST` and the child wrote its status to the file ``written`` (an
    int) before it exited; then that."""
    if exitcode != STATUS_LOST:
        return exitcode
    try:
        with open(written, encoding="utf-8") as status:
            return int(status.read())
    except (OSError, ValueError):  # the child ended before writing it: the status is lost
        return exitcode


def _signal_name(number: int) -> str:
    """``11 (SIGSEGV)``, or the bare number of a signal Python does not name."""
    try:
        return f"{number} ({signal.Signals(number).name})"
    except ValueError:
        return str(number)


def _wait(poll, wait) -> None:
    """One ``wait`` of at most :data:`POLL_SECONDS`, then ``poll``."""
    try:
        wait()
    except subprocess.TimeoutExpired:
        pass
    if poll is not None:
        poll()
