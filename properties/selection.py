"""Which tests a run of the suite holds: whether the run uses the suite at all (the plugin is
inert otherwise), the installed suite added for a named subject, ``--attn-tests NAME,...`` and
``--attn-shard I/N``. The plugin's hooks (:mod:`properties.plugin`) apply them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from attnprops.properties import ENV_VAR

__all__ = [
    "META_TESTS_DIR",
    "SUITE_DIR",
    "add_suite",
    "named_subject",
    "named_tests",
    "parse_shard",
    "shard_of",
    "uses_suite",
    "within",
]

SUITE_DIR = Path(__file__).resolve().parent  # properties/: the property tests
META_TESTS_DIR = SUITE_DIR / "meta_tests"


def named_subject(config) -> str | None:
    return config.getoption("--attn-impl") or os.environ.get(ENV_VAR) or None


def within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def uses_suite(config) -> bool:
    """Whether this run uses the property suite (module docstring, *Inert unless used*)."""
    if named_subject(config):
        return True
    if getattr(config.option, "pyargs", False) and any(
        a.split("::", 1)[0].startswith(__package__) for a in config.args
    ):
        return True  # pytest --pyargs attnprops.properties[.test_x]
    roots = [Path(config.rootpath).resolve(), *_arg_paths(config)]
    return any(within(SUITE_DIR, root) or within(root, SUITE_DIR) for root in roots)


def _arg_paths(config) -> list[Path]:
    """The run's arguments as absolute paths (their ``::test`` parts dropped)."""
    return [Path(config.invocation_params.dir, a.split("::", 1)[0]).resolve() for a in config.args]


def add_suite(config) -> None:
    """Collect the property tests too when a subject is named and the command line gives no
    paths (``pytest --attn-impl MODULE``: pytest's default arguments are the ``testpaths`` or
    the folder). Once: an xdist worker receives the controller's arguments."""
    if not named_subject(config):
        return
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        return
    if any(within(SUITE_DIR, path) for path in _arg_paths(config)):
        return  # the default arguments already hold the suite (this repository, a copy)
    config.args.append(str(SUITE_DIR))


def named_tests(items: list, names: str) -> list:
    """``--attn-tests NAME,...``: the items of those property function names, in that order.

    Raises:
        pytest.UsageError: a name matches no collected test.
    """
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    order = {name: k for k, name in enumerate(wanted)}
    missing = [n for n in wanted if not any(_name(item) == n for item in items)]
    if missing:
        raise pytest.UsageError(
            f"attnprops: --attn-tests: no collected test named {', '.join(missing)}"
        )
    return sorted(
        (item for item in items if _name(item) in order), key=lambda item: order[_name(item)]
    )


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` (1 <= I <= N; white space around either number allowed, as ``int`` allows
    it for ``--jobs``) as ``(I, N)``.

    Raises:
        ValueError: anything else; the message shows the expected form.
    """
    match = re.fullmatch(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*", text)
    if not (match and 1 <= int(match[1]) <= int(match[2])):
        raise ValueError(f"{text!r}: expected I/N with 1 <= I <= N, e.g. 2/4")
    return int(match[1]), int(match[2])


def shard_of(items: list, index: int, count: int) -> list:
    """Shard ``index`` of ``count`` (1-based) of ``items``: every ``count``-th from the
    ``index``-th, so parametrizations and files spread over the shards."""
    return items[index - 1 :: count]


def _name(item) -> str:
    """A test item's function name, without ``[params]``."""
    return getattr(item, "originalname", None) or item.name.split("[", 1)[0]
