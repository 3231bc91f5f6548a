"""``attnprops audit [--out DIR] [--compare REFERENCE_DIR]``: run the audit, write its
evidence, print one line per check and the verdict last (see :mod:`attnprops.ci.audit`)."""

from __future__ import annotations

import datetime
import json
import sys
import time
from pathlib import Path

from attnprops.ci.audit import compare as comparing
from attnprops.ci.audit import files
from attnprops.ci.audit.figures import SECTIONS
from attnprops.ci.audit.record import Audit
from attnprops.ci.audit.record import Check
from attnprops.ci.audit.record import jsonable
from attnprops.ci.audit.rejects import rejects
from attnprops.ci.audit.schema import SCHEMA_VERSION

DEFAULT_OUT = "results"
OK_LINE = "ATTENTION_AUDIT_OK"
FAIL_PREFIX = "ATTENTION_AUDIT_FAILED"


def run_checks() -> Audit:
    """Compute every check and array of the audit (no files written). A section that
    crashes is one failed check naming it; the others still run."""
    audit = Audit()
    for group, section in SECTIONS + (("rejects", rejects),):
        try:
            section(audit)
        except Exception as exc:  # a crash in one section fails the audit, naming it
            audit.failed(
                f"{group}.section_crashed",
                group,
                f"the {group} section ran to the end",
                "no error",
                exc,
                "attnprops/ci/audit",
            )
    return audit


def add_arguments(parser) -> None:
    """``--out DIR`` (default ``results``) and ``--compare REFERENCE_DIR``."""
    parser.add_argument(
        "--out",
        default=DEFAULT_OUT,
        metavar="DIR",
        help="folder for the CSVs and audit.json (default: results); never "
        "the committed reference/ folder",
    )
    parser.add_argument(
        "--compare",
        default=None,
        metavar="REFERENCE_DIR",
        help="after the audit, compare the fresh CSVs with this folder's "
        f"(abs {comparing.COMPARE_ABS:g} + rel {comparing.COMPARE_REL:g} "
        "per value), e.g. reference: that name, when there is no "
        "./reference, means the reference shipped with the package",
    )


def describe(check: Check) -> str:
    """The printed line of ``check`` after its name: measured, expected, tolerance."""

    def short(x):
        """``x`` as compact JSON, cut to 90 characters."""
        text = json.dumps(jsonable(x), ensure_ascii=False)
        return text if len(text) <= 90 else text[:87] + "..."

    m = check.measured
    if isinstance(m, dict) and set(m) == {"error", "message"}:
        return f"raised {m['error']}: {m['message']} (expected {short(check.expected)})"
    if check.comparison == "raises":
        return f"impl {m['impl']['error']}, oracle {m['oracle']['error']}: {m['impl']['message']}"
    tol = "" if check.tolerance is None else f" (tol {check.tolerance:.3g})"
    return f"measured {short(m)}, expected {short(check.expected)}{tol}"


def _document(audit: Audit, written: dict, comparison, seconds: float) -> dict:
    """The audit.json document (:mod:`.schema`)."""
    from attnprops import oracle

    failed = [c.name for c in audit.checks if not c.passed]
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "attnprops audit",
        "created_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "runtime_s": round(seconds, 3),
        "passed": not failed and (comparison is None or comparison["passed"]),
        "summary": {
            "checks": len(audit.checks),
            "passed": len(audit.checks) - len(failed),
            "failed": len(failed),
        },
        "failed": failed,
        "environment": files.environment(),
        "oracle_digits": oracle.DIGITS,
        "sources": files.source_hashes(),
        "inputs": files.recorded_inputs(),
        "files": written,
        "checks": [c.to_json() for c in audit.checks],
        "compare": comparison,
    }


def run(args) -> int:
    """Run the audit; print one line per check and ``ATTENTION_AUDIT_OK`` last if all pass.

    Returns 0 when every check (and the comparison, if asked) passes, 1 otherwise, 2 when
    ``--out`` is the reference folder or cannot be made. ``--compare`` is resolved by
    :func:`.compare.resolve_reference` (the folder actually used is printed and recorded as
    ``compare.reference``); when that folder is missing the last line is
    ``ATTENTION_AUDIT_FAILED: reference folder ... is missing ...`` and says how many checks
    failed, never ``0 of N checks failed``.
    """
    out = Path(args.out)
    compare = comparing.resolve_reference(args.compare) if args.compare else None
    for folder in [comparing.REFERENCE_DIR] + ([compare] if compare is not None else []):
        if comparing.inside(out, folder):
            print(
                f"attnprops audit: refusing to write into {out}: it is the reference folder "
                f"{folder.resolve()}, which the audit never overwrites; use --out results "
                "(or another folder) and --compare reference",
                file=sys.stderr,
            )
            return 2
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"attnprops audit: cannot create the output folder {out}: {exc}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    audit = run_checks()
    written = {}
    for filename, (array, layout) in audit.arrays.items():
        files.write_array_csv(out / filename, array, **layout)
        written[filename] = files.sha256_file(out / filename)
    comparison = None
    if compare is not None:
        comparison = comparing.compare_dirs(
            out, compare, sorted(written), [c.name for c in audit.checks]
        )
    doc = _document(audit, written, comparison, time.perf_counter() - started)
    (out / "audit.json").write_text(
        json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8"
    )
    for c in audit.checks:
        print(f"{'PASS' if c.passed else 'FAIL'} {c.name}: {describe(c)}")
    print(
        f"wrote {len(written)} CSV files and audit.json to {out} "
        f"({doc['runtime_s']:.2f} s, oracle at {doc['oracle_digits']} digits)"
    )
    failed = doc["failed"]
    problems = list(failed)
    if comparison is not None:
        for note in comparison["notes"]:
            print(f"note: {note}")
        if not compare.is_dir():
            checks = (
                f"{len(failed)} of {len(audit.checks)} checks failed: {', '.join(failed)}"
                if failed
                else f"all {len(audit.checks)} checks passed"
            )
            print(
                f"{FAIL_PREFIX}: reference folder {compare.absolute()} is missing "
                f"(--compare {args.compare}), nothing was compared; {checks}"
            )
            return 1
        for diff in comparison["differences"]:
            print(f"DIFF {diff}")
        print(
            f"compared {comparison['cells_compared']} cells with {compare}: "
            f"{len(comparison['differences'])} differences (tolerance abs "
            f"{comparing.COMPARE_ABS:g} + rel {comparing.COMPARE_REL:g} * |reference|)"
        )
        if not comparison["passed"]:
            problems.append(
                f"compare {compare} ({len(comparison['differences'])} differences, "
                f"first: {comparison['differences'][0]})"
            )
    if problems:
        checks = (
            f"{len(failed)} of {len(audit.checks)} checks failed"
            if failed
            else f"all {len(audit.checks)} checks passed, the comparison failed"
        )
        print(f"{FAIL_PREFIX}: {checks}: {', '.join(problems)}")
        return 1
    print(OK_LINE)
    return 0
