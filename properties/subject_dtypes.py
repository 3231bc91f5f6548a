"""The dtypes a subject declares (:mod:`properties.subject`): its ``dtypes`` and its
arithmetic models ``compute_dtypes``, ``accumulate_dtypes`` and ``parameter_dtypes``, read
into names of :data:`ALL_DTYPES` or refused with a :class:`SubjectError` naming the key."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from attnprops.oracle.rules import FLOAT_DTYPES
from attnprops.properties.subject_import import SubjectError

__all__ = ["ALL_DTYPES", "covers", "dtype_names", "dtype_pairs", "narrowest_first"]

ALL_DTYPES = tuple(d.name for d in FLOAT_DTYPES)  # what a subject may declare


def dtype_names(name: str, declared) -> tuple[str, ...]:
    """The declared ``dtypes`` as names, or a SubjectError naming the key and what it
    accepts (a string, an unknown dtype such as ``float8_e4m3fn`` or ``fp16``, or none at
    all)."""
    problem = (
        f"subject {name!r}: ATTNPROPS_CAPABILITIES dtypes={declared!r} must be a "
        f"non-empty tuple of {ALL_DTYPES}"
    )
    if isinstance(declared, (str, bytes)):
        raise SubjectError(problem)
    try:
        names = tuple(np.dtype(d).name for d in declared if d is not None)
    except TypeError:  # not a dtype NumPy knows ('fp16', ...)
        raise SubjectError(problem) from None
    if not names or len(names) != len(tuple(declared)) or not set(names) <= set(ALL_DTYPES):
        raise SubjectError(problem)
    if len(set(names)) != len(names):  # "float32" and "f4" are one dtype
        raise SubjectError(
            f"{problem}; {sorted(set(n for n in names if names.count(n) > 1))} declared twice"
        )
    return names


def narrowest_first(dtypes, *, bits: int | None = None) -> tuple[str, ...]:
    """The dtype names ``dtypes`` (a subject's declared ones), the narrowest last: the order
    in which :func:`~properties.kernel_cases.kernel_specs` shrinks towards the last, for a
    property about sums kept in too little precision, a 16-bit kernel's fault. ``bits``:
    only those of at most that many bits, where there are any."""
    names = sorted(dtypes, key=lambda d: -np.dtype(d).itemsize)
    narrow = [d for d in names if bits is not None and 8 * np.dtype(d).itemsize <= bits]
    return tuple(narrow or names)


def covers(wide: str, narrow: str) -> bool:
    """Whether every ``narrow`` value and every rounding in it is at least as fine in ``wide``:
    a unit roundoff no larger and a range no smaller (float16 has bfloat16's precision and
    more, but not its range: 65504 against 3.39e38)."""
    w, n = ml_dtypes.finfo(wide), ml_dtypes.finfo(narrow)
    return w.eps <= n.eps and w.max >= n.max and w.smallest_subnormal <= n.smallest_subnormal


def dtype_pairs(
    name: str, key: str, declared, at_least_as_precise: bool = True
) -> tuple[tuple[str, str], ...]:
    """A declared ``{input dtype: dtype}`` dict (``compute_dtypes``, ``accumulate_dtypes``,
    ``parameter_dtypes``) as sorted pairs of names, or a SubjectError naming the key: both names
    among :data:`ALL_DTYPES`, the second at least as precise as the first where
    ``at_least_as_precise``."""
    if not isinstance(declared, dict):
        raise SubjectError(
            f"subject {name!r}: {key}={declared!r} must be a dict "
            f"of dtype names, e.g. {{'float16': 'float32'}}"
        )
    pairs = []
    for given, computed in declared.items():
        try:
            if given is None or computed is None:  # np.dtype(None) is float64
                raise TypeError
            pair = (np.dtype(given).name, np.dtype(computed).name)
        except TypeError:
            pair = (str(given), str(computed))
        entry = f"subject {name!r}: {key} {given!r}: {computed!r}"
        if not set(pair) <= set(ALL_DTYPES):
            raise SubjectError(f"{entry}: both must be one of {ALL_DTYPES}")
        if at_least_as_precise and not covers(pair[1], pair[0]):
            raise SubjectError(
                f"{entry}: {pair[1]} is less precise than {pair[0]} or has a smaller range; "
                "a model's dtype must be at least as precise as the input's, with its range"
            )
        if pair[0] in (p[0] for p in pairs):  # "half" and "float16" are one dtype
            raise SubjectError(f"{entry}: {pair[0]} is declared twice")
        pairs.append(pair)
    return tuple(sorted(pairs))
