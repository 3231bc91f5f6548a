"""The mutation report a person reads: each mutant's description, the examples note, a
counterexample rendered as a script that really reproduces the failure, an aligned console
table, and README figures that match the mutants there are."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from attnprops.ci.mutation_report import run_mutant
from attnprops.ci.mutation_results import EXAMPLES_NOTE
from attnprops.ci.mutation_results import MutantResult
from attnprops.ci.mutation_results import Outcome
from attnprops.ci.mutation_results import console_table
from attnprops.ci.mutation_results import markdown_report
from attnprops.ci.reproduction import rerun_command
from attnprops.mutants import all_mutants

REPO = Path(__file__).resolve().parents[2]


def _section(markdown: str, name: str) -> str:
    """The counterexample section of mutant ``name``."""
    match = re.search(rf"^#### {re.escape(name)}\n(.*?)(?=^#### |\Z)", markdown, re.S | re.M)
    assert match, f"no counterexample section for {name}:\n{markdown[-2000:]}"
    return match.group(1)


def _block(section: str, language: str) -> str:
    match = re.search(rf"^```{language}\n(.*?)^```$", section, re.S | re.M)
    assert match, f"no {language} block in:\n{section}"
    return match.group(1)


def _python(script: str, folder: Path) -> subprocess.CompletedProcess:
    """Run ``script`` as a pasted file would be: a fresh interpreter, outside the repository,
    without the test run's subject or profile in the environment."""
    path = folder / "reproduce.py"
    path.write_text(script)
    env = {k: v for k, v in os.environ.items() if k not in ("ATTN_IMPL", "HYPOTHESIS_PROFILE")}
    return subprocess.run(
        [sys.executable, str(path)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.e2e
def test_rendered_counterexample_reproduces_the_failure(tmp_path):
    """The report's script for a real kill (a KV-cache run of arrays, and st.data() draws)
    fails in a fresh process with the PropertyViolation the run recorded, raised in the
    failing property's body; the same script with the mutant swapped for impl passes, so the
    failure is the mutant's and not the script's; the report's pytest command re-runs it."""
    name = "non_atomic_append"
    result = run_mutant(name, tmp_path / "runs", profile="ci")
    assert result.outcome is Outcome.KILLED and result.falsifying_example, result
    section = _section(markdown_report(None, None, [result], "ci", 0.0), name)
    script = _block(section, "python")
    test = next(t for t in result.failed_properties if f" {t}(" in result.falsifying_example)
    assert f"{test}.hypothesis.inner_test" in script

    proc = _python(script, tmp_path)
    first_line = result.message.splitlines()[0]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"PropertyViolation: {first_line}" in proc.stderr, (first_line, proc.stderr[-3000:])
    assert re.search(rf"in {test}\n", proc.stderr), proc.stderr[-3000:]  # the property's frame

    fixed = script.replace(f"attnprops.mutants.{name}", "attnprops.impl")
    assert fixed != script
    proc = _python(fixed, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]

    command = _block(section, "bash").strip()  # re-runs the property as the runner did
    assert command == rerun_command(result)
    env = {k: v for k, v in os.environ.items() if k not in ("ATTN_IMPL", "HYPOTHESIS_PROFILE")}
    rerun = subprocess.run(
        shlex.split(command.replace("python", sys.executable, 1)),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rerun.returncode == 1, rerun.stdout[-3000:]
    assert re.search(r"\b1 failed\b", rerun.stdout), rerun.stdout[-3000:]
    assert f"PropertyViolation: {first_line}" in rerun.stdout, rerun.stdout[-3000:]


def _result(
    name: str, description: str, outcome: Outcome = Outcome.KILLED, seconds: float = 1.0, **fields
) -> MutantResult:
    values = dict(
        name=name,
        description=description,
        killed_by=("test_a",),
        outcome=outcome,
        failed_properties=["test_a"],
        falsifying_example="",
        message="m",
        seconds=seconds,
        examples_tried=3,
        profile="mutation",
        shrunk=True,
    )
    return MutantResult(**(values | fields))


def _table_rows(markdown: str) -> list[list[str]]:
    """The cells of the report's table rows (header and separator excluded); ``\\|`` is text."""
    rows = [line for line in markdown.splitlines() if line.startswith("| ")]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows[2:]]


def test_markdown_has_descriptions_and_the_examples_note():
    """Each row carries its mutant's description (the MUTANT declaration, as in the JSON),
    pipes escaped; the examples column has a note right under the table saying what it
    counts."""
    mutants = list(all_mutants().values())[:3]
    results = [_result(m.name, m.description, examples_tried=i + 1) for i, m in enumerate(mutants)]
    results.append(_result("pipe_mutant", "a | b", examples_tried=None))  # a plain test killed it
    results.append(
        _result("survivor", "s", Outcome.SURVIVED, examples_tried=None, failed_properties=[])
    )
    markdown = markdown_report(None, None, results, "ci", 0.0)
    rows = _table_rows(markdown)
    header = next(line for line in markdown.splitlines() if line.startswith("| mutant"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert len(rows) == len(results) and all(len(row) == len(columns) for row in rows), rows
    what, examples = columns.index("what it breaks"), columns.index("examples¹")
    for row, result in zip(rows, results):
        assert row[0] == f"`{result.name}`"
        assert row[what].replace("\\|", "|") == " ".join(result.description.split())
        wanted = {"pipe_mutant": "n/a", "survivor": "-"}.get(
            result.name, str(result.examples_tried)
        )
        assert row[examples] == wanted, row
    lines = markdown.splitlines()
    last_row = max(i for i, line in enumerate(lines) if line.startswith("| "))
    assert lines[last_row + 1] == "" and lines[last_row + 2] == f"¹ {EXAMPLES_NOTE}"
    assert "inner_test" in EXAMPLES_NOTE and "first one that failed" in EXAMPLES_NOTE


def test_unrenderable_counterexample_is_shown_as_text():
    """A counterexample the renderer cannot rebuild (a summarized array) is shown verbatim,
    never as a script that would not run."""
    example = (
        "Falsifying example: test_output_matches_oracle(\n"
        "    subject=Subject('attnprops.mutants.no_scale'),\n"
        "    case=AttentionCase(query=array([0., 0., ..., 0.]), key=None),\n)"
    )
    result = _result(
        "no_scale",
        "d",
        failed_properties=["test_output_matches_oracle"],
        falsifying_example=example,
    )
    section = _section(markdown_report(None, None, [result], "ci", 0.0), "no_scale")
    assert "```python" not in section
    assert _block(section, "text").strip() == example
    assert "--attn-tests test_output_matches_oracle" in _block(section, "bash")


def test_console_table_stays_aligned_with_long_names():
    """Every column starts at the same offset on every line, the header included, whatever the
    lengths of the names, outcomes and times."""
    results = [
        _result("a", "d", Outcome.KILLED, 0.0),
        _result("m" * 70, "d", Outcome.WRONG_REASON, 12345.6),
        _result("mid_length_name", "d", Outcome.SURVIVED, 7.25, failed_properties=[]),
    ]
    lines = console_table(results)
    assert len(lines) == len(results) + 1
    cells = [("mutant", "outcome", "time (s)")] + [
        (r.name, r.outcome.value, f"{r.seconds:.1f}") for r in results
    ]
    outcome_at, time_end, rest_at = set(), set(), set()
    for line, (name, outcome, seconds) in zip(lines, cells):
        assert line.startswith(f"  {name} ")
        start = line.index(outcome, 2 + len(name))
        outcome_at.add(start)
        end = line.index(seconds, start + len(outcome)) + len(seconds)
        time_end.add(end)
        rest_at.add(len(line) - len(line[end:].lstrip()) if line[end:].strip() else None)
    assert len(outcome_at) == 1 and len(time_end) == 1, lines
    assert len(rest_at - {None}) == 1, lines
    assert lines[2].endswith("test_a") and lines[3].endswith("-")


def _mutation_paragraph(readme: str) -> str:
    match = re.search(r"^`attnprops mutants \[--only.*?(?=\n\n)", readme, re.S | re.M)
    assert match, "README lost its paragraph on `attnprops mutants`"
    return match.group(0)


def test_readme_mutant_figures_match_the_mutants():
    """The README's count of mutants and every 'K/N killed' figure it quotes name as many
    mutants as mutants/ holds, so the figures cannot rot when a mutant is added."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    count = len(all_mutants())
    stated = re.findall(r"holds (\d+) mutants", _mutation_paragraph(readme))
    assert stated == [str(count)], (stated, count)
    scores = re.findall(r"(\d+)/(\d+) killed", readme)
    assert scores, "README quotes no mutation score"
    assert all(k == n == str(count) for k, n in scores), (scores, count)
