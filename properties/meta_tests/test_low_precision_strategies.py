"""Meta-tests: bfloat16 is drawn where a subject declares it, never where it does not, and
its drawn values are bfloat16 values that pass float16's range; the quantized-cache runs draw
both fp8 storage dtypes, per-tensor and per-head scales that differ between heads, and codes
in fp8's subnormal range."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck
from hypothesis import Phase
from hypothesis import given
from hypothesis import settings

from attnprops.oracle.rules import FP8_NAMES
from attnprops.oracle.rules import quantize
from attnprops.properties.kernel_cases import kernel_specs
from attnprops.properties.kernel_cases import subject_kernel_specs
from attnprops.properties.meta_tests.test_strategy_coverage import pooled_draws
from attnprops.properties.quantized_cases import quantized_runs
from attnprops.properties.strategies import BFLOAT16
from attnprops.properties.strategies import attention_cases
from attnprops.properties.strategies import subject_cases
from attnprops.properties.subject import load_subject

FLOAT16_MAX = 65504.0
QUICK = settings(
    max_examples=120,
    derandomize=True,
    database=None,
    phases=[Phase.generate],
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def _is_bfloat16_valued(x: np.ndarray) -> bool:
    """Every entry survives a round trip through float32 and bfloat16 unchanged."""
    wide = x.astype(np.float64)
    return bool((wide.astype(np.float32).astype(BFLOAT16).astype(np.float64) == wide).all())


def test_impl_declares_bfloat16_and_its_cases_draw_it():
    """impl declares bfloat16 (computed in float32); its small cases draw bfloat16 inputs in
    every value regime, and the ``large`` ones pass float16's largest value."""
    impl = load_subject("attnprops.impl")
    assert "bfloat16" in impl.capabilities.dtypes
    arithmetic = impl.arithmetic(BFLOAT16)
    assert (arithmetic.storage, arithmetic.compute) == (BFLOAT16, np.dtype(np.float32))
    cases = pooled_draws(subject_cases(impl), runs=8, per_run=25)
    low = [c for c in cases if c.dtype == BFLOAT16]
    assert len(low) >= 20, f"{len(low)} bfloat16 cases in {len(cases)}"
    assert {c.magnitude for c in low} == {"unit", "ties", "large"}
    for c in low:
        assert c.key.dtype == c.value.dtype == BFLOAT16
        assert all(_is_bfloat16_valued(x) for x in (c.query, c.key, c.value))
    biggest = max(np.abs(c.key.astype(np.float64)).max() for c in low if c.magnitude == "large")
    assert biggest > FLOAT16_MAX


def test_kernel_specs_draw_bfloat16_past_float16s_range():
    """Kernel-sized specs draw bfloat16 when asked, build bfloat16 arrays, and ``large``
    values beyond 65504."""
    specs = []

    @QUICK
    @given(spec=kernel_specs(dtypes=("bfloat16", "float32"), max_len=64))
    def collect(spec):
        specs.append(spec)

    collect()
    low = [s for s in specs if s.dtype == "bfloat16"]
    assert low, "no bfloat16 spec drawn"
    large = [s for s in low if s.magnitude == "large"]
    assert large, "no large bfloat16 spec drawn"
    case = large[0].build()
    assert case.query.dtype == BFLOAT16 and _is_bfloat16_valued(case.query)
    assert np.abs(case.query.astype(np.float64)).max() > FLOAT16_MAX


def test_an_undeclared_subject_is_never_given_bfloat16(tmp_path):
    """bfloat16 is opt-in: a subject that declares no ``dtypes`` gets float16/32/64 only, in
    the small and the kernel-sized strategies."""
    path = tmp_path / "plain_attention.py"
    path.write_text("from attnprops.impl import attention\n", encoding="utf-8")
    plain = load_subject(str(path))
    assert plain.capabilities.dtypes == ("float16", "float32", "float64")
    seen = set()

    @QUICK
    @given(case=subject_cases(plain), spec=subject_kernel_specs(plain, max_len=32))
    def collect(case, spec):
        seen.update({case.dtype.name, spec.dtype})

    collect()
    assert seen == {"float16", "float32", "float64"}


def test_default_cases_do_not_draw_bfloat16():
    seen = set()

    @QUICK
    @given(case=attention_cases())
    def collect(case):
        seen.add(case.dtype.name)

    collect()
    assert "bfloat16" not in seen and "float64" in seen


def test_quantized_runs_draw_both_fp8_dtypes_and_per_head_scales():
    """impl's quantized-cache runs use float8_e4m3fn and float8_e5m2, with every cache
    dtype; per-head scales that differ between heads and per-tensor ones; every drawn value
    in range at its scale (the reference quantization accepts it), and some codes below fp8's
    smallest normal (its subnormals), where the rounding's absolute term matters."""
    import ml_dtypes

    impl = load_subject("attnprops.impl")
    runs = pooled_draws(quantized_runs(impl), runs=8, per_run=25)
    assert {r.storage for r in runs} == set(FP8_NAMES)
    assert {r.case.dtype.name for r in runs} == set(impl.capabilities.dtypes)
    per_head = [r for r in runs if np.ndim(r.key_scale) == 1]
    assert per_head and len(per_head) < len(runs), "per-head and per-tensor scales both drawn"
    assert any(len(set(r.key_scale.tolist())) > 1 for r in per_head), "heads' scales differ"
    subnormal = 0
    for r in runs:
        for which, x in (("key", r.case.key), ("value", r.case.value)):
            codes = quantize(x, r.scales(which), r.storage, which).astype(np.float64)
            normal = float(ml_dtypes.finfo(r.storage).smallest_normal)
            subnormal += int(((codes != 0) & (np.abs(codes) < normal)).sum())
    assert subnormal > 0
