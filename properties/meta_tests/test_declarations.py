"""ATTNPROPS_CAPABILITIES's arithmetic keys: what they mean for the bounds, and bad values
are errors that name the key (a typo must not silently pass)."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from attnprops.properties.subject import SubjectError
from attnprops.properties.subject import load_subject


def _subject(monkeypatch, caps):
    module = types.ModuleType("declared_subject")
    module.attention = lambda query, key, value, **kwargs: None  # only loaded, never run
    module.ATTNPROPS_CAPABILITIES = caps
    monkeypatch.setitem(sys.modules, "declared_subject", module)
    return load_subject("declared_subject")


def test_declared_arithmetic_reaches_the_bounds(monkeypatch):
    subject = _subject(
        monkeypatch, {"compute_dtypes": {"float16": "float32"}, "rounds_weights": True}
    )
    half = subject.arithmetic(np.float16)
    assert (half.storage, half.compute, half.rounds_weights) == (
        np.dtype("float16"),
        np.dtype("float32"),
        True,
    )
    double = subject.arithmetic(np.float64)  # undeclared dtype: itself, nothing rounded
    assert (double.compute, double.rounds_weights) == (np.dtype("float64"), False)
    plain = _subject(monkeypatch, {})
    assert plain.arithmetic(np.float16).compute == np.dtype("float16")
    assert not plain.arithmetic(np.float32).exp2
    assert _subject(monkeypatch, {"exp2": True}).arithmetic(np.float32).exp2
    assert plain.arithmetic(np.float16).accumulation == np.dtype("float16")


def test_declared_accumulation_reaches_the_bounds(monkeypatch):
    """``accumulate_dtypes``: the weighted sum's dtype, by input dtype (default: the compute
    dtype); it is what item 3 of properties.bounds charges ``gamma`` with."""
    subject = _subject(
        monkeypatch,
        {
            "dtypes": ("bfloat16", "float32"),
            "compute_dtypes": {"bfloat16": "float32"},
            "accumulate_dtypes": {"bfloat16": "bfloat16"},
        },
    )
    low = subject.arithmetic("bfloat16")
    assert (low.compute, low.accumulation) == (np.dtype("float32"), np.dtype("bfloat16"))
    assert low.weighted_sum_roundoff() == 2.0**-8
    assert subject.arithmetic(np.float32).accumulation == np.dtype("float32")


@pytest.mark.parametrize(
    "caps, message",
    [
        ({"compute_dtypes": {"float32": "float16"}}, "at least as precise"),
        ({"compute_dtypes": {"float16": "bfloat16"}}, "compute_dtypes"),
        ({"compute_dtypes": {"float16": None}}, "compute_dtypes"),
        ({"compute_dtypes": {None: "float32"}}, "compute_dtypes"),
        ({"compute_dtypes": {"float16": "int32"}}, "compute_dtypes"),
        ({"compute_dtypes": ["float16", "float32"]}, "must be a dict"),
        ({"accumulate_dtypes": {"float32": "bfloat16"}}, "accumulate_dtypes .*at least as"),
        ({"accumulate_dtypes": "float32"}, "accumulate_dtypes=.* must be a dict"),
        ({"rounds_weights": "no"}, "rounds_weights='no' must be True or False"),
        ({"exp2": 1}, "exp2=1 must be True or False"),
        ({"validates_inputs": 0}, "validates_inputs=0 must be True or False"),
        ({"segment_ids": "yes"}, "segment_ids='yes' must be True or False"),
        ({"chunk_size": 64}, "chunk_size=64 must be True or False"),
        ({"alibi": "yes"}, "alibi='yes' must be True or False"),
        ({"softcap": 50.0}, "softcap=50.0 must be True or False"),
        # float16 is finer than bfloat16 but ends at 65504: not a bfloat16 compute dtype
        ({"dtypes": ("bfloat16",), "compute_dtypes": {"bfloat16": "float16"}}, "with its range"),
        ({"dtypes": ("bfloat16",), "accumulate_dtypes": {"bfloat16": "float16"}}, "its range"),
        # a model for a dtype the subject does not declare would never be drawn
        ({"compute_dtypes": {"bfloat16": "float32"}}, r"declares \['bfloat16'\], which dtypes="),
        ({"dtypes": ("float32",), "parameter_dtypes": {"float64": "float32"}}, "not list"),
        ({"compute_dtypes": {"float64": "float32"}}, "float32 is less precise than float64"),
        ({"compute_dtypes": {"half": "float32", "float16": "float16"}}, "declared twice"),
        ({"dtypes": ("float32", "f4")}, "declared twice"),
    ],
)
def test_bad_arithmetic_declarations_are_errors(monkeypatch, caps, message):
    with pytest.raises(SubjectError, match=message):
        _subject(monkeypatch, caps)


@pytest.mark.parametrize(
    "dtypes", [("float8_e4m3fn",), ("fp16",), "float32", (), ("float32", None), ("int8",), 5]
)
def test_unsupported_dtypes_are_one_line_errors_naming_the_key(monkeypatch, dtypes):
    with pytest.raises(SubjectError, match=r"dtypes=.* must be a non-empty tuple of") as info:
        _subject(monkeypatch, {"dtypes": dtypes})
    assert "\n" not in str(info.value)


def test_a_missing_optional_library_names_its_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "torch", None)  # "import torch" now fails as if absent
    path = tmp_path / "needs_torch.py"
    path.write_text(
        "import torch\n\ndef attention(query, key, value, **kwargs):\n    pass\n", encoding="utf-8"
    )
    with pytest.raises(SubjectError, match=r"pip install -e \.\[torch\]"):
        load_subject(str(path))


@pytest.mark.parametrize(
    "library, package, extra",
    [
        ("torch", "torch", "torch"),
        ("jax", "jax", "jax"),
        ("jaxlib", "jax", "jax"),
        ("onnx", "onnx", "onnx"),
        ("onnxruntime", "onnxruntime", "onnx"),
    ],
)
def test_a_missing_optional_library_names_both_installs(
    monkeypatch, tmp_path, library, package, extra
):
    """The hint works in a vendored copy (no extra: pip install the package) and in a
    clone/install (the extra)."""
    monkeypatch.setitem(sys.modules, library, None)  # "import LIB" now fails as if absent
    path = tmp_path / f"needs_{library}.py"
    path.write_text(
        f"import {library}\n\ndef attention(query, key, value, **kwargs):\n    pass\n",
        encoding="utf-8",
    )
    with pytest.raises(SubjectError) as info:
        load_subject(str(path))
    hint = [line for line in str(info.value).splitlines() if "optional dependency" in line]
    assert hint == [
        f"{library} is an optional dependency: install {package} (pip install {package}; "
        f"from an attnprops clone: pip install -e .[{extra}]; for an installed "
        f"attnprops: pip install 'attnprops[{extra}]')"
    ]


def test_a_missing_transformers_names_the_hf_extra_and_both_packages(monkeypatch, tmp_path):
    """The Hugging Face subjects' library is transformers, their extra ``hf`` (transformers
    and torch): a vendored copy is told to pip install both packages, a clone the extra."""
    monkeypatch.setitem(sys.modules, "transformers", None)  # "import transformers" fails
    path = tmp_path / "needs_transformers.py"
    path.write_text(
        "import transformers\n\ndef attention(query, key, value, **kwargs):\n    pass\n",
        encoding="utf-8",
    )
    with pytest.raises(SubjectError) as info:
        load_subject(str(path))
    hint = [line for line in str(info.value).splitlines() if "optional dependency" in line]
    assert hint == [
        "transformers is an optional dependency: install transformers torch (pip install "
        "transformers torch; from an attnprops clone: pip install -e .[hf]; for an installed "
        "attnprops: pip install 'attnprops[hf]')"
    ]


def test_the_hf_subjects_name_their_extra_when_transformers_is_missing(monkeypatch):
    """``--impl attnprops.properties.subjects.hf_sdpa_attention`` (and eager) without
    transformers is one SubjectError whose hint names the ``hf`` extra."""
    monkeypatch.setitem(sys.modules, "transformers", None)
    for name in ("hf_sdpa_attention", "hf_eager_attention", "_hf_attention", "_hf_masks"):
        monkeypatch.delitem(sys.modules, f"attnprops.properties.subjects.{name}", raising=False)
    for name in ("hf_sdpa_attention", "hf_eager_attention"):
        with pytest.raises(SubjectError, match=r"pip install -e \.\[hf\]"):
            load_subject(f"attnprops.properties.subjects.{name}")


def test_a_missing_subject_is_one_message_without_attnprops_frames():
    """The subject module itself is not there: the message, and no traceback of attnprops'
    own import code (a subject that fails *inside* its import keeps its traceback)."""
    with pytest.raises(SubjectError) as info:
        load_subject("no_such_subject_module_zzz")
    text = str(info.value)
    assert "No module named 'no_such_subject_module_zzz'" in text
    assert "Traceback" not in text and "subject.py" not in text, text


def test_a_subject_failing_inside_its_import_keeps_its_traceback(tmp_path):
    path = tmp_path / "broken_subject.py"
    path.write_text("import no_such_dependency_zzz\n", encoding="utf-8")
    with pytest.raises(SubjectError) as info:
        load_subject(str(path))
    assert "broken_subject.py" in str(info.value) and "line 1" in str(info.value)


@pytest.mark.parametrize("window", ["hf", True, "flash"])
def test_unknown_window_conventions_are_errors(monkeypatch, window):
    with pytest.raises(SubjectError, match=r"window=.* must be None \(no local window\)"):
        _subject(monkeypatch, {"window": window})


def test_windows_reach_a_subject_in_its_declared_convention(monkeypatch):
    """The suite draws ``window=(left, right)``; a subject declaring Hugging Face's
    convention is called with ``sliding_window=left + 1`` instead (and only causal, without
    a right side, by the strategies); one declaring ``offsets`` gets the pair unchanged."""
    from hypothesis import given
    from hypothesis import settings

    from attnprops import impl
    from attnprops.properties.strategies import subject_cases

    module = types.ModuleType("hf_style_subject")

    def attention(query, key, value, *, sliding_window=None, **kwargs):
        window = None if sliding_window is None else (sliding_window - 1, 0)
        return impl.attention(query, key, value, window=window, **kwargs)

    module.attention = attention
    module.ATTNPROPS_CAPABILITIES = {"window": "sliding_window"}
    monkeypatch.setitem(sys.modules, "hf_style_subject", module)
    subject = load_subject("hf_style_subject")
    assert subject.call_kwargs({"window": (3, None), "scale": 0.5}) == {
        "scale": 0.5,
        "sliding_window": 4,
    }
    plain = _subject(monkeypatch, {"window": "offsets"})
    assert plain.call_kwargs({"window": (3, 1)}) == {"window": (3, 1)}

    @settings(max_examples=40, database=None, deadline=None)
    @given(case=subject_cases(subject, windows=True))
    def check(case):
        assert case.is_causal and case.window[1] is None
        got = subject.attention(case.query, case.key, case.value, **case.kwargs())
        want = impl.attention(case.query, case.key, case.value, **case.kwargs())
        np.testing.assert_array_equal(got, want)

    check()
