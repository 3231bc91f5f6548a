"""The schema of ``audit.json`` (:data:`AUDIT_SCHEMA`, JSON Schema draft 2020-12) and its
validation with ``jsonschema``, plus the consistency rules a schema cannot state.

A document, schema version :data:`SCHEMA_VERSION`::

    {"schema_version": 1, "tool": "attnprops audit", "created_utc": "YYYY-MM-DDTHH:MM:SSZ",
     "runtime_s": float >= 0,
     "passed": bool,                     # every check passed (and the comparison, if any)
     "summary": {"checks": int, "passed": int, "failed": int},
     "failed": [check name, ...],        # exactly the checks with passed == false
     "environment": {"python", "numpy", "mpmath", "gmpy2" (null if absent),
                     "mpmath_backend", "platform": str},
     "oracle_digits": 50,
     "sources": {"oracle/rules/attention.py": sha256 hex, ...},   # every file under oracle/ impl/ mutants/
     "inputs": {...},                    # the example tensors, the batch seed and shapes
     "files": {"example_weights.csv": sha256 hex, ...}, # every CSV written
     "checks": [{"name": "example.weights.impl_vs_published",   # unique, [a-z0-9_.]
                 "group": one of CHECK_GROUPS, "description": str,
                 "comparison": "abs" | "equal" | "raises",
                 "expected": JSON value,   # numbers, nested lists; "-inf"/"inf"/"nan" as strings
                 "measured": JSON value,
                 "tolerance": float >= 0 for "abs", null for "equal" and "raises",
                 "passed": bool, "source": str, "note": str (optional)}, ...],
     "compare": null | {"reference": str, "abs_tolerance": float, "rel_tolerance": float,
                        "cells_compared": int, "differences": [str, ...], "notes": [str, ...],
                        "passed": bool}}

For ``"raises"`` checks ``expected`` is ``{"error": class name}`` and ``measured`` is
``{"impl": {"error", "message"}, "oracle": {"error", "message"}}``.
"""

from __future__ import annotations

import jsonschema

SCHEMA_VERSION = 1
CHECK_GROUPS = ("example", "decode", "mutants", "oracle", "batch", "rejects", "kv_bytes")

_SHA256 = "^[0-9a-f]{64}$"
_STRING_LIST = {"type": "array", "items": {"type": "string"}}
CHECK_SCHEMA = {
    "type": "object",
    "required": [
        "name",
        "group",
        "description",
        "comparison",
        "expected",
        "measured",
        "tolerance",
        "passed",
        "source",
    ],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z0-9_]+(\\.[a-z0-9_]+)+$"},
        "group": {"enum": list(CHECK_GROUPS)},
        "description": {"type": "string", "minLength": 1},
        "comparison": {"enum": ["abs", "equal", "raises"]},
        "expected": {},
        "measured": {},
        "tolerance": {"type": ["number", "null"], "minimum": 0},
        "passed": {"type": "boolean"},
        "source": {"type": "string", "minLength": 1},
        "note": {"type": "string"},
    },
    # a tolerance exactly for "abs" checks
    "if": {"properties": {"comparison": {"const": "abs"}}},
    "then": {"properties": {"tolerance": {"type": "number"}}},
    "else": {"properties": {"tolerance": {"type": "null"}}},
}
_HASHES = {
    "type": "object",
    "minProperties": 1,
    "additionalProperties": {"type": "string", "pattern": _SHA256},
}
AUDIT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "attnprops audit.json",
    "type": "object",
    "required": [
        "schema_version",
        "tool",
        "created_utc",
        "runtime_s",
        "passed",
        "summary",
        "failed",
        "environment",
        "oracle_digits",
        "sources",
        "inputs",
        "files",
        "checks",
        "compare",
    ],
    "additionalProperties": False,
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "tool": {"const": "attnprops audit"},
        "created_utc": {
            "type": "string",
            "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$",
        },
        "runtime_s": {"type": "number", "minimum": 0},
        "passed": {"type": "boolean"},
        "summary": {
            "type": "object",
            "required": ["checks", "passed", "failed"],
            "additionalProperties": False,
            "properties": {
                k: {"type": "integer", "minimum": 0} for k in ("checks", "passed", "failed")
            },
        },
        "failed": _STRING_LIST,
        "environment": {
            "type": "object",
            "required": ["python", "numpy", "mpmath", "gmpy2", "mpmath_backend", "platform"],
            "additionalProperties": False,
            "properties": {
                k: {"type": "string"}
                for k in ("python", "numpy", "mpmath", "mpmath_backend", "platform")
            }
            | {"gmpy2": {"type": ["string", "null"]}},
        },
        "oracle_digits": {"type": "integer", "minimum": 1},
        "sources": _HASHES | {"propertyNames": {"pattern": "^(oracle|impl|mutants)/"}},
        "inputs": {"type": "object"},
        "files": _HASHES | {"propertyNames": {"pattern": "^[a-z0-9_]+\\.csv$"}},
        "checks": {"type": "array", "minItems": 1, "items": CHECK_SCHEMA},
        "compare": {
            "type": ["object", "null"],
            "required": [
                "reference",
                "abs_tolerance",
                "rel_tolerance",
                "cells_compared",
                "differences",
                "notes",
                "passed",
            ],
            "additionalProperties": False,
            "properties": {
                "reference": {"type": "string"},
                "abs_tolerance": {"type": "number", "minimum": 0},
                "rel_tolerance": {"type": "number", "minimum": 0},
                "cells_compared": {"type": "integer", "minimum": 0},
                "differences": _STRING_LIST,
                "notes": _STRING_LIST,
                "passed": {"type": "boolean"},
            },
        },
    },
}


def _where(error: jsonschema.ValidationError) -> str:
    """``audit.json.checks[0].passed``: where in the document ``error`` is."""
    return "audit.json" + "".join(
        f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path
    )


def validate_audit(doc) -> list[str]:
    """Every way ``doc`` (a parsed audit.json) breaks :data:`AUDIT_SCHEMA` (``jsonschema``'s
    messages, each prefixed with where it is), then the consistency the schema cannot state:
    unique check names, ``failed`` = the names of the failed checks, ``summary``'s counts,
    ``passed`` = no failed check and no failed comparison. ``[]`` when valid."""
    validator = jsonschema.Draft202012Validator(AUDIT_SCHEMA)
    errors = [
        f"{_where(e)}: {e.message}"
        for e in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    ]
    if errors:
        return errors
    checks = doc["checks"]
    names = [c["name"] for c in checks]
    if len(set(names)) != len(names):
        errors.append("audit.json.checks: duplicate check names")
    failed = [c["name"] for c in checks if not c["passed"]]
    if doc["failed"] != failed:
        errors.append(f"audit.json.failed: {doc['failed']} != failed checks {failed}")
    summary = {"checks": len(checks), "passed": len(checks) - len(failed), "failed": len(failed)}
    if doc["summary"] != summary:
        errors.append(f"audit.json.summary: {doc['summary']} != {summary}")
    compare_ok = doc["compare"] is None or doc["compare"]["passed"]
    if doc["passed"] != (not failed and compare_ok):
        errors.append("audit.json.passed: inconsistent with the checks and the comparison")
    return errors
