"""The profiles' example database (``$ATTNPROPS_DATABASE``): each accepted form builds the
database Hypothesis documents for it, and a bad form is a one-line error."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import database
from hypothesis import settings

from attnprops.properties.profiles import DATABASE_ENV_VAR
from attnprops.properties.profiles import database_from
from attnprops.properties.profiles import load_profile


def test_dir_database_is_a_directory_database(tmp_path):
    db = database_from(f"dir:{tmp_path}")
    assert isinstance(db, database.DirectoryBasedExampleDatabase)
    db.save(b"key", b"value")  # it writes where it was told
    assert list(db.fetch(b"key")) == [b"value"] and any(tmp_path.iterdir())


def test_github_database_reads_the_artifact_and_writes_locally():
    db = database_from("github:my-org/my-repo")
    assert isinstance(db, database.MultiplexedDatabase)
    local, remote = db._wrapped
    assert isinstance(local, database.DirectoryBasedExampleDatabase)
    assert isinstance(remote, database.ReadOnlyDatabase)
    assert isinstance(remote._wrapped, database.GitHubArtifactDatabase)
    assert (remote._wrapped.owner, remote._wrapped.repo) == ("my-org", "my-repo")


@pytest.mark.parametrize(
    "spec", ["bogus", "dir:", "github:only-owner", "github:a/b/c", "github:/repo", "s3:bucket"]
)
def test_bad_database_forms_name_the_accepted_ones(spec):
    with pytest.raises(ValueError, match="use dir:PATH, github:OWNER/REPO or redis:URL"):
        database_from(spec)


def test_load_profile_applies_the_database(tmp_path, monkeypatch):
    before = settings.get_current_profile_name()
    monkeypatch.setenv(DATABASE_ENV_VAR, f"dir:{tmp_path}")
    try:
        assert load_profile("thorough") == "thorough"
        db = settings.default.database
        assert isinstance(db, database.DirectoryBasedExampleDatabase)
        assert settings.default.max_examples == settings.get_profile("thorough").max_examples
    finally:
        settings.load_profile(before)


def test_dir_database_must_be_a_folder(tmp_path):
    path = tmp_path / "a_file"
    path.write_text("")
    with pytest.raises(ValueError, match="exists and is not a folder"):
        database_from(f"dir:{path}")


@pytest.mark.parametrize("name", ["dev", "ci", "mutation", "thorough"])
def test_only_thorough_runs_the_explain_phase(name):
    """The explain phase costs about 30 s per failing property: only the nightly profile
    pays it (profiles module docstring)."""
    from hypothesis import Phase

    assert (Phase.explain in settings.get_profile(name).phases) == (name == "thorough")


def test_profiles_do_not_inherit_the_ci_variable():
    """Hypothesis loads its own "ci" profile where the CI variable is set; the suite's
    profiles keep their settings there: thorough stays random, dev keeps its database."""
    code = (
        "from hypothesis import settings; import attnprops.properties.profiles; "
        "t, d = settings.get_profile('thorough'), settings.get_profile('dev'); "
        "print(t.derandomize, t.database is None, d.derandomize, d.database is None)"
    )
    for ci in ("true", None):
        env = {k: v for k, v in os.environ.items() if k not in ("CI", "HYPOTHESIS_PROFILE")}
        if ci:
            env["CI"] = ci
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.split() == ["False", "True", "False", "False"], (ci, out)


def test_load_profile_keeps_hypothesis_verbosity_and_explain_options():
    """``--hypothesis-verbosity`` and ``--hypothesis-explain`` (applied by Hypothesis's plugin
    to the profile it loaded) survive the suite's own loading of the profile."""
    from hypothesis import Phase
    from hypothesis import Verbosity

    before = settings.get_current_profile_name()
    try:
        assert load_profile("ci", verbosity="verbose", explain=True) == "ci"
        assert settings.default.verbosity == Verbosity.verbose
        assert Phase.explain in settings.default.phases
        assert settings.default.max_examples == settings.get_profile("ci").max_examples
        assert settings.default.derandomize
        with pytest.raises(ValueError, match="use one of"):
            load_profile("ci", verbosity="chatty")
    finally:
        settings.load_profile(before)


def test_verbosity_option_prints_the_examples_tried(tmp_path):
    """``pytest --hypothesis-verbosity=verbose -s`` prints each example the suite's
    properties try (the suite's profile replaced the option's before)."""
    env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_PROFILE"}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "attnprops.properties"]
        + ["-p", "no:cacheprovider", "-n", "0", "-q", "-s", "--hypothesis-verbosity=verbose"]
        + ["-k", "test_kernel_sized_bool_mask_equals_additive_mask"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    tried = out.stdout.count("test_kernel_sized_bool_mask_equals_additive_mask(")
    assert tried >= 8, out.stdout[-2000:]  # the ci profile's 8 kernel-sized examples, each shown
