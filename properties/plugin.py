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
  every N-th collected test from the I-th (:func:`properties.selection.parse_shard`; the same split in every
  process), as ``attnprops check --shard`` and ``attnprops mutants --shard`` do, so a CI
  matrix fans a run out.
- ``@pytest.mark.robustness(why)`` marks a *robustness-tier* property (see
  :data:`properties.options.ROBUSTNESS_REASON`): reported as a non-strict xfail (``x`` when the subject fails
  it, ``X`` when it passes) unless ``--attn-robustness=gate`` (or ``ATTN_ROBUSTNESS=gate``),
  which this repository's own runs and the mutation runner use.
- With pytest-xdist (``-n N``, N > 1) each process gets one BLAS/OpenMP thread unless the
  environment sets one (:func:`properties.threads.one_thread_per_process`).
- ``HYPOTHESIS_PROFILE`` / ``--hypothesis-profile`` selects ``dev``, ``ci`` (default) or
  ``thorough`` (see :mod:`properties.profiles`).
- ``@pytest.mark.requires("kv_cache", ...)`` skips a test, with the reason, when the subject
  declares it lacks a capability (see :mod:`properties.subject`).
- ``--attn-xfail FILE`` (or ``ATTN_XFAIL``) and a subject module's
  ``ATTNPROPS_EXPECTED_FAILURES`` name *expected-failures files*: known deviations of a
  subject, by test id, marked strict xfails (:mod:`properties.expected_failures`).
- A run that uses the suite makes CPython's full garbage collections rarer while it runs
  (:mod:`properties.garbage_collection`) and exports its subject as ``ATTN_IMPL`` (for
  xdist's workers and the processes its tests start); the thresholds and the variables it set
  (the thread counts above included) are restored at the end, so a later run in the same
  process selects its own subject, and a run inside a run (pytester) gives the outer run its
  subject and state back.
- The header names the subject, its version, its declared conventions, the profile and the
  expected-failures files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

# Only what every pytest run needs: installed, this plugin is loaded into runs that never use
# the suite, so Hypothesis, NumPy and the subject machinery are imported when a run does
# (pytest_configure, current_subject).
from attnprops.properties import DEFAULT_SUBJECT
from attnprops.properties import ENV_VAR
from attnprops.properties import example_counts
from attnprops.properties import results
from attnprops.properties.expected_failures import XFAIL_RAISES
from attnprops.properties.expected_failures import mark_expected_failures
from attnprops.properties.expected_failures import read_expected_failures
from attnprops.properties.expected_failures import xfail_files
from attnprops.properties.garbage_collection import fewer_full_collections
from attnprops.properties.garbage_collection import restore
from attnprops.properties.options import ROBUSTNESS_ENV_VAR
from attnprops.properties.options import ROBUSTNESS_MODES
from attnprops.properties.options import ROBUSTNESS_REASON
from attnprops.properties.options import add_options
from attnprops.properties.selection import META_TESTS_DIR
from attnprops.properties.selection import SUITE_DIR
from attnprops.properties.selection import add_suite
from attnprops.properties.selection import named_subject
from attnprops.properties.selection import named_tests
from attnprops.properties.selection import parse_shard
from attnprops.properties.selection import shard_of
from attnprops.properties.selection import uses_suite
from attnprops.properties.selection import within
from attnprops.properties.threads import THREAD_ENV_VARS
from attnprops.properties.threads import one_thread_per_process

if TYPE_CHECKING:
    from attnprops.properties.subject import Subject

_STATE: dict = {}
_GC_THRESHOLDS = pytest.StashKey[tuple]()  # the collector's thresholds before this run
# the environment variables this run may set, as they were before it (None: unset)
_ENV_BEFORE = pytest.StashKey[dict]()
# _STATE as it was before this run: a run started inside another (in the same process) gives
# the outer run its own state back when it ends
_OUTER_STATE = pytest.StashKey[dict]()

# The warnings policy (README "Warnings"): a RuntimeWarning raised in this project's own code
# (the oracle, impl, the properties) is an error; one raised in a subject's code is shown in
# pytest's warnings summary, never a failure. Added to pytest's ``filterwarnings`` in every
# run that uses the suite (this repository's, ``attnprops check``/``mutants``, an installed
# or vendored suite), after the project's own filters.
WARNINGS_POLICY = r"error::RuntimeWarning:(attnprops\.)?(impl|oracle|properties)(\.|$)"


def pytest_addoption(parser):
    """The suite's options (:func:`properties.options.add_options`)."""
    add_options(parser)


@pytest.hookimpl(tryfirst=True, specname="pytest_configure")
def pytest_configure_profiles(config):
    """Register the suite's Hypothesis profiles (importing :mod:`properties.profiles` does)
    before Hypothesis's own plugin loads ``--hypothesis-profile``, in runs that use the
    suite."""
    if uses_suite(config):
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
    config.addinivalue_line(
        "markers",
        "oracle_backed: a property that runs the 50-digit oracle on every example; it runs "
        "a share of the profile's examples (properties.profiles.COSTLY_MARKERS)",
    )
    config.addinivalue_line(
        "markers",
        "kernel_sized: a property on kernel-sized cases; it runs a share of the profile's "
        "examples (properties.profiles.COSTLY_MARKERS)",
    )
    config.stash[_OUTER_STATE] = dict(_STATE)
    _STATE.clear()
    _STATE["active"] = uses_suite(config)
    if not _STATE["active"]:
        return
    config.addinivalue_line("filterwarnings", WARNINGS_POLICY)
    from attnprops.properties.profiles import ignore_local_constants

    _STATE["constants_ignored"] = ignore_local_constants()  # draws independent of the source
    add_suite(config)
    mode = config.getoption("--attn-robustness") or os.environ.get(ROBUSTNESS_ENV_VAR) or "report"
    if mode not in ROBUSTNESS_MODES:
        raise pytest.UsageError(
            f"attnprops: {ROBUSTNESS_ENV_VAR}={mode!r}: use one of {', '.join(ROBUSTNESS_MODES)}"
        )
    _STATE["robustness"] = mode
    from attnprops.properties.profiles import load_profile
    from attnprops.properties.sizes import limits
    from attnprops.properties.subject import SubjectError
    from attnprops.properties.subject import load_subject

    config.stash[_ENV_BEFORE] = {name: os.environ.get(name) for name in (ENV_VAR, *THREAD_ENV_VARS)}
    one_thread_per_process(workers=config.getoption("numprocesses", None))
    config.stash[_GC_THRESHOLDS] = fewer_full_collections()  # per run, as _ENV_BEFORE
    try:  # --hypothesis-profile wins over $HYPOTHESIS_PROFILE; $ATTNPROPS_DATABASE applies
        _STATE["profile"] = load_profile(
            config.getoption("hypothesis_profile", None),
            verbosity=config.getoption("hypothesis_verbosity", None),
            explain=bool(config.getoption("hypothesis_explain", False)),
        )
    except ValueError as exc:
        raise pytest.UsageError(f"attnprops: {exc}") from None
    try:
        limits(_STATE["profile"])  # ATTNPROPS_MAX_LEN=ten: one usage error, not N failures
    except ValueError as exc:
        raise pytest.UsageError(f"attnprops: {exc}") from None
    name = named_subject(config) or DEFAULT_SUBJECT
    # Exported so the subject is the same in xdist workers and in subprocesses.
    os.environ[ENV_VAR] = name
    try:
        _STATE["subject"] = load_subject(name)
    except SubjectError as exc:
        raise pytest.UsageError(str(exc)) from None
    _STATE["xfail_files"] = xfail_files(config, _STATE["subject"])
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


def pytest_ignore_collect(collection_path, config):
    """The suite's own tests (``properties/meta_tests``) are not collected for a named
    subject other than the default: a user's run holds only properties."""
    if not _STATE.get("active"):
        return None
    name = named_subject(config)
    if name and name != DEFAULT_SUBJECT and within(Path(collection_path).resolve(), META_TESTS_DIR):
        return True
    return None


def pytest_unconfigure(config):
    thresholds = config.stash.get(_GC_THRESHOLDS, None)
    if thresholds is not None:
        restore(thresholds)
        del config.stash[_GC_THRESHOLDS]
    for name, value in config.stash.get(_ENV_BEFORE, {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    config.stash[_ENV_BEFORE] = {}
    for key in ("results", "progress"):
        stream = _STATE.pop(key, None)
        if stream is not None:
            stream.close()
    outer = config.stash.get(_OUTER_STATE, None)
    if outer is not None:
        _STATE.clear()
        _STATE.update(outer)
        del config.stash[_OUTER_STATE]


def pytest_runtest_call(item):
    example_counts.started(item.nodeid)


def _write(key: str, record: dict) -> None:
    """One JSON line to the ``results`` or ``progress`` stream, if this process writes it."""
    stream = _STATE.get(key)
    if stream is not None:
        stream.write(json.dumps(record) + "\n")
        stream.flush()


def _collected(tests: int) -> dict:
    """The progress event of a finished collection: the tests to run and the subject with its
    declarations (as the pytest header gives them)."""
    subject = _STATE.get("subject")
    return {
        "event": "collected",
        "tests": tests,
        **({} if subject is None else {"subject": subject.describe()}),
        "kernel_sizes": _kernel_sizes(),
    }


def _kernel_sizes() -> str:
    """The largest kernel-sized draws of this run (its profile's, raised by the environment)."""
    from attnprops.properties.sizes import describe_limits
    from attnprops.properties.sizes import limits

    return describe_limits(limits())


def pytest_collection_finish(session):
    """Progress: the number of tests to run (without xdist; see the xdist hook below)."""
    _write("progress", _collected(len(session.items)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """Progress under xdist: the first worker's collection (they all collect the same)."""
    if not _STATE.get("progress_collected"):
        _STATE["progress_collected"] = True
        _write("progress", _collected(len(ids)))


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
        count = example_counts.finished(item.nodeid)
        report.user_properties.append((example_counts.EXAMPLES_PROPERTY, count))
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
    examples = sum(
        value for name, value in report.user_properties if name == example_counts.EXAMPLES_PROPERTY
    )
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
    lines.append(f"attnprops kernel sizes: {_kernel_sizes()}")
    return lines


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselection: ids are matched on all tests
def pytest_collection_modifyitems(session, config, items):
    """Mark the listed tests xfail(strict=True); report ids that match no collected test;
    keep only the ``--attn-tests`` names, in their order."""
    if not _STATE.get("active"):
        return
    mark_expected_failures(config, items, _STATE.get("xfail_entries") or [], current_subject().name)
    from attnprops.properties.draws import pin_seeds
    from attnprops.properties.draws import scale_costly

    scale_costly(items)
    pin_seeds(items, SUITE_DIR)
    if _STATE.get("count_examples"):
        example_counts.count_examples(items)
    if _STATE.get("robustness", "report") == "report":
        for item in items:
            marker = item.get_closest_marker("robustness")
            if marker is not None and item.get_closest_marker("xfail") is None:
                why = marker.args[0] if marker.args else ""
                item.add_marker(
                    pytest.mark.xfail(
                        reason=f"{ROBUSTNESS_REASON}: {why}", strict=False, raises=XFAIL_RAISES
                    )
                )
    names = config.getoption("--attn-tests")
    if names:
        keep = named_tests(items, names)
        config.hook.pytest_deselected(items=[item for item in items if item not in keep])
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
            declared = getattr(subject.capabilities, capability)
            pytest.skip(f"subject {subject.name} declares {capability}={declared!r}")
