"""The arguments of ``attnprops check`` (:mod:`ci.check`): the parser's options and the
checks that refuse a bad value with a one-line message before any pytest run (a bad
profile, seed, ``--jobs`` or ``-k`` expression would otherwise end in a traceback or an
INTERNALERROR under pytest-xdist)."""

from __future__ import annotations

import os

from attnprops.properties.options import ROBUSTNESS_ENV_VAR
from attnprops.properties.options import ROBUSTNESS_MODES
from attnprops.properties.profiles import DATABASE_ENV_VAR
from attnprops.properties.profiles import PROFILES
from attnprops.properties.profiles import random_profiles

__all__ = ["add_arguments", "check_keyword", "check_seed", "jobs", "validate_profiles"]


def add_arguments(parser) -> None:
    parser.add_argument(
        "--impl",
        default=os.environ.get("ATTN_IMPL", "attnprops.impl"),
        metavar="MODULE",
        help="subject: a module importable from the current folder or "
        "PYTHONPATH, or a .py file (default: $ATTN_IMPL or attnprops.impl)",
    )
    parser.add_argument(
        "--profile",
        default=os.environ.get("HYPOTHESIS_PROFILE", "ci"),
        help=f"Hypothesis profile, one of {', '.join(PROFILES)} (default: "
        "$HYPOTHESIS_PROFILE or ci)",
    )
    parser.add_argument(
        "--jobs",
        default="auto",
        help="pytest-xdist workers (default auto: the CPU count); never more than the tests "
        "-k and --shard select",
    )
    stop = parser.add_mutually_exclusive_group()
    stop.add_argument(
        "-x",
        "--exitfirst",
        action="store_const",
        const=1,
        dest="maxfail",
        help="stop after the first failing property",
    )
    stop.add_argument(
        "--maxfail", type=_positive, metavar="N", help="stop after N failing properties"
    )
    parser.add_argument(
        "-k",
        metavar="EXPRESSION",
        dest="keyword",
        help="run only the properties matching this pytest -k expression",
    )
    parser.add_argument(
        "--shard",
        metavar="I/N",
        help="run shard I of N (1-based): every N-th property test from the "
        "I-th, the same split on every machine (a CI matrix fans out)",
    )
    parser.add_argument(
        "--seed",
        type=_seed,
        metavar="N",
        help="Hypothesis seed of a random profile (dev, thorough): the same seed draws the "
        "same examples again (pytest's --hypothesis-seed); refused with a derandomized one",
    )
    parser.add_argument("--junitxml", metavar="FILE", help="write pytest's JUnit XML report")
    parser.add_argument(
        "--json",
        metavar="FILE",
        dest="json_file",
        help="write the summary as JSON (counts, failures with their "
        "counterexamples, skipped properties with their reasons)",
    )
    parser.add_argument(
        "--robustness",
        choices=ROBUSTNESS_MODES,
        default=os.environ.get(ROBUSTNESS_ENV_VAR) or "report",
        help="robustness-tier properties: 'report' them without failing the "
        "check (default, or $ATTN_ROBUSTNESS) or 'gate' on them",
    )


def _positive(text: str) -> int:
    """argparse type: a positive integer (argparse turns the ValueError into a usage line)."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


_positive.__name__ = "positive integer"  # argparse: "invalid positive integer value: '0'"


def _seed(text: str) -> int:
    """argparse type: a seed, an integer >= 0 (what ``--hypothesis-seed`` takes as a number)."""
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


_seed.__name__ = "seed (an integer >= 0)"


def check_seed(seed: int | None, profile: str) -> None:
    """Exit with a one-line message for ``--seed`` where it would be ignored without a word:
    under a derandomized profile (ci, mutation: the plugin seeds each property from its
    name), or with an example database (``$ATTNPROPS_DATABASE``: a run under a global seed
    neither replays nor saves examples, Hypothesis's rule)."""
    if seed is None:
        return
    if profile not in random_profiles():
        raise SystemExit(
            f"attnprops check: --seed {seed}: profile {profile!r} is derandomized (each property "
            f"is seeded from its name); a seed takes effect under {' or '.join(random_profiles())}"
        )
    if os.environ.get(DATABASE_ENV_VAR):
        raise SystemExit(
            f"attnprops check: --seed {seed} with {DATABASE_ENV_VAR} set: a seeded run neither "
            "replays nor saves examples (Hypothesis turns the database off under a seed); "
            "use one or the other"
        )


def jobs(text: str) -> int:
    """``--jobs``: ``auto`` (the CPU count) or a positive integer; else a one-line exit."""
    if text == "auto":
        return os.cpu_count() or 1
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise SystemExit(f"attnprops check: --jobs {text!r}: use auto or a positive integer")
    return jobs


def check_keyword(expression: str) -> None:
    """Exit with a one-line message when pytest cannot parse the ``-k`` expression (under
    pytest-xdist such an expression ends the run in an INTERNALERROR, not pytest's usage
    error). Parsed with the parser pytest's ``-k`` itself uses, ``_pytest.mark.expression``
    (private: where it is missing, pytest's own message is left to show). An expression with
    ``[`` gets a hint: a test id pasted from a report (``test_x[query ndim]``) is no
    ``-k`` expression."""
    try:
        from _pytest.mark.expression import Expression
    except ImportError:
        return
    try:
        Expression.compile(expression)
    except SyntaxError as exc:  # pytest's ParseError is a SyntaxError
        hint = ""
        if "[" in expression:  # a test id pasted from a report: its parameters hold spaces
            hint = (
                " (a test id's [parameters] are not -k words: give its words joined by "
                "'and', e.g. -k 'invalid_inputs_raise and ndim')"
            )
        raise SystemExit(
            f"attnprops check: -k {expression!r} is not a pytest -k expression: {exc.msg}{hint}"
        ) from None


def validate_profiles(*names: str) -> None:
    """Exit with a one-line message naming a profile that :mod:`properties.profiles` lacks
    (checked before any pytest run, which would otherwise fail with a traceback)."""
    for name in names:
        if name not in PROFILES:
            raise SystemExit(
                f"attnprops: Hypothesis profile {name!r} is unknown; use one of "
                f"{', '.join(PROFILES)} (see --help)"
            )
