"""pytest plugin of the property suite: subject selection, profiles, report header.

Installed attnprops registers it with pytest (the ``pytest11`` entry point
``attnprops.properties.plugin``); a vendored copy loads it with ``pytest_plugins =
["attnprops.properties.plugin"]`` in the root ``conftest.py``.

*Inert unless used.* Installed, it is loaded into every pytest run of the environment; it only
adds its options there. It acts (header, subject, markers' effects, results) when the run
*uses the suite*: a subject is named (``--attn-impl``, ``ATTN_IMPL``) or the suite's folder
is inside the rootdir (this repository, a vendored copy) or named on the command line.

- *The suite without copying:* ``pytest --attn-impl MODULE`` in any folder also collects the
  installed property tests when the command line names no paths (pytest's own default
  arguments, ``testpaths`` or the folder, are kept too); ``pytest --pyargs
  attnprops.properties --attn-impl MODULE`` runs the suite alone.
- *Tests of the suite itself* (``properties/meta_tests``) are collected only for the default
  subject, ``attnprops.impl``: a run against a user's subject holds only properties.

- ``--attn-impl MODULE`` (or ``ATTN_IMPL``) selects the subject; default ``impl``. A module
  name (importable from the current folder or ``PYTHONPATH``) or a ``.py`` file.
- ``--attn-results FILE`` writes one JSON line per test: outcome and every distinct failure
  with its message, counterexample and the subject's frame (:mod:`properties.results`);
  ``attnprops check`` and ``attnprops mutants`` read it. ``--attn-progress FILE`` writes the
  run's events as they happen, one JSON line each: ``{"event": "collected", "tests": N}``,
  ``{"event": "started", "nodeid", "test"}`` and ``{"event": "finished", ...}`` (the test's
  results record); ``attnprops check`` prints its progress from them. ``--attn-tests
  NAME,...`` runs only those property functions, in that order. ``--attn-shard I/N`` keeps
  every N-th collected test from the I-th (:func:`parse_shard`; the same split in every
  process), as ``attnprops check --shard`` and ``attnprops mutants --shard`` do, so a CI
  matrix fans a run out.
- ``@pytest.mark.robustness(why)`` marks a *robustness-tier* property (see
  :data:`ROBUSTNESS_REASON`): reported as a non-strict xfail (``x`` when the subject fails
  it, ``X`` when it passes) unless ``--attn-robustness=gate`` (or ``ATTN_ROBUSTNESS=gate``),
  which this repository's own runs and the mutation runner use.
- With pytest-xdist (``-n N``, N > 1) each process gets one BLAS/OpenMP thread unless the
  environment sets one (:func:`one_thread_per_process`).
- ``HYPOTHESIS_PROFILE`` / ``--hypothesis-profile`` selects ``dev``, ``ci`` (default) or
  ``thorough`` (see :mod:`properties.profiles`).
- ``@pytest.mark.requires("kv_cache", ...)`` skips a test, with the reason, when the subject
  declares it lacks a capability (see :mod:`properties.subject`).
- ``--attn-xfail FILE`` (or ``ATTN_XFAIL``, ``os.pathsep``-separated) and a subject module's
  ``ATTNPROPS_EXPECTED_FAILURES = "relative/path.txt"`` (relative to the module's folder) name
  *expected-failures files*: known deviations of a subject, by test id. See
  :func:`read_expected_failures` for the format. Each listed test is marked
  ``xfail(strict=True, raises=AssertionError)`` with the file's reason: it must fail, as a
  property violation, or the run fails (a fixed deviation must be removed from the file). An
  id that matches no collected test is a collection error, so the file cannot rot silently.
- The header names the subject, its version, its declared conventions, the profile and the
  expected-failures files.
"""

from __future__ import annotations

import functools
import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

# Only what every pytest run needs: installed, this plugin is loaded into runs that never use
# the suite, so Hypothesis, NumPy and the subject machinery are imported when a run does
# (pytest_configure, current_subject).
from attnprops.properties import DEFAULT_SUBJECT, ENV_VAR, results

if TYPE_CHECKING:
    from attnprops.properties.subject import Subject

_STATE: dict = {}
# Examples each test ran in this process (see _count_examples): the record's "examples"
# (properties/results.py).
_EXAMPLES: Counter = Counter()
_FAILED: set = set()  # node ids whose property has failed once (shrinking is not counted)
_CURRENT: dict = {}  # "nodeid": the test running now in this process
EXAMPLES_PROPERTY = "attnprops_examples"  # the user_properties key that carries the count

# Options for a pytest subprocess that runs the suite and reads only pass/fail and its own
# messages: no assertion rewriting (the properties raise PropertyViolation with their own
# messages, and rewriting would re-compile all of Hypothesis in every process that cannot
# cache bytecode) and no unraisable-exception check (five gc.collect() at exit). About
# 1.6 s less per process here.
FAST_START = ("--assert=plain", "-p", "no:unraisableexception")

XFAIL_ENV_VAR = "ATTN_XFAIL"
XFAIL_ATTRIBUTE = "ATTNPROPS_EXPECTED_FAILURES"

# The robustness tier: properties whose exact result is well defined and representable but
# which straightforward floating-point code (PyTorch SDPA and JAX among it, docs/findings.md
# F3) fails, such as values near the dtype's maximum. A user's gate should not fail on
# them by default; they are reported (non-strict xfail) unless --attn-robustness=gate.
ROBUSTNESS_MODES = ("report", "gate")
ROBUSTNESS_ENV_VAR = "ATTN_ROBUSTNESS"
ROBUSTNESS_REASON = "robustness tier (reported, not gated; --attn-robustness=gate gates it)"

# The warnings policy (README "Warnings"): a RuntimeWarning raised in this project's own code
# (the oracle, impl, the properties) is an error; one raised in a subject's code is shown in
# pytest's warnings summary, never a failure. Added to pytest's ``filterwarnings`` in every
# run that uses the suite (this repository's, ``attnprops check``/``mutants``, an installed
# or vendored suite), after the project's own filters.
WARNINGS_POLICY = r"error::RuntimeWarning:(attnprops\.)?(impl|oracle|properties)(\.|$)"

# Thread-pool sizes of the numerical libraries (OpenBLAS, MKL, OpenMP: NumPy's matmul, torch's
# intra-op pool), read when each library loads.
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def pytest_addoption(parser):
    """``--attn-impl MODULE`` and ``--attn-xfail FILE`` (repeatable)."""
    group = parser.getgroup("attnprops", "attention property suite")
    group.addoption(
        "--attn-impl",
        action="store",
        default=None,
        metavar="MODULE",
        help=f"module under test (default: ${ENV_VAR} or {DEFAULT_SUBJECT!r}); naming one "
        f"also collects the installed property suite when no paths are given",
    )
    group.addoption(
        "--attn-results",
        action="store",
        default=None,
        metavar="FILE",
        help="write one JSON line per test to FILE: outcome, every distinct failure with its "
        "message, counterexample and the subject's frame (see properties/results.py)",
    )
    group.addoption(
        "--attn-progress",
        action="store",
        default=None,
        metavar="FILE",
        help="write the run's events to FILE as they happen, one JSON line each: collected "
        "(with the number of tests), started and finished (with the test's record)",
    )
    group.addoption(
        "--attn-tests",
        action="store",
        default=None,
        metavar="NAME[,NAME...]",
        help="run only the property tests of these function names, in this order (a name "
        "that matches no collected test is a usage error)",
    )
    group.addoption(
        "--attn-shard",
        action="store",
        default=None,
        metavar="I/N",
        help="run shard I of N (1-based): every N-th collected test from the I-th",
    )
    group.addoption(
        "--attn-robustness",
        action="store",
        choices=ROBUSTNESS_MODES,
        default=None,
        help=f"robustness-tier properties (@pytest.mark.robustness): 'report' (default, or "
        f"${ROBUSTNESS_ENV_VAR}) runs them as non-strict xfails, shown but not failing "
        f"the run; 'gate' makes them ordinary properties",
    )
    group.addoption(
        "--attn-xfail",
        action="append",
        default=None,
        metavar="FILE",
        help=f"expected-failures file: test ids with '# reason' comments, marked "
        f"xfail(strict=True) (repeatable; default: ${XFAIL_ENV_VAR}; the subject's "
        f"{XFAIL_ATTRIBUTE} always applies)",
    )


@pytest.hookimpl(tryfirst=True, specname="pytest_configure")
def pytest_configure_profiles(config):
    """Register the suite's Hypothesis profiles (importing :mod:`properties.profiles` does)
    before Hypothesis's own plugin loads ``--hypothesis-profile``, in runs that use the
    suite."""
    if _uses_suite(config):
        from attnprops.properties import profiles  # noqa: F401


def pytest_configure(config):
    """Load the profile, the subject and its expected-failures files.

    Raises:
        pytest.UsageError: the subject cannot be loaded, an expected-failures file cannot
            be read or parsed (the message names the file and line), or a size variable
            (``ATTNPROPS_MAX_LEN``, ``ATTNPROPS_MAX_DECODE_LEN``) is not a positive integer.
    """
    config.addinivalue_line(
        "markers",
        "requires(*capabilities): skip unless the subject declares these capabilities",
    )
    config.addinivalue_line(
        "markers",
        "robustness(why): a robustness-tier property, reported but not gated unless "
        "--attn-robustness=gate",
    )
    config.addinivalue_line(
        "markers", "e2e: an end-to-end test of the suite itself (install, vendoring, replay)"
    )
    _STATE.clear()
    _STATE["active"] = _uses_suite(config)
    if not _STATE["active"]:
        return
    config.addinivalue_line("filterwarnings", WARNINGS_POLICY)
    from attnprops.properties.profiles import ignore_local_constants

    _STATE["constants_ignored"] = ignore_local_constants()  # draws independent of the source
    _add_suite(config)
    mode = config.getoption("--attn-robustness") or os.environ.get(ROBUSTNESS_ENV_VAR) or "report"
    if mode not in ROBUSTNESS_MODES:
        raise pytest.UsageError(
            f"attnprops: {ROBUSTNESS_ENV_VAR}={mode!r}: use one of {', '.join(ROBUSTNESS_MODES)}"
        )
    _STATE["robustness"] = mode
    from attnprops.properties.profiles import load_profile
    from attnprops.properties.sizes import limits
    from attnprops.properties.subject import SubjectError, load_subject

    one_thread_per_process(workers=config.getoption("numprocesses", None))
    try:  # --hypothesis-profile wins over $HYPOTHESIS_PROFILE; $ATTNPROPS_DATABASE applies
        _STATE["profile"] = load_profile(config.getoption("hypothesis_profile", None))
    except ValueError as exc:
        raise pytest.UsageError(f"attnprops: {exc}") from None
    try:
        limits(_STATE["profile"])  # ATTNPROPS_MAX_LEN=ten: one usage error, not N failures
    except ValueError as exc:
        raise pytest.UsageError(f"attnprops: {exc}") from None
    name = _named_subject(config) or DEFAULT_SUBJECT
    # Exported so the subject is the same in xdist workers and in subprocesses.
    os.environ[ENV_VAR] = name
    try:
        _STATE["subject"] = load_subject(name)
    except SubjectError as exc:
        raise pytest.UsageError(str(exc)) from None
    _STATE["xfail_files"] = _xfail_files(config, _STATE["subject"])
    entries = []
    for path in _STATE["xfail_files"]:
        try:
            entries += read_expected_failures(path)
        except (OSError, ValueError) as exc:
            raise pytest.UsageError(f"attnprops: expected-failures file {path}: {exc}") from None
    _STATE["xfail_entries"] = entries
    _STATE["count_examples"] = bool(
        config.getoption("--attn-results") or config.getoption("--attn-progress")
    )
    for key, option in (("results", "--attn-results"), ("progress", "--attn-progress")):
        _STATE[key] = None
        name = config.getoption(option)
        if name and not hasattr(config, "workerinput"):  # xdist: the controller writes
            path = Path(config.invocation_params.dir, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            _STATE[key] = path.open("w", encoding="utf-8")


SUITE_DIR = Path(__file__).resolve().parent  # properties/: the property tests
META_TESTS_DIR = SUITE_DIR / "meta_tests"


def _named_subject(config) -> str | None:
    return config.getoption("--attn-impl") or os.environ.get(ENV_VAR) or None


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _uses_suite(config) -> bool:
    """Whether this run uses the property suite (module docstring, *Inert unless used*)."""
    if _named_subject(config):
        return True
    if getattr(config.option, "pyargs", False) and any(
        a.split("::", 1)[0].startswith(__package__) for a in config.args
    ):
        return True  # pytest --pyargs attnprops.properties[.test_x]
    roots = [Path(config.rootpath).resolve(), *_arg_paths(config)]
    return any(_within(SUITE_DIR, root) or _within(root, SUITE_DIR) for root in roots)


def _arg_paths(config) -> list[Path]:
    """The run's arguments as absolute paths (their ``::test`` parts dropped)."""
    return [Path(config.invocation_params.dir, a.split("::", 1)[0]).resolve() for a in config.args]


def _add_suite(config) -> None:
    """Collect the property tests too when a subject is named and the command line gives no
    paths (``pytest --attn-impl MODULE``: pytest's default arguments are the ``testpaths`` or
    the folder). Once: an xdist worker receives the controller's arguments."""
    if not _named_subject(config):
        return
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        return
    if any(_within(SUITE_DIR, path) for path in _arg_paths(config)):
        return  # the default arguments already hold the suite (this repository, a copy)
    config.args.append(str(SUITE_DIR))


def pytest_ignore_collect(collection_path, config):
    """The suite's own tests (``properties/meta_tests``) are not collected for a named
    subject other than the default: a user's run holds only properties."""
    if not _STATE.get("active"):
        return None
    name = _named_subject(config)
    if (
        name
        and name != DEFAULT_SUBJECT
        and _within(Path(collection_path).resolve(), META_TESTS_DIR)
    ):
        return True
    return None


def one_thread_per_process(*, workers) -> None:
    """Before parallel processes start (pytest-xdist's workers, ``workers`` of them, or the
    mutation runner's pool), give each one thread per numerical library, unless the
    environment already sets the size (:data:`THREAD_ENV_VARS`; the processes inherit it).

    Each process otherwise starts one BLAS / OpenMP thread per core, so two processes on two
    cores run four busy threads: measured here, ``pytest -n auto`` took 59-62 s with the
    default pools and 49 s with one thread per worker (2 cores; the properties' matmuls are
    small, and spinning pool threads cost more than they gain). ``workers`` None, 0 or 1
    (no parallel processes): nothing changes.
    """
    if isinstance(workers, int) and workers > 1:
        for name in THREAD_ENV_VARS:
            os.environ.setdefault(name, "1")


def pytest_unconfigure(config):
    for key in ("results", "progress"):
        stream = _STATE.pop(key, None)
        if stream is not None:
            stream.close()


def _count_examples(items) -> None:
    """Count the examples each Hypothesis property runs, through its documented hook for
    wrapping the test body (``test.hypothesis.inner_test``, replaceable "to wrap the inner
    test"): every call up to and including the first failing one, less the calls rejected by
    ``assume``/filters (``UnsatisfiedAssumption``): the explicit examples (profiles that run
    them) and the generated ones until the property first fails, or all of them when it
    passes; never the shrinking. (Hypothesis's observability callbacks could count them too,
    but they build a JSON observation of every example: measured here, 10-25 % more time
    for the oracle-backed properties of test_values and test_visibility.)"""
    from hypothesis.errors import UnsatisfiedAssumption

    for item in items:
        handle = getattr(getattr(item, "obj", None), "hypothesis", None)
        inner = getattr(handle, "inner_test", None)
        if inner is None or getattr(inner, "_attnprops_counted", False):
            continue  # not a Hypothesis test, or a parametrization already wrapped

        @functools.wraps(inner)  # Hypothesis prints the counterexample with its name
        def counted(*args, __inner=inner, **kwargs):
            nodeid = _CURRENT.get("nodeid")
            try:
                result = __inner(*args, **kwargs)
            except UnsatisfiedAssumption:  # an invalid example: not counted
                raise
            except Exception:  # the first failure (Hypothesis's own BaseException signals,
                # such as a draw that ran out of data, are neither)
                if nodeid not in _FAILED:
                    _FAILED.add(nodeid)
                    _EXAMPLES[nodeid] += 1
                raise
            if nodeid not in _FAILED:
                _EXAMPLES[nodeid] += 1
            return result

        counted._attnprops_counted = True
        handle.inner_test = counted


def pytest_runtest_call(item):
    _CURRENT["nodeid"] = item.nodeid


def _write(key: str, record: dict) -> None:
    """One JSON line to the ``results`` or ``progress`` stream, if this process writes it."""
    stream = _STATE.get(key)
    if stream is not None:
        stream.write(json.dumps(record) + "\n")
        stream.flush()


def pytest_collection_finish(session):
    """Progress: the number of tests to run (without xdist; see the xdist hook below)."""
    _write("progress", {"event": "collected", "tests": len(session.items)})


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """Progress under xdist: the first worker's collection (they all collect the same)."""
    if not _STATE.get("progress_collected"):
        _STATE["progress_collected"] = True
        _write("progress", {"event": "collected", "tests": len(ids)})


def pytest_runtest_logstart(nodeid, location):
    _write(
        "progress",
        {"event": "started", "nodeid": nodeid, "test": nodeid.rsplit("::", 1)[-1].split("[", 1)[0]},
    )


def _subject_files() -> tuple[str, ...]:
    """The subject's source: its module file, or its package folder."""
    module = current_subject().module
    path = getattr(module, "__file__", None)
    if not path:
        return ()
    path = Path(path).resolve()
    return (str(path.parent),) if path.name == "__init__.py" else (str(path),)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach each failure's record (:func:`properties.results.failures_of`: message,
    counterexample, subject frame, from the exception itself) to the report, in the process
    that ran the test; xdist carries ``user_properties`` to the controller."""
    outcome = yield
    if not _STATE.get("active"):
        return
    report = outcome.get_result()
    if call.when == "call" and _STATE.get("count_examples"):
        _FAILED.discard(item.nodeid)
        report.user_properties.append((EXAMPLES_PROPERTY, _EXAMPLES.pop(item.nodeid, 0)))
    if call.excinfo is not None and (report.failed or hasattr(report, "wasxfail")):
        failures = results.failures_of(call.excinfo.value, _subject_files())
        report.user_properties.append((results.PROPERTY_NAME, json.dumps(failures)))


def pytest_runtest_logreport(report):
    """Write the test's record to ``--attn-results`` (see :mod:`properties.results`): one
    per test (its call phase, or the phase that skipped or failed it)."""
    if (_STATE.get("results") is None and _STATE.get("progress") is None) or (
        report.when != "call" and report.outcome == "passed"
    ):
        return
    failures = [
        f
        for name, value in report.user_properties
        if name == results.PROPERTY_NAME
        for f in json.loads(value)
    ]
    examples = sum(value for name, value in report.user_properties if name == EXAMPLES_PROPERTY)
    record = results.record_of(report, failures, examples)
    _write("results", record)
    _write("progress", {"event": "finished", **record})


def _version() -> str:
    """The installed distribution's version, or "(not installed)" for a vendored copy."""
    from importlib import metadata

    try:
        return metadata.version("attnprops")
    except metadata.PackageNotFoundError:
        return "(not installed)"


def pytest_report_header(config):
    """The profile, the subject with its declarations, and each expected-failures file."""
    if not _STATE.get("active"):
        return None
    subject = _STATE.get("subject")
    lines = [
        f"attnprops {_version()} from {SUITE_DIR.parent}",
        f"attnprops hypothesis profile: {_STATE.get('profile')}",
    ]
    if subject is not None:
        lines.append(f"attnprops subject: {subject.describe()}")
    files = _STATE.get("xfail_files") or []
    if not files:
        lines.append("attnprops expected failures: none")
    for path in files:
        count = sum(1 for e in _STATE.get("xfail_entries", []) if e.file == str(path))
        lines.append(f"attnprops expected failures: {path} ({count} test ids)")
    lines.append(f"attnprops robustness tier: {_STATE.get('robustness', 'report')}")
    return lines


# ---------------------------------------------------------------------------------------------
# Expected-failures files


@dataclass(frozen=True)
class ExpectedFailure:
    """One line of an expected-failures file: a test id, why it fails, where it was read."""

    test_id: str
    reason: str
    file: str
    line: int

    def matches(self, nodeid: str) -> bool:
        """Whether the collected test ``nodeid`` is this entry.

        An id without ``[params]`` matches every parametrization; ids are compared as path
        suffixes, so ``properties/test_values.py::test_x`` also matches the vendored
        ``tests/properties/test_values.py::test_x`` (the plugin passes ids whose file part
        is an absolute path, see :func:`_item_id`).
        """
        if "[" not in self.test_id.rsplit("::", 1)[-1]:
            nodeid = _without_params(nodeid)
        return nodeid == self.test_id or nodeid.endswith("/" + self.test_id)


def _item_id(item) -> str:
    """The item's id with its file as an absolute path (``/abs/tests/test_x.py::test_y``):
    node ids are relative to the rootdir, which differs between this repository, a vendored
    tree and ``pytest --pyargs attnprops.properties``; absolute paths end the same way in all three."""
    _, sep, names = item.nodeid.partition("::")
    return f"{Path(item.path).resolve().as_posix()}{sep}{names}"


def _without_params(nodeid: str) -> str:
    head, sep, last = nodeid.rpartition("::")
    return head + sep + last.split("[", 1)[0]


def read_expected_failures(path) -> list[ExpectedFailure]:
    """Parse an expected-failures file.

    Format (UTF-8 text): one pytest test id per line, ``path/to/test_file.py::test_name``
    (optionally ``[params]``: without them every parametrization is meant). The reason is the
    ``# comment`` after the id on the same line or, when there is none, the block of ``#``
    comment lines just above it (a blank line ends a block, so one block can explain several
    ids). Blank lines and comment-only lines are otherwise ignored.

    Returns:
        The entries in file order.

    Raises:
        OSError: the file cannot be read.
        ValueError: a line is not a test id (no ``::``), an id has no reason, or an id is
            listed twice; the message names the line.
    """
    path = Path(path)
    entries: list[ExpectedFailure] = []
    block: list[str] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line:
            block = []
            continue
        if line.startswith("#"):
            block.append(line.lstrip("#").strip())
            continue
        test_id, _, comment = line.partition("#")
        test_id, comment = test_id.strip(), comment.strip()
        if "::" not in test_id or " " in test_id.split("[", 1)[0]:
            raise ValueError(
                f"line {number}: {test_id!r} is not a test id "
                "(expected path/to/test_file.py::test_name)"
            )
        reason = comment or " ".join(t for t in block if t)
        if not reason:
            raise ValueError(f"line {number}: {test_id} has no reason; add '# why it fails'")
        if test_id in seen:
            raise ValueError(f"line {number}: {test_id} is already listed on line {seen[test_id]}")
        seen[test_id] = number
        entries.append(ExpectedFailure(test_id, reason, str(path), number))
    return entries


def _xfail_files(config, subject: Subject) -> list[Path]:
    """The subject's file (module attribute) and the ``--attn-xfail``/``ATTN_XFAIL`` files."""
    files = []
    declared = getattr(subject.module, XFAIL_ATTRIBUTE, None)
    if declared:
        where = Path(getattr(subject.module, "__file__", None) or ".").resolve().parent
        files.append(where / declared)
    invocation = Path(config.invocation_params.dir)
    named = config.getoption("--attn-xfail")
    if named is None:
        named = [p for p in os.environ.get(XFAIL_ENV_VAR, "").split(os.pathsep) if p]
    files += [(invocation / p).resolve() for p in named]
    unique = []
    for path in files:
        if path not in unique:
            unique.append(path)
    return unique


_XFAIL_RAISES = (AssertionError, results.BaseExceptionGroup)  # Hypothesis's distinct failures


def _file_exists(config, file_part: str) -> bool:
    """Whether the test file of an id exists on disk although this run did not collect it
    (relative to the rootdir, the invocation folder, or the folder holding ``properties``)."""
    bases = {
        Path(config.rootpath),
        Path(config.invocation_params.dir),
        Path(__file__).resolve().parent.parent,
    }
    return any((base / file_part).is_file() for base in bases)


def _stale(entry: ExpectedFailure, items, config) -> str | None:
    """Why ``entry`` (which matched no collected test) is stale, or None when its test merely
    was not selected in this run (another file, or a node id on the command line)."""
    file_part, _, names = entry.test_id.partition("::")
    same_file = [
        item for item in items if _item_id(item).split("::", 1)[0].endswith("/" + file_part)
    ]
    if not same_file:
        return None if _file_exists(config, file_part) else "matches no test file"
    target = getattr(same_file[0], "module", None)
    for name in names.split("[", 1)[0].split("::"):
        target = getattr(target, name, None)
    if target is None:
        return f"matches no collected test (no {names.split('[', 1)[0]} in {file_part})"
    base = _without_params(entry.test_id)
    if base != entry.test_id and any(
        _without_params(_item_id(item)).endswith("/" + base) for item in same_file
    ):
        return "matches no collected test (no such parametrization)"
    return None


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselection: ids are matched on all tests
def pytest_collection_modifyitems(session, config, items):
    """Mark the listed tests xfail(strict=True); report ids that match no collected test;
    keep only the ``--attn-tests`` names, in their order."""
    if not _STATE.get("active"):
        return
    _mark_expected_failures(config, items)
    if _STATE.get("count_examples"):
        _count_examples(items)
    if _STATE.get("robustness", "report") == "report":
        for item in items:
            marker = item.get_closest_marker("robustness")
            if marker is not None and item.get_closest_marker("xfail") is None:
                why = marker.args[0] if marker.args else ""
                item.add_marker(
                    pytest.mark.xfail(
                        reason=f"{ROBUSTNESS_REASON}: {why}", strict=False, raises=_XFAIL_RAISES
                    )
                )
    names = config.getoption("--attn-tests")
    if names:
        wanted = [n.strip() for n in names.split(",") if n.strip()]
        order = {name: k for k, name in enumerate(wanted)}
        missing = [n for n in wanted if not any(_name(item) == n for item in items)]
        if missing:
            raise pytest.UsageError(
                f"attnprops: --attn-tests: no collected test named {', '.join(missing)}"
            )
        keep = sorted(
            (item for item in items if _name(item) in order), key=lambda item: order[_name(item)]
        )
        config.hook.pytest_deselected(items=[item for item in items if _name(item) not in order])
        items[:] = keep


# after -k/-m and --attn-tests (the hook above): shards split what would run
@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
def pytest_collection_modifyitems_shard(session, config, items):
    """``--attn-shard I/N``: keep shard I of N of the selected tests."""
    shard = config.getoption("--attn-shard") if _STATE.get("active") else None
    if shard:
        try:
            index, count = parse_shard(shard)
        except ValueError as exc:
            raise pytest.UsageError(f"attnprops: --attn-shard: {exc}") from None
        keep = shard_of(items, index, count)
        config.hook.pytest_deselected(items=[item for item in items if item not in keep])
        items[:] = keep


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` (1 <= I <= N) as ``(I, N)``.

    Raises:
        ValueError: anything else; the message shows the expected form.
    """
    index, sep, count = text.partition("/")
    if not (sep and index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count)):
        raise ValueError(f"{text!r}: expected I/N with 1 <= I <= N, e.g. 2/4")
    return int(index), int(count)


def shard_of(items: list, index: int, count: int) -> list:
    """Shard ``index`` of ``count`` (1-based) of ``items``: every ``count``-th from the
    ``index``-th, so parametrizations and files spread over the shards."""
    return items[index - 1 :: count]


def _name(item) -> str:
    """A test item's function name, without ``[params]``."""
    return getattr(item, "originalname", None) or item.name.split("[", 1)[0]


def _mark_expected_failures(config, items) -> None:
    entries: list[ExpectedFailure] = _STATE.get("xfail_entries") or []
    if not entries:
        return
    problems = []
    for entry in entries:
        matched = [item for item in items if entry.matches(_item_id(item))]
        for item in matched:
            item.add_marker(
                pytest.mark.xfail(
                    reason=f"known deviation of {current_subject().name}: {entry.reason} "
                    f"[{entry.file}:{entry.line}]",
                    strict=True,
                    raises=_XFAIL_RAISES,
                )
            )
        if not matched:
            problem = _stale(entry, items, config)
            if problem:
                problems.append(f"{entry.file}:{entry.line}: {entry.test_id} {problem}")
    if problems:
        report = pytest.CollectReport(
            "attnprops-expected-failures",
            "failed",
            "attnprops: stale expected-failures entries (remove or fix them):\n  "
            + "\n  ".join(problems),
            [],
        )
        config.hook.pytest_collectreport(report=report)


def current_subject() -> Subject:
    """The subject loaded at configuration time (also usable outside fixtures)."""
    subject = _STATE.get("subject")
    if subject is None:
        from attnprops.properties.subject import load_subject

        subject = _STATE["subject"] = load_subject()
    return subject


@pytest.fixture(scope="session")
def subject() -> Subject:
    """The attention module under test, with its declared capabilities."""
    return current_subject()


def pytest_runtest_setup(item):
    if not _STATE.get("active"):
        return
    marker = item.get_closest_marker("requires")
    if marker is None:
        return
    subject = current_subject()
    for capability in marker.args:
        if not getattr(subject.capabilities, capability):
            pytest.skip(f"subject {subject.name} declares {capability}=False")
