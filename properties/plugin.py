"""pytest plugin of the property suite: subject selection, profiles, report header.

Enable it with ``-p properties.plugin`` (this repo's pyproject does) or
``pytest_plugins = ["properties.plugin"]`` in your root ``conftest.py``.

- ``--attn-impl MODULE`` (or ``ATTN_IMPL``) selects the subject; default ``impl``.
- ``HYPOTHESIS_PROFILE`` / ``--hypothesis-profile`` selects ``dev``, ``ci`` (default) or
  ``thorough`` (see :mod:`properties.profiles`).
- ``@pytest.mark.requires("kv_cache", ...)`` skips a test, with the reason, when the subject
  declares it lacks a capability (see :mod:`properties.subject`).
- The header names the subject, its version, its declared conventions and the profile.
"""

from __future__ import annotations

import os

import pytest

from .profiles import load_profile
from .subject import ENV_VAR, Subject, SubjectError, load_subject

_STATE: dict = {}


def pytest_addoption(parser):
    group = parser.getgroup("attnprops", "attention property suite")
    group.addoption(
        "--attn-impl",
        action="store",
        default=None,
        metavar="MODULE",
        help=f"module under test (default: ${ENV_VAR} or 'impl')",
    )


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "requires(*capabilities): skip unless the subject declares these capabilities",
    )
    if config.getoption("hypothesis_profile", None) is None:
        _STATE["profile"] = load_profile()
    else:
        _STATE["profile"] = config.getoption("hypothesis_profile")
    name = config.getoption("--attn-impl") or os.environ.get(ENV_VAR) or "impl"
    # Exported so the subject is the same in xdist workers and in subprocesses.
    os.environ[ENV_VAR] = name
    try:
        _STATE["subject"] = load_subject(name)
    except SubjectError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_report_header(config):
    subject = _STATE.get("subject")
    lines = [f"attnprops hypothesis profile: {_STATE.get('profile')}"]
    if subject is not None:
        lines.append(f"attnprops subject: {subject.describe()}")
    return lines


def current_subject() -> Subject:
    """The subject loaded at configuration time (also usable outside fixtures)."""
    subject = _STATE.get("subject")
    if subject is None:
        subject = _STATE["subject"] = load_subject()
    return subject


@pytest.fixture(scope="session")
def subject() -> Subject:
    """The attention module under test, with its declared capabilities."""
    return current_subject()


def pytest_runtest_setup(item):
    marker = item.get_closest_marker("requires")
    if marker is None:
        return
    subject = current_subject()
    for capability in marker.args:
        if not getattr(subject, capability):
            pytest.skip(f"subject {subject.name} declares {capability}=False")
