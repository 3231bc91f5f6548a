"""The bounds follow a subject's declared rounding model (properties.bounds, items 1 and 3): a
kernel that accumulates ``P V`` in bfloat16 is within the bound of that model and outside
the bound of the float32 accumulation it would break (mutant
``bfloat16_weighted_sum_accumulated_in_bfloat16``); impl, which accumulates in float32, is
within the float32 bound. A float64 subject that applies its scale through float32 square
roots (the ONNX ``Attention`` op, finding N2) is within the bound of ``parameter_dtypes``
float32 and outside the float64 one (its soft cap rounded to float32 likewise); a scale
rounded coarser than it declares fails."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from attnprops import impl
from attnprops.mutants import bfloat16_weighted_sum_accumulated_in_bfloat16 as bf16_acc
from attnprops.oracle import ball
from attnprops.properties.arithmetic import Arithmetic
from attnprops.properties.bounds import attention_bounds
from attnprops.properties.kernel_spec import KernelSpec
from attnprops.properties.strategies import BFLOAT16

FLOAT32 = np.dtype(np.float32)
DECLARED = Arithmetic(BFLOAT16, FLOAT32)  # float32 accumulation, as impl and the mutant claim
TRUE_MODEL = Arithmetic(BFLOAT16, FLOAT32, accumulate=BFLOAT16)  # what the mutant does


def _case(key_len: int, seed: int):
    return KernelSpec(
        "prefill", 1, 2, 1, key_len, key_len, 16, 16, True, None, "none", "bfloat16",
        "unit", None, seed,
    ).build()  # fmt: skip


def _excess(attention, case, arithmetic) -> float:
    """max over elements of ``|out - exact| / bound`` (above 1: outside the bound)."""
    out = attention(case.query, case.key, case.value, **case.kwargs()).astype(np.float64)
    parts = ball.attention_parts(case.query, case.key, case.value, **case.kwargs())
    bound = attention_bounds(case, parts, arithmetic).output
    return float((np.abs(out - parts.output.value) / bound).max())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_bfloat16_accumulator_breaks_float32_accumulation_and_meets_its_own(seed):
    """At 96 keys (``gamma_a(98)`` at ``2**-8`` is finite): outside the declared float32
    bound, inside the bfloat16-accumulation bound."""
    case = _case(96, seed)
    assert _excess(bf16_acc.attention, case, DECLARED) > 1
    assert _excess(bf16_acc.attention, case, TRUE_MODEL) <= 1


@pytest.mark.parametrize("seed", [0, 1])
def test_impl_meets_the_float32_accumulation_bound_in_bfloat16(seed):
    assert _excess(impl.attention, _case(96, seed), DECLARED) <= 1


def test_a_bfloat16_accumulation_bound_is_vacuous_past_253_keys():
    """Higham's ``gamma_n`` needs ``n u < 1``: at ``u = 2**-8`` and 254 keys (``Tk + 2 =
    256``) the worst-case bound is infinite, said rather than replaced by a tolerance."""
    case = _case(254, 0)
    parts = ball.attention_parts(case.query, case.key, case.value, **case.kwargs(), rows=[253])
    rows = case._replace(query=case.query[:, :, [253]])
    assert np.isinf(attention_bounds(rows, parts, TRUE_MODEL).output).all()
    assert np.isfinite(attention_bounds(rows, parts, DECLARED).output).all()


def test_a_probabilistic_bound_would_false_alarm_on_a_correct_bfloat16_accumulator():
    """Why bounds.py item 3 builds no probabilistic bound (Higham & Mary 2019): 1024 tied
    keys with values 1, accumulated in bfloat16 as the model declares, stagnate at 0.25
    (each weight ``2**-10`` is at most half an ulp of the running sum from 0.25 on), while
    ``lambda sqrt(n) ua`` at failure probability ``1e-6`` allows 0.67 relative: the errors
    all round one way, so the independence the bound assumes does not hold."""
    n = 1024
    q = np.zeros((1, 1, 1, 8), BFLOAT16)
    k = np.zeros((1, 1, n, 8), BFLOAT16)
    v = np.ones((1, 1, n, 1), BFLOAT16)
    error = abs(float(bf16_acc.attention(q, k, v)[0, 0, 0, 0]) - 1.0)  # exact output: 1
    lam = np.sqrt(2 * np.log(2 / 1e-6))  # 2 exp(-lam**2 / 2) = 1e-6
    probabilistic = lam * np.sqrt(n + 2) * 2.0**-8
    assert error == 0.75 and 0.67 < probabilistic < error
    assert impl.attention(q, k, v)[0, 0, 0, 0] == 1  # float32 accumulation: exact


FLOAT64 = np.dtype(np.float64)


def _scaled_through(dtype, scale: float) -> float:
    """The scale a subject applies when it rounds ``scale`` to ``dtype`` and multiplies q and
    k by the root taken there (the ONNX op's function body: ``Sqrt`` in float, then cast)."""
    root = np.sqrt(np.asarray(scale, dtype))
    return float(np.float64(root) ** 2)


def _float64_case(seed: int):
    return KernelSpec(
        "prefill", 1, 2, 1, 64, 64, 16, 16, True, None, "none", "float64", "unit", 0.3, seed,
    ).build()  # fmt: skip


@pytest.mark.parametrize("seed", [0, 1])
def test_a_scale_through_float32_roots_meets_its_declared_model_only(seed):
    """At float64 with ``scale=0.3``: the float32 root's error is outside the float64 bound
    and inside the bound with ``parameter_dtypes`` float32 (``gamma_c(4)`` at ``2**-24``)."""
    case = _float64_case(seed)

    def onnx_like(q, k, v, *, scale, **kwargs):
        return impl.attention(q, k, v, scale=_scaled_through(np.float32, scale), **kwargs)

    assert _excess(onnx_like, case, Arithmetic(FLOAT64, FLOAT64)) > 1
    assert _excess(onnx_like, case, Arithmetic(FLOAT64, FLOAT64, parameters=FLOAT32)) <= 1


def test_a_scale_rounded_coarser_than_declared_fails():
    """A subject that rounds the scale through float16 while declaring float32 is caught:
    the declared model's term is ``gamma(4)`` at ``2**-24``, not a tolerance."""
    case = _float64_case(0)

    def coarse(q, k, v, *, scale, **kwargs):
        return impl.attention(q, k, v, scale=_scaled_through(np.float16, scale), **kwargs)

    assert _excess(coarse, case, Arithmetic(FLOAT64, FLOAT64, parameters=FLOAT32)) > 1


def test_a_cap_rounded_to_float32_meets_its_declared_model_only():
    """At float64 with ``softcap=0.3`` (not a float32 number) and large scores: the cap's
    float32 rounding is outside the float64 bound and inside the bound with
    ``parameter_dtypes`` float32 (``2 uc min(A_j, c)``)."""
    case = _float64_case(0)._replace(scale=None, softcap=0.3)

    def cap_in_float32(q, k, v, *, softcap, **kwargs):
        return impl.attention(q, k, v, softcap=float(np.float32(softcap)), **kwargs)

    assert _excess(cap_in_float32, case, Arithmetic(FLOAT64, FLOAT64)) > 1
    assert _excess(cap_in_float32, case, Arithmetic(FLOAT64, FLOAT64, parameters=FLOAT32)) <= 1


LOG2E = math.log2(math.e)


def _exp2_folded(dtype, constant=None):
    """Attention as FlashAttention forms its weights, in ``dtype``: the scaled scores ``t``
    (a sink one more key), ``c = log2 e`` rounded to ``dtype`` (or to ``constant``, coarser:
    a fault), ``exp2(fl(t c) - fl(m c))`` (``m`` the row's largest ``t``), then ``P V / sum
    P``: the model ``exp2`` declares."""

    def attention(q, k, v, *, sinks=None, **kwargs):
        assert not kwargs  # the cases below pass sinks only
        F = np.dtype(dtype).type
        scale = F(1 / math.sqrt(q.shape[-1]))
        t = (scale * (q @ np.swapaxes(k, -1, -2))).astype(F)
        if sinks is not None:
            sink = np.broadcast_to(sinks.astype(F)[None, :, None, None], (*t.shape[:-1], 1))
            t = np.concatenate([t, sink], axis=-1)
        c = F(LOG2E if constant is None else np.asarray(LOG2E, constant).astype(F))
        mc = (t.max(axis=-1, keepdims=True) * c).astype(F)
        p = np.exp2(((t * c).astype(F) - mc).astype(F)).astype(F)
        total = p.sum(axis=-1, keepdims=True, dtype=F)
        p = p if sinks is None else p[..., :-1]
        return ((p @ v).astype(F) / total).astype(F)

    return attention


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", range(6))
def test_exp2_with_a_folded_log2e_meets_the_exp2_model(dtype, seed):
    """A kernel that forms its weights as ``exp2(fl(t c) - fl(m c))`` stays within the bound
    of the ``exp2`` model (bounds.py item 2, :meth:`Arithmetic.exponent_rounding`) on scores
    of tens to hundreds and sinks as large: the roundings of the constant and of ``m c``,
    ``u |s_m|`` per weight, are charged. One whose ``log2 e`` is a bfloat16 (``2**-9``
    relative, not the compute dtype's rounding) is outside it: a term, not a tolerance."""
    rng = np.random.default_rng(seed)
    F = np.dtype(dtype)
    q = (rng.standard_normal((1, 2, 8, 16)) * 4).astype(F)
    k = (rng.standard_normal((1, 2, 40, 16)) * 4).astype(F)
    v = rng.standard_normal((1, 2, 40, 8)).astype(F)
    sinks = (rng.uniform(-100, 100, 2)).astype(F)
    out = _exp2_folded(F)(q, k, v, sinks=sinks).astype(np.float64)
    parts = ball.attention_parts(q, k, v, sinks=sinks)
    case = SimpleNamespace(query=q, key=k, value=v, attn_mask=None, scale=None, sinks=sinks)
    bound = attention_bounds(case, parts, Arithmetic(F, F, exp2=True)).output
    assert (np.abs(out - parts.output.value) <= bound).all()
    coarse = _exp2_folded(F, constant=BFLOAT16)(q, k, v, sinks=sinks).astype(np.float64)
    assert (np.abs(coarse - parts.output.value) > bound).any()


def test_the_exp2_model_charges_a_large_maximum_and_plain_exp_does_not():
    """Finding F15's call (query 0, key 0, value 0.5, a sink of 85, float32): ``exp2`` adds
    ``u |s_m|``-sized terms for the maximum, the sink, that plain ``exp`` does not owe; the
    two bounds, relative to the exact output, are the figures docs/findings.md quotes."""
    F = np.dtype(np.float32)
    q = k = np.zeros((1, 1, 1, 1), F)
    v = np.full((1, 1, 1, 1), 0.5, F)
    sinks = np.array([85.0], F)
    parts = ball.attention_parts(q, k, v, sinks=sinks)
    case = SimpleNamespace(query=q, key=k, value=v, attn_mask=None, scale=None, sinks=sinks)
    exact = float(parts.output.value[0, 0, 0, 0])
    plain, exp2 = (
        float(attention_bounds(case, parts, Arithmetic(F, F, exp2=e)).output[0, 0, 0, 0]) / exact
        for e in (False, True)
    )
    assert 2.1e-5 < plain < 2.2e-5 and 6.2e-5 < exp2 < 6.3e-5
    folded = float(_exp2_folded(F)(q, k, v, sinks=sinks)[0, 0, 0, 0])
    assert abs(folded - exact) / exact < 4e-6  # the fold alone: far below the kernel's 2.65e-5
