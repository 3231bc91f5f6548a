"""What a run of the suite changes in its process, and puts back when it ends: CPython's
collector makes full collections rarer (:mod:`properties.garbage_collection`), and the
subject (``ATTN_IMPL``) and the thread counts are exported for the processes the run starts
(properties/plugin.py). Runs that do not use the suite are left alone."""

from __future__ import annotations

import gc
import json
import os
import textwrap

import pytest

from attnprops.ci import pytest_process
from attnprops.properties import ENV_VAR
from attnprops.properties.garbage_collection import FULL_COLLECTION_EVERY
from attnprops.properties.garbage_collection import fewer_full_collections
from attnprops.properties.garbage_collection import restore
from attnprops.properties.threads import THREAD_ENV_VARS


@pytest.fixture
def thresholds():
    """The collector's thresholds, put back after the test whatever it set; skips where the
    collector has no third threshold (CPython's incremental one reads 0 whatever is set)."""
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    kept = gc.get_threshold()[2] == 10
    gc.set_threshold(*before)
    if not kept:
        pytest.skip("this collector has no third threshold")
    yield before
    gc.set_threshold(*before)


def test_this_run_collects_the_oldest_generation_rarely(thresholds):
    assert gc.get_threshold()[2] >= FULL_COLLECTION_EVERY


@pytest.mark.parametrize(
    ("before", "during"),
    [
        ((700, 10, 10), (700, 10, FULL_COLLECTION_EVERY)),  # CPython 3.11's defaults
        ((5000, 20, 5), (5000, 20, FULL_COLLECTION_EVERY)),  # the first two are kept
        ((700, 10, 5000), (700, 10, 5000)),  # a larger third threshold is kept
    ],
)
def test_only_the_third_threshold_rises_and_all_come_back(thresholds, before, during):
    gc.set_threshold(*before)
    returned = fewer_full_collections()
    assert returned == before
    assert gc.get_threshold() == during
    restore(returned)
    assert gc.get_threshold() == before


# Records the state (the thresholds and the variables a run may export) when a run starts
# (before any plugin's pytest_configure; the first run from CPython 3.11's thresholds and
# none of the variables), inside its test, and when it has ended (after every plugin's
# pytest_unconfigure).
RECORDER = textwrap.dedent("""\
    import gc, json, os, pytest

    NAMES = ("ATTN_IMPL", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

    def record(name):
        with open("state.jsonl", "a") as out:
            variables = {v: os.environ.get(v) for v in NAMES}
            out.write(json.dumps([name, gc.get_threshold(), variables]) + "\\n")

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(config):
        if not os.path.exists("state.jsonl"):  # the first run: from CPython's defaults
            gc.set_threshold(700, 10, 10)
        record("start")

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(config):
        record("end")
""")
OUTER = textwrap.dedent("""\
    import json, pytest
    from conftest import record
    from attnprops.properties.plugin import current_subject

    def test_outer():
        record("test")
        if NESTED:  # a second run in this process, as pytester's in-process runs do, with
            # another subject; then this run's subject must be its own again
            other = ["--attn-impl", "attnprops.properties.subjects.oracle_float64"]
            assert pytest.main(["-q", "-p", "no:cacheprovider", *other, "inner/test_inner.py"]) == 0
            with open("subject.json", "w") as out:
                json.dump(current_subject().name, out)
""")
NONE_SET = dict.fromkeys((ENV_VAR, *THREAD_ENV_VARS))


def _state_of_a_run(tmp_path, *, uses_suite: bool, nested: bool, workers: int = 0) -> list:
    """Run OUTER in a fresh process (the fork-server runner) in ``tmp_path`` with the
    RECORDER conftest and none of the variables set, the suite used (``--attn-impl``) or not,
    ``-n workers`` when given; what it recorded: (when, thresholds, variables)."""
    (tmp_path / "conftest.py").write_text(RECORDER, encoding="utf-8")
    (tmp_path / "test_outer.py").write_text(f"NESTED = {nested}\n{OUTER}", encoding="utf-8")
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "test_inner.py").write_text("def test_inner():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k not in NONE_SET}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    args = ["-q", "-p", "no:cacheprovider", "-o", "addopts=", "-n", str(workers), "test_outer.py"]
    run = pytest_process.run_pytest(
        args + (["--attn-impl", "attnprops.impl"] if uses_suite else []), cwd=tmp_path, env=env
    )
    assert run.returncode == 0, run.output
    lines = (tmp_path / "state.jsonl").read_text(encoding="utf-8").splitlines()
    return [(name, tuple(values), names) for name, values, names in map(json.loads, lines)]


@pytest.mark.parametrize("nested", [False, True], ids=["one run", "a run inside the run"])
def test_a_run_of_the_suite_puts_back_what_it_changed(thresholds, tmp_path, nested):
    """The thresholds are raised and the subject exported while the run lasts (a run started
    inside it, in the same process, with another subject, gives it back when it ends: the
    variable and the outer run's own subject), and both are put back when it ends, so a
    later run in the process neither keeps the collector slowed nor takes the first one's
    subject."""
    seen = _state_of_a_run(tmp_path, uses_suite=True, nested=nested)
    default, raised = (700, 10, 10), (700, 10, FULL_COLLECTION_EVERY)
    outer = [seen[0][:2], seen[1][:2], seen[-1][:2]]  # the inner run records a start and an end
    assert outer == [("start", default), ("test", raised), ("end", default)], seen
    during = {**NONE_SET, ENV_VAR: "attnprops.impl"}
    assert [s[2] for s in seen] == [NONE_SET, during] + [during] * (2 * nested) + [NONE_SET]
    if nested:
        subject = json.loads((tmp_path / "subject.json").read_text(encoding="utf-8"))
        assert subject == "attnprops.impl"


def test_a_run_without_the_suite_leaves_the_process_alone(thresholds, tmp_path):
    seen = _state_of_a_run(tmp_path, uses_suite=False, nested=False)
    assert seen == [(when, (700, 10, 10), NONE_SET) for when in ("start", "test", "end")]


@pytest.mark.e2e  # starts two xdist workers, fresh interpreters (about 4 s)
def test_workers_one_thread_each_while_the_run_lasts(tmp_path):
    """With xdist's workers the thread counts are set to 1 for the run (the test runs in a
    worker that inherited them) and unset after it."""
    seen = _state_of_a_run(tmp_path, uses_suite=True, nested=False, workers=2)
    during = {**NONE_SET, ENV_VAR: "attnprops.impl", **dict.fromkeys(THREAD_ENV_VARS, "1")}
    assert seen[0][2] == NONE_SET and seen[-1][2] == NONE_SET, seen
    assert during in [s[2] for s in seen if s[0] == "test"], seen
