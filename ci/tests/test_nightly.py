"""``.ci/nightly``: one ``attnprops check --seed N`` per (subject, seed), a report each, a
summary line each, and exit status 1 when any run failed."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from attnprops.ci.suite_runner import REPO

NIGHTLY = REPO / ".ci" / "nightly"

RAISES = """\
ATTNPROPS_CAPABILITIES = {"dtypes": ("float64",), "kv_cache": False, "kv_cache_bytes": False}


def attention(query, key, value, **options):
    raise NotImplementedError("not written yet")
"""


@pytest.mark.e2e
@pytest.mark.skipif(not NIGHTLY.exists(), reason="an installed attnprops has no .ci/ folder")
def test_nightly_runs_every_subject_with_every_seed(tmp_path):
    (tmp_path / "raises.py").write_text(RAISES, encoding="utf-8")
    env = dict(
        os.environ,
        ATTNPROPS_NIGHTLY_SUBJECTS="attnprops.impl ./raises.py",
        ATTNPROPS_NIGHTLY_SEEDS="3 4",
        ATTNPROPS_NIGHTLY_PROFILE="dev",
        ATTNPROPS_NIGHTLY_K="test_single_visible_key",
        ATTNPROPS_NIGHTLY_PARALLEL="2",
    )
    run = subprocess.run(
        ["bash", str(NIGHTLY), "out"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert run.returncode == 1, run.stdout + run.stderr  # raises.py fails
    lines = (tmp_path / "out" / "summary.txt").read_text().splitlines()
    assert [line.split(" s")[0].rsplit(" ", 1)[0] for line in lines] == [
        "attnprops.impl-seed3 rc=0",
        "attnprops.impl-seed4 rc=0",
        "raises.py-seed3 rc=1",
        "raises.py-seed4 rc=1",
    ], lines
    for seed in (3, 4):
        report = json.loads((tmp_path / "out" / f"attnprops.impl-seed{seed}.json").read_text())
        assert (report["seed"], report["profile"], report["passed"]) == (seed, "dev", True)
        assert report["examples"]["test_single_visible_key_returns_its_value"] > 0


@pytest.mark.e2e
@pytest.mark.skipif(not NIGHTLY.exists(), reason="an installed attnprops has no .ci/ folder")
@pytest.mark.parametrize(
    "settings, message",
    [
        ({"ATTNPROPS_NIGHTLY_PROFILE": "ci"}, "profile 'ci': use a random one, dev or thorough"),
        ({"ATTNPROPS_NIGHTLY_SEEDS": " "}, "ATTNPROPS_NIGHTLY_SEEDS is empty"),
        ({"ATTNPROPS_NIGHTLY_SEEDS": "1 -2"}, "seed '-2': seeds are integers >= 0"),
        ({"ATTNPROPS_NIGHTLY_PARALLEL": "0"}, "ATTNPROPS_NIGHTLY_PARALLEL='0': a positive"),
        ({"ATTNPROPS_NIGHTLY_SUBJECTS": "a/b.py a_b.py"}, "two runs would share the reports"),
    ],
)
def test_nightly_refuses_settings_it_cannot_use_before_any_run(tmp_path, settings, message):
    env = {**os.environ, "ATTNPROPS_NIGHTLY_SEEDS": "1", **settings}
    run = subprocess.run(
        ["bash", str(NIGHTLY), "out"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert run.returncode == 2 and message in run.stderr, run.stderr
    assert not (tmp_path / "out").exists()
