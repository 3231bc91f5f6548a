"""The suite's runs make CPython's full garbage collections rarer, and set the collector back
afterwards (:mod:`properties.garbage_collection`); runs that do not use the suite are left
alone."""

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


# Records the thresholds when a run starts (before any plugin's pytest_configure; the first
# run from CPython 3.11's defaults), inside its test, and when it has ended (after every
# plugin's pytest_unconfigure).
RECORDER = textwrap.dedent("""\
    import gc, json, os, pytest

    def _record(name):
        with open("thresholds.jsonl", "a") as out:
            out.write(json.dumps([name, gc.get_threshold()]) + "\\n")

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(config):
        if not os.path.exists("thresholds.jsonl"):  # the first run: from CPython's defaults
            gc.set_threshold(700, 10, 10)
        _record("start")

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(config):
        _record("end")
""")
OUTER = textwrap.dedent("""\
    import gc, json, pytest

    def test_outer():
        with open("thresholds.jsonl", "a") as out:
            out.write(json.dumps(["test", gc.get_threshold()]) + "\\n")
        if NESTED:  # a second run in this process, as pytester's in-process runs do
            assert pytest.main(["-q", "-p", "no:cacheprovider", "inner/test_inner.py"]) == 0
""")


def _thresholds_of_a_run(tmp_path, *, uses_suite: bool, nested: bool) -> list:
    """Run OUTER in a fresh process (the fork-server runner) in ``tmp_path`` with the
    RECORDER conftest, the suite used (``--attn-impl``) or not; what it recorded."""
    (tmp_path / "conftest.py").write_text(RECORDER, encoding="utf-8")
    (tmp_path / "test_outer.py").write_text(f"NESTED = {nested}\n{OUTER}", encoding="utf-8")
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "test_inner.py").write_text("def test_inner():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    args = ["-q", "-p", "no:cacheprovider", "-o", "addopts=", "test_outer.py"]
    run = pytest_process.run_pytest(
        args + (["--attn-impl", "attnprops.impl"] if uses_suite else []), cwd=tmp_path, env=env
    )
    assert run.returncode == 0, run.output
    lines = (tmp_path / "thresholds.jsonl").read_text(encoding="utf-8").splitlines()
    return [(name, tuple(values)) for name, values in map(json.loads, lines)]


@pytest.mark.parametrize("nested", [False, True], ids=["one run", "a run inside the run"])
def test_a_run_of_the_suite_puts_the_thresholds_back(thresholds, tmp_path, nested):
    seen = _thresholds_of_a_run(tmp_path, uses_suite=True, nested=nested)
    default, raised = (700, 10, 10), (700, 10, FULL_COLLECTION_EVERY)
    outer = [seen[0], seen[1], seen[-1]]  # the inner run records a start and an end too
    assert outer == [("start", default), ("test", raised), ("end", default)], seen


def test_a_run_without_the_suite_leaves_the_collector_alone(thresholds, tmp_path):
    seen = _thresholds_of_a_run(tmp_path, uses_suite=False, nested=False)
    assert seen == [("start", (700, 10, 10)), ("test", (700, 10, 10)), ("end", (700, 10, 10))]
