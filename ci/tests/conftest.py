"""Shared fixtures of the ci tests: one audit run per session, reused by the read-only tests."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from attnprops.ci import cli


@dataclass(frozen=True)
class CliRun:
    """Exit status, captured stdout/stderr and the output folder of one ``attnprops`` call."""

    rc: int
    out: str
    err: str
    folder: Path

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()

    def audit_json(self) -> dict:
        return json.loads((self.folder / "audit.json").read_text(encoding="utf-8"))


def run_cli(argv: list[str], folder: Path) -> CliRun:
    """Run ``attnprops ARGV`` in-process; SystemExit (argparse) becomes the exit status."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli.main(argv)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
    return CliRun(rc, out.getvalue(), err.getvalue(), folder)


def read_csv(path) -> list[list[str]]:
    """All rows of a CSV file (header first)."""
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(f))


@pytest.fixture(scope="session")
def audit_run(tmp_path_factory) -> CliRun:
    """``attnprops audit --out TMP`` once per session (about 0.3 s)."""
    folder = tmp_path_factory.mktemp("audit")
    return run_cli(["audit", "--out", str(folder)], folder)
