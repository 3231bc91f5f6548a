"""Hypothesis settings profiles for the property suite.

Selected by ``HYPOTHESIS_PROFILE`` (or ``--hypothesis-profile NAME``, or
``attnprops check --profile NAME``); the default is ``ci``.

``dev``       fast feedback while editing (few examples, example database on, no "explain"
              phase: it costs about 30 s per failing property here, and ``attnprops check``
              already names the subject's line that raised).
``ci``        reproducible (derandomized, no database; the plugin seeds each property from its
              name, not its source) and large enough to kill every mutant.
``mutation``  ``ci`` without the explicit ``@example`` cases: the mutation runner's first pass,
              so a mutant is killed by a *generated* input and the report shows Hypothesis's
              shrunk (minimal) counterexample, not a hand-written seed case. The runner falls
              back to ``ci`` (explicit examples on) for a mutant this pass does not kill.
``thorough``  3x the ci examples, random (not derandomized), with the explain phase: nightly
              runs, vary ``--hypothesis-seed``.

``ATTNPROPS_DATABASE`` (any profile) sets the Hypothesis example database, so a failure
found on one machine replays first on every other (Hypothesis's *reuse* phase; ``ci`` is
derandomized and reads no database unless this is set): ``dir:PATH`` (a folder, e.g. a cache
or artifact that CI jobs share), ``github:OWNER/REPO`` (the ``hypothesis-example-db``
artifacts that a workflow uploads, read-only, in front of the local ``.hypothesis/examples``;
needs ``GITHUB_TOKEN``), ``redis:URL`` (``pip install hypothesis[redis]``). See
:func:`database_from` and the nightly recipe in ``docs/use-in-your-codebase.md``.

Costly properties carry a marker and run a share of the profile's examples
(:data:`COSTLY_MARKERS`, :func:`costly_examples`; the plugin applies it to every marked test
at collection): ``@pytest.mark.oracle_backed`` (the 50-digit oracle costs milliseconds per
case) half, never below 10; ``@pytest.mark.kernel_sized`` (``properties/test_kernel_sizes.py``)
a twelfth, never below 3 (8 in ci; each case costs tenths of a second; their sizes, not their
number, are what they spend, and the first two examples Hypothesis tries are the tiny minimal
ones).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck
from hypothesis import Phase
from hypothesis import Verbosity
from hypothesis import settings

DEFAULT_PROFILE = "ci"
DATABASE_ENV_VAR = "ATTNPROPS_DATABASE"
PROFILES = ("dev", "ci", "mutation", "thorough")
ORACLE_FRACTION = 2  # oracle-backed properties run 1/ORACLE_FRACTION of the examples
KERNEL_FRACTION = 12  # kernel-sized properties run 1/KERNEL_FRACTION of the examples
# marker -> (fraction of the profile's examples, the fewest examples): see costly_examples
COSTLY_MARKERS = {"oracle_backed": (ORACLE_FRACTION, 10), "kernel_sized": (KERNEL_FRACTION, 3)}

# Hypothesis's own "default" profile is the parent: a bare register_profile inherits the
# profile loaded at the time, which is Hypothesis's "ci" (derandomized, no database) wherever
# the CI variable is set, so thorough was derandomized on CI (the same examples every night)
# and dev lost its database.
_common = dict(
    parent=settings.get_profile("default"),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)

# Every profile but thorough skips the "explain" phase (which lines ran only in failing
# examples, which parts of a counterexample do not matter): it about halves the time a mutant
# takes to die, the report does not use it, and a failing property in dev waited about 30 s
# for it (test_single_visible_key_returns_its_value on a raising subject: 32.6 s of 35 s).
_no_explain = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink]
settings.register_profile("dev", max_examples=25, phases=_no_explain, **_common)
settings.register_profile(
    "ci",
    max_examples=100,
    derandomize=True,
    database=None,
    phases=_no_explain,
    **_common,
)
# report_multiple_bugs=False: the runner reports one counterexample per mutant, and a mutant
# that fails two checks of one property (say the float64 check and the exact check of a
# kernel-sized case) would otherwise be shrunk once per check.
settings.register_profile(
    "mutation",
    settings.get_profile("ci"),
    phases=[Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    report_multiple_bugs=False,
)
settings.register_profile("thorough", max_examples=300, database=None, **_common)


def random_profiles() -> tuple[str, ...]:
    """The profiles that draw from a random seed (not derandomized): ``dev`` and
    ``thorough``, the ones where ``--hypothesis-seed`` (``attnprops check --seed``) takes
    effect."""
    return tuple(p for p in PROFILES if not settings.get_profile(p).derandomize)


def load_profile(
    name: str | None = None, *, verbosity: str | None = None, explain: bool = False
) -> str:
    """Load ``name`` (default ``$HYPOTHESIS_PROFILE`` or ``ci``), with the example database
    of ``$ATTNPROPS_DATABASE`` when set (:func:`database_from`), and return the name.
    ``verbosity`` (a :class:`hypothesis.Verbosity` name) and ``explain`` (add the explain
    phase) are what Hypothesis's own pytest options ``--hypothesis-verbosity`` and
    ``--hypothesis-explain`` set on top of a profile; the plugin passes them on, since loading
    the profile here replaces the one those options were applied to (they were lost).

    Raises:
        ValueError: an unknown profile, database specification or verbosity (the message
            says which forms are accepted).
    """
    name = name or os.environ.get("HYPOTHESIS_PROFILE") or DEFAULT_PROFILE
    if name not in PROFILES:
        raise ValueError(f"HYPOTHESIS_PROFILE={name!r}: use one of {PROFILES}")
    changes = {}
    spec = os.environ.get(DATABASE_ENV_VAR)
    if spec:
        changes["database"] = database_from(spec)
    if verbosity:
        if verbosity not in Verbosity.__members__:
            raise ValueError(f"verbosity {verbosity!r}: use one of {list(Verbosity.__members__)}")
        changes["verbosity"] = Verbosity[verbosity]
    base = settings.get_profile(name)
    if explain and Phase.explain not in base.phases:
        changes["phases"] = (*base.phases, Phase.explain)
    if changes:
        derived = f"{name}+" + "+".join(sorted(changes))
        settings.register_profile(derived, base, **changes)
        settings.load_profile(derived)
    else:
        settings.load_profile(name)
    return name


def database_from(spec: str):
    """The Hypothesis example database that ``$ATTNPROPS_DATABASE`` names.

    ``dir:PATH``: :class:`~hypothesis.database.DirectoryBasedExampleDatabase` at ``PATH``.
    ``github:OWNER/REPO``: :class:`~hypothesis.database.GitHubArtifactDatabase` of that
    repository, read-only (:class:`~hypothesis.database.ReadOnlyDatabase`), multiplexed with
    the local ``.hypothesis/examples`` that this run writes (Hypothesis's documented
    pattern: CI uploads that folder as the ``hypothesis-example-db`` artifact).
    ``redis:URL``: :class:`~hypothesis.extra.redis.RedisExampleDatabase` on
    ``redis.Redis.from_url(URL)``.

    Raises:
        ValueError: any other form, or ``redis:`` without the redis package.
    """
    from hypothesis import database

    kind, _, rest = spec.partition(":")
    if kind == "dir" and rest:
        if os.path.exists(rest) and not os.path.isdir(rest):
            raise ValueError(f"{DATABASE_ENV_VAR}={spec!r}: {rest} exists and is not a folder")
        return database.DirectoryBasedExampleDatabase(rest)
    if kind == "github" and rest.count("/") == 1 and all(rest.split("/")):
        owner, repo = rest.split("/")
        return database.MultiplexedDatabase(
            database.DirectoryBasedExampleDatabase(".hypothesis/examples"),
            database.ReadOnlyDatabase(database.GitHubArtifactDatabase(owner, repo)),
        )
    if kind == "redis" and rest:
        try:
            import redis
            from hypothesis.extra.redis import RedisExampleDatabase
        except ImportError:
            raise ValueError(
                f"{DATABASE_ENV_VAR}={spec!r}: needs the redis package "
                "(pip install hypothesis[redis])"
            ) from None
        return RedisExampleDatabase(redis.Redis.from_url(rest))
    raise ValueError(f"{DATABASE_ENV_VAR}={spec!r}: use dir:PATH, github:OWNER/REPO or redis:URL")


def costly_examples(marker: str, max_examples: int) -> int:
    """Examples of a property marked ``marker`` (a key of :data:`COSTLY_MARKERS`) under a
    profile of ``max_examples``: that share of them, never fewer than the marker's floor."""
    fraction, fewest = COSTLY_MARKERS[marker]
    return max(fewest, max_examples // fraction)


def ignore_local_constants() -> bool:
    """Stop Hypothesis from mining constants out of the local source while the suite runs;
    True when that took effect.

    Hypothesis (since 6.131) seeds its draws with the literals of every *local* module
    imported (not site-packages, not test files): the suite's own, the subject's, anything
    the run imports. The derandomized ``ci`` and ``mutation`` profiles then draw differently
    whenever any such literal changes: a reformatted string in an unrelated module, a
    different subject, an editable instead of a regular install. A mutant lost its generated
    kill that way, and another's counterexample grew from 320 to 2049 keys. With the pool
    emptied, the draws depend on the suite's strategies, the profile and the Hypothesis
    release only; the strategies aim at the boundaries themselves (``properties/sizes.py``).
    Hypothesis offers no setting for this, so the mining function of its provider
    (``hypothesis.internal.conjecture.providers._get_local_constants``, private) is replaced;
    where that name is missing (another release), nothing changes and False is returned
    (``properties/meta_tests/test_profiles.py`` checks the pinned release)."""
    try:
        from hypothesis.internal.conjecture import providers

        empty = providers.Constants()
        getattr(providers, "_get_local_constants")
    except (ImportError, AttributeError, TypeError):
        return False
    providers._get_local_constants = lambda: empty
    return True
