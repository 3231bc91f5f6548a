"""Properties of input handling: invalid inputs raise, nothing is modified, fully masked rows
follow the subject's declared convention (never NaN)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import note
from hypothesis import settings
from hypothesis import strategies as st

from attnprops.oracle.violations import BY_RULE
from attnprops.properties._support import assert_output_within
from attnprops.properties._support import four_d
from attnprops.properties._support import needs_a_variant
from attnprops.properties._support import oracle_with_bounds
from attnprops.properties._support import visibility
from attnprops.properties.checks import assert_equal
from attnprops.properties.checks import call_subject
from attnprops.properties.checks import describe_result
from attnprops.properties.checks import fail
from attnprops.properties.invalid import INVALID_KINDS
from attnprops.properties.invalid import fully_masked_cases
from attnprops.properties.invalid import invalid_cases
from attnprops.properties.plugin import current_subject
from attnprops.properties.strategies import declared_variants
from attnprops.properties.strategies import subject_cases

SUBJECT = current_subject()
_KINDS = tuple(
    k
    for k in INVALID_KINDS
    if k != "fully masked row" or SUBJECT.capabilities.fully_masked_rows == "raise"
)
_KINDS = tuple(k for k in _KINDS if "float mask" not in k or SUBJECT.capabilities.float_masks)
_KINDS = tuple(  # a rule on an argument the subject does not take (window=) is not its rule
    k
    for k in _KINDS
    if all(getattr(SUBJECT.capabilities, n) == value for n, value in BY_RULE[k].needs)
)


def _snapshot(*arrays):
    return [None if a is None else np.array(a, copy=True) for a in arrays]


@pytest.mark.requires("validates_inputs")
@pytest.mark.parametrize("kind", _KINDS)
@settings(max_examples=max(5, settings.default.max_examples // 10))
@given(data=st.data())
def test_invalid_inputs_raise(subject, kind, data):
    """Every input that breaks a rule of ``oracle.rules`` (one test id per rule) raises
    ``ValueError`` or ``TypeError`` — never a NaN result, never another exception — and
    leaves the inputs unchanged."""
    bad = data.draw(
        invalid_cases(
            dtypes=SUBJECT.capabilities.dtypes,
            kinds=(kind,),
            float_masks=SUBJECT.capabilities.float_masks,
        ),
        label="invalid call",
    )
    note(bad.describe())
    mask = bad.kwargs.get("attn_mask")
    before = _snapshot(bad.query, bad.key, bad.value, mask)
    try:
        out = subject.attention(bad.query, bad.key, bad.value, **bad.kwargs)
    except (ValueError, TypeError):
        pass
    except Exception as exc:
        fail(f"{bad.kind}: raised {type(exc).__name__}: {exc} instead of ValueError/TypeError")
    else:
        fail(f"{bad.kind}: accepted (argument {bad.argument}); returned {describe_result(out)}")
    for name, old, new in zip(
        ("query", "key", "value", "attn_mask"), before, (bad.query, bad.key, bad.value, mask)
    ):
        if old is not None:
            assert_equal(out=new, expected=old, what=f"{name} after a rejected call ({bad.kind})")


@given(case=subject_cases(SUBJECT))
def test_valid_inputs_not_modified(subject, case):
    """A valid call leaves query, key, value and attn_mask bitwise unchanged (no in-place
    scaling or masking of the caller's arrays)."""
    _assert_calls_leave_unchanged(subject, case, ("query", "key", "value", "attn_mask"))


_VARIANT_ARRAYS = ("alibi_slopes", "sinks", "segment_ids")


def _arrays(x) -> tuple:
    """``x`` as a tuple of its arrays: none for None, its items for a tuple (segment ids as
    ``(query_ids, key_ids)``), else ``(x,)``."""
    if x is None:
        return ()
    return tuple(x) if isinstance(x, tuple) else (x,)


@needs_a_variant(SUBJECT, covered_by="test_valid_inputs_not_modified")
@given(case=subject_cases(SUBJECT, **declared_variants(SUBJECT)))
def test_valid_variant_inputs_not_modified(subject, case):
    """A valid call with the subject's declared variants leaves every array it is given
    bitwise unchanged: query, key, value, attn_mask, and the ALiBi slopes, the sinks and
    the segment ids (a kernel that negates the slopes in place, or renumbers the ids it was
    handed, corrupts the caller's next call)."""
    names = ("query", "key", "value", "attn_mask", *_VARIANT_ARRAYS)
    _assert_calls_leave_unchanged(subject, case, names)


def _assert_calls_leave_unchanged(subject, case, names: tuple[str, ...]) -> None:
    """Call ``attention`` on ``case`` and, where declared, ``attention_weights``; after each
    call, every array of the case's fields ``names`` (a tuple field item by item) is bitwise
    as it was before (checked after each: two in-place flips would cancel). A failure shows
    the call as it was made."""
    __tracebackhide__ = True
    before = {name: _snapshot(*_arrays(getattr(case, name))) for name in names}
    calls = [
        (
            "attention",
            lambda: subject.attention(case.query, case.key, case.value, **case.subject_kwargs()),
        )
    ]
    if SUBJECT.capabilities.weights:
        calls.append(
            (
                "attention_weights",
                lambda: subject.attention_weights(case.query, case.key, **case.kwargs()),
            )
        )
    made = case._replace(  # the call as it was made (the case's arrays may be changed)
        **{
            name: tuple(old) if isinstance(getattr(case, name), tuple) else (old or [None])[0]
            for name, old in before.items()
        }
    )
    for what, call in calls:
        call_subject(call, what=what)
        for name, old in before.items():
            for k, (o, new) in enumerate(zip(old, _arrays(getattr(case, name)))):
                part = f"{name}[{k}]" if isinstance(getattr(case, name), tuple) else name
                assert_equal(
                    out=new, expected=o, what=f"{part} after a valid {what} call", case=made
                )


@pytest.mark.oracle_backed
@given(
    case=fully_masked_cases(
        dtypes=SUBJECT.capabilities.dtypes, float_masks=SUBJECT.capabilities.float_masks
    )
)
def test_fully_masked_rows_follow_declared_convention(subject, case):
    """A query row with no visible key either raises ``ValueError`` (convention ``"raise"``,
    the source lab's rule) or gives a zero output row with every other row correct
    (``"zeros"``: PyTorch >= 2.5, FlashAttention) — as the subject declares; never NaN."""
    note(f"case: {case.describe()}; declared: {SUBJECT.capabilities.fully_masked_rows}")
    try:
        out = subject.attention(case.query, case.key, case.value, **case.subject_kwargs())
    except (ValueError, TypeError) as exc:
        if SUBJECT.capabilities.fully_masked_rows == "raise":
            return
        fail(f"declared fully_masked_rows='zeros' but raised {type(exc).__name__}: {exc}")
    if SUBJECT.capabilities.fully_masked_rows == "raise":
        fail(
            f"declared fully_masked_rows='raise' but returned {describe_result(out)} for a "
            f"fully masked row"
        )
    parts, bounds = oracle_with_bounds(case, subject)
    if isinstance(out, np.ndarray) and out.shape == parts.output.value.shape:
        empty = ~visibility(case).any(axis=-1)  # (B, Hq, Tq): the rows that see no key
        rows = four_d(out)[empty]
        if (rows != 0).any():  # NaN too
            fail(
                f"declared fully_masked_rows='zeros' but the {int(empty.sum())} fully masked "
                f"row(s) {np.argwhere(empty).tolist()} gave {rows.tolist()}"
            )
    assert_output_within(
        out,
        case,
        parts,
        bounds,
        what="output of the rows that see a key (the fully masked ones are zero, as declared)",
        shape_what="output",
    )
