"""The results of ``attnprops mutants`` (:mod:`ci.mutation_report`) and their forms: the
console table, the Markdown report, the JUnit file, the JSON rows, and the verdict.
"""

from __future__ import annotations

import enum
import xml.etree.ElementTree as ET
from dataclasses import asdict
from dataclasses import dataclass
from pathlib import Path

from attnprops.ci.reproduction import first_property
from attnprops.ci.reproduction import reproduction
from attnprops.ci.reproduction import rerun_command
from attnprops.ci.suite_runner import RunResult

__all__ = [
    "EXAMPLES_NOTE",
    "MutantResult",
    "Outcome",
    "console_table",
    "json_row",
    "junit",
    "markdown_report",
    "verdict",
]


class Outcome(str, enum.Enum):
    KILLED = "killed"
    SURVIVED = "survived"
    WRONG_REASON = "wrong reason"
    ERROR = "error"


@dataclass
class MutantResult:
    name: str
    description: str
    killed_by: tuple[str, ...]
    outcome: Outcome
    failed_properties: list[str]
    falsifying_example: str
    message: str
    seconds: float
    examples_tried: int | None
    profile: str  # the Hypothesis profile of the run that decided the outcome
    shrunk: bool  # the counterexample was generated and shrunk (not an explicit @example)
    nodeid: str = ""  # the node id of the test whose counterexample is shown


# What the "examples" column counts: MutantResult.examples_tried, the result record's
# "examples" of the first failing property (properties.example_counts counts them;
# ci.suite_runner reads them).
EXAMPLES_NOTE = (
    "*examples*: the inputs the first failing property (the one whose counterexample is "
    "shown) ran, in the pass that decided the outcome, up to and including the first one that "
    "failed, so 1 means the first input tried failed. Counted by the suite's plugin around "
    "the property's body (Hypothesis's `inner_test`): the hand-written `@example` cases where "
    "the pass ran them (profile `ci`), then the generated inputs; not the inputs rejected by "
    "`assume` or a filter, and not the shrinking that followed. `-`: no property failed; "
    "`n/a`: the test that failed is not a Hypothesis property (no examples to count)."
)


def _examples_cell(result) -> str:
    """The "examples" cell of ``result``'s row (see :data:`EXAMPLES_NOTE`)."""
    if result.examples_tried is not None:
        return str(result.examples_tried)
    return "n/a" if result.failed_properties else "-"


def _cell(text: str, limit: int | None = None) -> str:
    """``text`` on one line, fit for a Markdown table cell."""
    line = " ".join(text.split())
    if limit and len(line) > limit:
        line = line[: limit - 1].rstrip() + "…"
    return line.replace("|", "\\|")


def console_table(results: list[MutantResult]) -> list[str]:
    """The per-mutant lines printed to the console, columns aligned whatever the lengths."""
    rows = [("mutant", "outcome", "time (s)", "failed properties")]
    rows += [
        (r.name, r.outcome.value, f"{r.seconds:.1f}", ", ".join(r.failed_properties) or "-")
        for r in results
    ]
    name_w, outcome_w, time_w = (max(len(row[i]) for row in rows) for i in range(3))
    return [
        f"  {n:<{name_w}}  {o:<{outcome_w}}  {t:>{time_w}}  {p}".rstrip() for n, o, t, p in rows
    ]


def markdown_report(
    reference: RunResult | None,
    harness: RunResult | None,
    results: list[MutantResult],
    profile: str,
    seconds: float,
) -> str:
    killed = sum(r.outcome is Outcome.KILLED for r in results)
    lines = [f"## Mutation-kill report: {killed}/{len(results)} killed", ""]
    if reference is not None:
        state = "passed" if reference.returncode == 0 else "FAILED"
        lines.append(
            f"- reference `impl`: {state} ({reference.tests_run} properties, "
            f"{reference.seconds:.1f} s, profile `{profile}`)"
        )
    if harness is not None:
        seen = "failures seen" if harness.failures else "NO FAILURE SEEN"
        lines.append(f"- harness check (deliberately wrong subject): {seen}")
    kills = [r for r in results if r.outcome is Outcome.KILLED]
    shrunk = sum(r.shrunk for r in kills)
    explicit = sum(bool(r.falsifying_example) and not r.shrunk for r in kills)
    unread = len(kills) - shrunk - explicit
    lines.append(
        f"- killed with a generated, shrunk counterexample: {shrunk}/{killed}; "
        f"by an explicit example only: {explicit}/{killed}"
        + (f"; no counterexample recorded: {unread}/{killed}" if unread else "")
    )
    lines += [
        f"- total wall time: {seconds:.1f} s",
        "",
        "| mutant | what it breaks | outcome | failed properties | examples¹ | time (s) "
        "| failure |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        failure = _cell(r.message, 160)
        if r.falsifying_example:
            failure += f" ([counterexample](#{r.name}))"
        lines.append(
            f"| `{r.name}` | {_cell(r.description)} | {r.outcome.value} "
            f"| {', '.join(r.failed_properties) or '-'} "
            f"| {_examples_cell(r)} "
            f"| {r.seconds:.1f} | {failure} |"
        )
    lines += ["", f"¹ {EXAMPLES_NOTE}", ""]
    shown = [r for r in results if r.falsifying_example]
    if shown:
        lines += [
            "### Counterexamples",
            "",
            "Each script runs the failing property's own body once on the recorded "
            "counterexample and fails as the mutation run did (a `PropertyViolation`); "
            "paste it into a file and run it with `python` where attnprops is "
            "installed. The `pytest` command re-runs the property as the runner did.",
            "",
        ]
    for r in shown:
        kind = "generated and shrunk" if r.shrunk else "explicit example"
        description = _cell(r.description).rstrip(".")
        lines += [
            f"#### {r.name}",
            "",
            f"{description}. Fails `{first_property(r)}` "
            f"({kind} counterexample, profile `{r.profile}`).",
            "",
        ]
        rendered = reproduction(r)
        if rendered is None:
            lines += [
                "Hypothesis's counterexample (not renderable as a script):",
                "",
                "```text",
                r.falsifying_example,
                "```",
                "",
            ]
        else:
            lines += ["```python", rendered[0].rstrip("\n"), "```", ""]
        lines += ["```bash", rerun_command(r), "```", ""]
    return "\n".join(lines)


def junit(results: list[MutantResult], path: Path) -> None:
    suite = ET.Element(
        "testsuite",
        name="mutants",
        tests=str(len(results)),
        failures=str(sum(r.outcome is not Outcome.KILLED for r in results)),
    )
    for r in results:
        case = ET.SubElement(
            suite, "testcase", classname="mutants", name=r.name, time=f"{r.seconds:.2f}"
        )
        if r.outcome is not Outcome.KILLED:
            node = ET.SubElement(case, "failure", message=f"{r.name}: {r.outcome.value}")
            node.text = r.message
        else:
            out = ET.SubElement(case, "system-out")
            out.text = f"killed by {', '.join(r.failed_properties)}\n{r.falsifying_example}"
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)


def json_row(r: MutantResult) -> dict:
    """A mutant's entry of mutation-report.json: the MutantResult, plus (schema 3) its
    ``reproduction`` script (``""`` when not renderable), whether that input is exact, and
    the ``rerun_command``."""
    rendered = reproduction(r)
    return dict(
        asdict(r),
        outcome=r.outcome.value,
        reproduction=rendered[0] if rendered else "",
        reproduction_exact=bool(rendered and rendered[1]),
        rerun_command=rerun_command(r),
    )


def verdict(
    results: list[MutantResult], reference: RunResult | None, harness: RunResult | None
) -> list[str]:
    """Why the run fails (empty: it passes): the reference fails the suite, the harness sees
    no failure, a mutant is not killed, or a kill has no generated, shrunk counterexample."""
    problems = []
    if reference is not None and reference.returncode != 0:
        problems.append("the reference impl FAILS the suite:\n" + reference.output_tail)
    if harness is not None and not harness.failures:
        problems.append("the harness saw no failure on a deliberately wrong subject")
    alive = [r.name for r in results if r.outcome is not Outcome.KILLED]
    if alive:
        problems.append(f"not killed: {', '.join(alive)}")
    unshrunk = [r.name for r in results if r.outcome is Outcome.KILLED and not r.shrunk]
    if unshrunk:
        problems.append(f"killed without a generated, shrunk counterexample: {', '.join(unshrunk)}")
    return problems
