"""The property suite's pytest options (``--attn-...``), the robustness tier they set, and the
options of a pytest subprocess that runs the suite (:func:`suite_args`)."""

from __future__ import annotations

from attnprops.properties import DEFAULT_SUBJECT
from attnprops.properties import ENV_VAR
from attnprops.properties.expected_failures import XFAIL_ATTRIBUTE
from attnprops.properties.expected_failures import XFAIL_ENV_VAR

__all__ = [
    "FAST_START",
    "ROBUSTNESS_ENV_VAR",
    "ROBUSTNESS_MODES",
    "ROBUSTNESS_REASON",
    "add_options",
    "suite_args",
]

# The robustness tier: properties whose exact result is well defined and representable but
# which straightforward floating-point code (PyTorch SDPA and JAX among it, docs/findings.md
# F3) fails, such as values near the dtype's maximum. A user's gate should not fail on
# them by default; they are reported (non-strict xfail) unless --attn-robustness=gate.
ROBUSTNESS_MODES = ("report", "gate")
ROBUSTNESS_ENV_VAR = "ATTN_ROBUSTNESS"
ROBUSTNESS_REASON = "robustness tier (reported, not gated; --attn-robustness=gate gates it)"


def add_options(parser) -> None:
    """Add the suite's options (group ``attnprops``) to pytest's ``parser``."""
    group = parser.getgroup("attnprops", "attention property suite")
    group.addoption(
        "--attn-impl",
        action="store",
        default=None,
        metavar="MODULE",
        help=f"module under test (default: ${ENV_VAR} or {DEFAULT_SUBJECT!r}); naming one "
        f"also collects the installed property suite when no paths are given",
    )
    group.addoption(
        "--attn-results",
        action="store",
        default=None,
        metavar="FILE",
        help="write one JSON line per test to FILE: outcome, every distinct failure with its "
        "message, counterexample and the subject's frame (see properties/results.py)",
    )
    group.addoption(
        "--attn-progress",
        action="store",
        default=None,
        metavar="FILE",
        help="write the run's events to FILE as they happen, one JSON line each: collected "
        "(with the number of tests), started and finished (with the test's record)",
    )
    group.addoption(
        "--attn-tests",
        action="store",
        default=None,
        metavar="NAME[,NAME...]",
        help="run only the property tests of these function names, in this order (a name "
        "that matches no collected test is a usage error)",
    )
    group.addoption(
        "--attn-shard",
        action="store",
        default=None,
        metavar="I/N",
        help="run shard I of N (1-based): every N-th collected test from the I-th",
    )
    group.addoption(
        "--attn-robustness",
        action="store",
        choices=ROBUSTNESS_MODES,
        default=None,
        help=f"robustness-tier properties (@pytest.mark.robustness): 'report' (default, or "
        f"${ROBUSTNESS_ENV_VAR}) runs them as non-strict xfails, shown but not failing "
        f"the run; 'gate' makes them ordinary properties",
    )
    group.addoption(
        "--attn-xfail",
        action="append",
        default=None,
        metavar="FILE",
        help=f"expected-failures file: test ids with '# reason' comments, marked "
        f"xfail(strict=True) (repeatable; default: ${XFAIL_ENV_VAR}; the subject's "
        f"{XFAIL_ATTRIBUTE} always applies)",
    )


# Options for a pytest subprocess that runs the suite and reads only pass/fail and its own
# messages: no assertion rewriting (the properties raise PropertyViolation with their own
# messages, and rewriting would re-compile all of Hypothesis in every process that cannot
# cache bytecode) and no unraisable-exception check (five gc.collect() at exit). About
# 1.6 s less per process here.
FAST_START = ("--assert=plain", "-p", "no:unraisableexception")


def suite_args(subject: str) -> list[str]:
    """The options of a pytest subprocess that runs the suite on ``subject`` (a module or
    file name, as ``--attn-impl`` takes it) wherever it is started: the suite's plugin
    (:mod:`properties.plugin`) loaded by name, no ``addopts`` from an ini file found there,
    no cache directory written, and :data:`FAST_START`. Add the test paths and any ``-k``."""
    return [
        "-p",
        "attnprops.properties.plugin",
        "-o",
        "addopts=",
        "-p",
        "no:cacheprovider",
        *FAST_START,
        "--attn-impl",
        subject,
    ]
