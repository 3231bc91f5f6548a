"""attnprops installed (not editable) is a pytest plugin with one import name: the README's
"In your own repository" commands, run as written in a project that has its own ``ci/`` and
``impl/`` packages, run the installed property suite against the project's subject (the
README's adapter), hold no test of the suite itself, and leave the project's own packages
alone.

The install is ``pip install --no-deps --target DIR`` of a copy of this
repository (a wheel built and unpacked, as ``pip install .`` into a venv does; the copy keeps
setuptools' ``build/`` out of the repository; the dependencies are this environment's), put
first on ``PYTHONPATH`` so it, not an editable install, is what runs.
The commands run in plain subprocesses (nothing preloaded), narrowed by ``PYTEST_ADDOPTS`` to
a few properties and the project's own test (the commands themselves are the README's).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attnprops import properties
from attnprops.ci.tests.test_readme import readme_block

SUITE_ROOT = Path(properties.__file__).resolve().parent.parent
README = SUITE_ROOT / "README.md"

PROPERTIES = (
    "test_output_matches_oracle",
    "test_is_causal_equals_explicit_mask",
    "test_seed_examples",
)

OWN_TEST = """\
import ci, impl, os
import attnprops.ci


def test_own_packages_are_the_projects():
    assert ci.OWNER == "project" and impl.OWNER == "project"
    assert attnprops.ci.__file__.startswith(os.environ["INSTALLED"])
"""


def _readme_block(title: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text[text.index(title) :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, f"README.md lost the bash block after {title!r}"
    return [line.split("#", 1)[0].strip() for line in block.group(1).splitlines() if line.strip()]


@pytest.mark.e2e
def test_installed_plugin_runs_the_suite_beside_a_projects_own_ci_and_impl(tmp_path):
    source, site = tmp_path / "source", tmp_path / "site"
    shutil.copytree(
        SUITE_ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv*",
            "build",
            "*.egg-info",
            "__pycache__",
            ".hypothesis",
            ".pytest_cache",
            "mutation-report",
            "results",
        ),
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-compile",
            "--target",
            str(site),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert not (site / "ci").exists() and not (site / "impl").exists()  # one import name
    installed = site / "attnprops"

    project = tmp_path / "project"
    for package in ("ci", "impl"):
        (project / package).mkdir(parents=True)
        (project / package / "__init__.py").write_text('OWNER = "project"\n')
    (project / "tests").mkdir()
    (project / "tests" / "test_own.py").write_text(OWN_TEST)
    (project / "mymodule.py").write_text(readme_block("my_adapter.py"))
    (project / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\ntestpaths = ["tests"]\npythonpath = ["."]\n'
    )

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ATTN_", "PYTEST_", "HYPOTHESIS_")) and k != "PYTHONPATH"
    }
    env.update(
        PYTHONPATH=str(site),
        INSTALLED=str(installed),
        HYPOTHESIS_PROFILE="dev",
        PYTHONDONTWRITEBYTECODE="1",
        PYTEST_ADDOPTS="-p no:cacheprovider -v -k '"
        + " or ".join(PROPERTIES + ("test_own",))
        + "'",
    )
    commands = _readme_block("In your own repository")
    assert len(commands) == 2 and all(c.startswith("pytest ") for c in commands), commands
    for command, own_test in zip(commands, (True, False)):
        argv = [sys.executable, "-m", *shlex.split(command)]
        proc = subprocess.run(
            argv, cwd=project, env=env, capture_output=True, text=True, timeout=300
        )
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, (command, out[-4000:])
        assert f"attnprops 0.1.0 from {installed}" in out, (command, out[-4000:])
        assert "attnprops subject: mymodule" in out, (command, out[-4000:])
        ran = re.findall(r"^(\S+::\S+) (PASSED|SKIPPED|FAILED)", out, re.M)
        names = {nodeid.split("::")[-1].split("[")[0] for nodeid, _ in ran}
        passed = {nodeid.split("::")[-1].split("[")[0] for nodeid, o in ran if o == "PASSED"}
        assert set(PROPERTIES) <= passed, (command, ran)  # some seed examples need a KV cache
        assert ("test_own_packages_are_the_projects" in names) == own_test, (command, ran)
        assert not any("meta_tests" in nodeid for nodeid, _ in ran), (command, ran)
        assert "FAILED" not in {outcome for _, outcome in ran}, (command, ran)
