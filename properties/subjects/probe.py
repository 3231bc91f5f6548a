"""Probe which conventions a subject follows, by calling it on tiny inputs whose answer
tells the conventions apart. ``docs/conventions.md`` is made from this script's output.

Usage::

    python -m attnprops.properties.subjects.probe SUBJECT [SUBJECT ...]

``SUBJECT`` is a module (``impl``, ``my_adapter``) or the name of one in
:mod:`properties.subjects` (``torch_sdpa``, ``torch_sdpa_naive_causal``,
``jax_dot_product_attention``, ``oracle_float64``); ``torch`` and ``jax`` probe the *raw*
library functions (only the layout converted: masks and ``is_causal`` passed natively).

Each probe prints what it observed and what that means:

mask polarity     q = k = 0, values [1, -1], bool mask [True, False]: output 1 means
                  True = attend, -1 means True = hide.
causal alignment  Tq=1, Tk=3 (and Tq=2, Tk=3), q = k = 0, value = identity: the output row
                  is the weights, so it lists the visible keys. Keys 0..Tk-Tq+i visible =
                  bottom-right (``query_start = Tk - Tq``); keys 0..i = top-left.
fully masked row  row 0 of a bool (and of a float ``-inf``) mask hides every key, values
                  [1, 3]: raise, zeros, NaN, or the mean of all values (2).
GQA mapping       Hq=4, Hkv=2, K/V head g holds value g: output per query head [0, 0, 1, 1]
                  is ``h // G`` (this project's convention); [0, 1, 0, 1] is ``h % Hkv``.
float16           accepted? output dtype; scores of 90000 (beyond float16's 65504): a finite
                  mean means the scores are computed in float32; the largest error over 20
                  seeded random cases in units of the suite's bound (<= 1 passes).
invalid inputs    NaN query, head_dim mismatch, integer mask, query_start out of range: what
                  the call does (raises which exception, or returns).
"""

from __future__ import annotations

import argparse
import importlib
import sys

import numpy as np

F64 = np.float64


def _verdict_row(out) -> str:
    return np.array2string(
        np.asarray(out, dtype=np.float64).ravel(), precision=4, suppress_small=True
    )


def _try(call):
    """``(output, None)`` or ``(None, 'ExceptionType: message')``."""
    try:
        return call(), None
    except Exception as exc:  # the probe reports whatever the subject does
        text = str(exc).splitlines()[0] if str(exc) else ""
        return None, f"{type(exc).__name__}: {text[:90]}"


# --- callers: (query, key, value, *, attn_mask, is_causal, query_start, scale) -> ndarray ------


def _subject_caller(module):
    def call(
        q, k, v, *, attn_mask=None, is_causal=False, query_start=None, scale=None, window=None
    ):
        extra = {} if window is None else {"window": window}  # only subjects with windows
        declared = getattr(module, "ATTNPROPS_CAPABILITIES", {}).get("window")
        if window is not None and declared == "sliding_window":  # Hugging Face's W keys
            if window[1] != 0:
                raise TypeError(f"sliding_window=W is (W - 1, 0) only, not {window}")
            extra = {"sliding_window": window[0] + 1}
        return np.asarray(
            module.attention(
                q,
                k,
                v,
                attn_mask=attn_mask,
                is_causal=is_causal,
                query_start=query_start,
                scale=scale,
                **extra,
            )
        )

    return call


def _torch_caller():
    import torch
    import torch.nn.functional as F

    def call(
        q, k, v, *, attn_mask=None, is_causal=False, query_start=None, scale=None, window=None
    ):
        if query_start is not None:
            raise TypeError("SDPA has no query_start")
        if window is not None:
            raise TypeError("SDPA has no local window")
        t = lambda x: None if x is None else torch.from_numpy(np.array(x))  # noqa: E731
        gqa = q.ndim == 4 and q.shape[1] != k.shape[1]
        return F.scaled_dot_product_attention(
            t(q),
            t(k),
            t(v),
            attn_mask=t(attn_mask),
            is_causal=is_causal,
            scale=scale,
            enable_gqa=gqa,
        ).numpy()

    call.version = f"torch {torch.__version__}, F.scaled_dot_product_attention"
    return call


def _jax_caller():
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def call(
        q, k, v, *, attn_mask=None, is_causal=False, query_start=None, scale=None, window=None
    ):
        if query_start is not None:
            raise TypeError("jax.nn.dot_product_attention has no query_start")
        extra = {} if window is None else {"local_window_size": tuple(window)}
        bthd = (0, 2, 1, 3)
        mask = bias = None
        if attn_mask is not None:
            m = np.asarray(attn_mask)
            m = m.reshape((1,) * (4 - m.ndim) + m.shape)
            floating = np.issubdtype(m.dtype, np.floating)
            mask, bias = (None, m) if floating else (m, None)  # float masks are JAX's bias
        out = jax.nn.dot_product_attention(
            jnp.transpose(q, bthd),
            jnp.transpose(k, bthd),
            jnp.transpose(v, bthd),
            bias=bias,
            mask=mask,
            is_causal=is_causal,
            scale=scale,
            **extra,
        )
        return np.asarray(jnp.transpose(out, bthd))

    call.version = f"jax {jax.__version__}, jax.nn.dot_product_attention (xla)"
    return call


# --- probes -----------------------------------------------------------------------------------


def probe_mask_polarity(call) -> str:
    """Which bool-mask value attends: q = k = 0 (equal scores), values [1, -1], mask
    [True, False]; the output is the value of the key that is kept."""
    q = np.zeros((1, 1, 1, 1), F64)
    k = np.zeros((1, 1, 2, 1), F64)
    v = np.array([1.0, -1.0]).reshape(1, 1, 2, 1)
    out, err = _try(lambda: call(q, k, v, attn_mask=np.array([[True, False]])))
    if err:
        return f"bool mask raised {err}"
    value = float(np.asarray(out).ravel()[0])
    meaning = {1.0: "True = attend", -1.0: "True = hide"}.get(value, "mask ignored or other")
    return f"mask [True, False] over values [1, -1] -> {value:g}: {meaning}"


def probe_causal_alignment(call, explicit: bool) -> str:
    """Which keys ``is_causal=True`` lets each query see when Tq < Tk (q = k = 0, value =
    identity, so each output row is the weight row); with ``explicit`` also ``query_start=1``
    (subjects only: the raw libraries have no such argument)."""
    parts = []
    for tq in (1, 2):
        q = np.zeros((1, 1, tq, 3), F64)
        k = np.zeros((1, 1, 3, 3), F64)
        v = np.eye(3).reshape(1, 1, 3, 3)
        out, err = _try(lambda: call(q, k, v, is_causal=True))
        if err:
            parts.append(f"Tq={tq}: raised {err}")
            continue
        rows = np.asarray(out)[0, 0] > 0
        seen = "; ".join(
            f"query {i} sees keys {np.flatnonzero(r).tolist()}" for i, r in enumerate(rows)
        )
        if all(rows[i].sum() == 3 - tq + i + 1 for i in range(tq)):
            kind = "bottom-right (query_start = Tk - Tq)"
        elif all(rows[i].sum() == i + 1 for i in range(tq)):
            kind = "top-left (query_start = 0)"
        else:
            kind = "other"
        parts.append(f"Tq={tq}, Tk=3: {seen} -> {kind}")
    if explicit:
        q = np.zeros((1, 1, 1, 3), F64)
        k = np.zeros((1, 1, 3, 3), F64)
        out, err = _try(
            lambda: call(q, k, np.eye(3).reshape(1, 1, 3, 3), is_causal=True, query_start=1)
        )
        if err:
            parts.append(f"query_start=1: raised {err}")
        else:
            seen = np.flatnonzero(np.asarray(out)[0, 0, 0] > 0).tolist()
            ok = "honoured" if seen == [0, 1] else "IGNORED"
            parts.append(f"Tq=1, Tk=3, query_start=1: sees keys {seen} -> query_start {ok}")
    return "\n    ".join(parts)


def probe_fully_masked(call) -> str:
    """What a query row with no visible key gives, for a bool and a ``-inf`` float mask:
    an exception, zeros, NaN, or the mean of all values (values [1, 3] -> 2)."""
    q = np.zeros((1, 1, 2, 1), F64)
    k = np.zeros((1, 1, 2, 1), F64)
    v = np.array([1.0, 3.0]).reshape(1, 1, 2, 1)
    hide_row0 = np.array([[False, False], [True, True]])
    results = []
    for kind, mask in (("bool", hide_row0), ("float -inf", np.where(hide_row0, 0.0, -np.inf))):
        out, err = _try(lambda: call(q, k, v, attn_mask=mask))
        if err:
            results.append(f"{kind} mask: raises {err}")
            continue
        row = float(np.asarray(out).ravel()[0])
        meaning = (
            "NaN"
            if np.isnan(row)
            else "zeros"
            if row == 0
            else "mean of ALL values (hidden keys used)"
            if row == 2.0
            else f"{row:g}"
        )
        results.append(f"{kind} mask: row output {row:g} -> {meaning}")
    return "\n    ".join(results)


def probe_gqa(call) -> str:
    """Which K/V head each query head reads: Hq=4, Hkv=2, K/V head g holds the value g."""
    q = np.zeros((1, 4, 1, 1), F64)
    k = np.zeros((1, 2, 1, 1), F64)
    v = np.arange(2.0).reshape(1, 2, 1, 1)
    out, err = _try(lambda: call(q, k, v))
    if err:
        return f"Hq=4, Hkv=2 raised {err}"
    heads = np.asarray(out).ravel().astype(int).tolist()
    meaning = {
        (0, 0, 1, 1): "h // G (grouped; this project's convention)",
        (0, 1, 0, 1): "h % Hkv (tiled)",
    }.get(tuple(heads), "other")
    return f"Hq=4, Hkv=2: K/V head read by query heads 0..3 = {heads} -> {meaning}"


def probe_float16(call, oracle_bound: bool) -> str:
    """Whether float16 is accepted, the output dtype, whether scores of 90000 (> float16's
    65504) overflow, and (``oracle_bound``) the error on random cases in units of the bound."""
    q = np.full((1, 1, 1, 1), 300.0, np.float16)
    k = np.full((1, 1, 2, 1), 300.0, np.float16)
    v = np.array([1.0, 3.0], np.float16).reshape(1, 1, 2, 1)
    out, err = _try(lambda: call(q, k, v))
    if err:
        return f"float16 raised {err}"
    out = np.asarray(out)
    value = float(out.ravel()[0])
    over = (
        "finite mean 2: scores computed in float32"
        if value == 2.0
        else f"{value:g}: scores overflow in float16"
    )
    text = f"accepted, output dtype {out.dtype}; scores 90000 > 65504 -> {over}"
    if oracle_bound:
        text += f"; {_float16_accuracy(call)}"
    return text


def _float16_accuracy(call) -> str:
    """Largest ``|error| / bound`` over 20 seeded random float16 cases (<= 1 passes)."""
    from attnprops import oracle
    from attnprops.properties._support import case_from
    from attnprops.properties.bounds import attention_bounds

    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(20):
        b, hkv, g, tq, tk, d = (int(x) for x in rng.integers(1, [3, 3, 3, 6, 6, 6]))
        q = rng.uniform(-4, 4, (b, hkv * g, tq, d)).astype(np.float16)
        k = rng.uniform(-4, 4, (b, hkv, tk, d)).astype(np.float16)
        v = rng.uniform(-4, 4, (b, hkv, tk, d)).astype(np.float16)
        case = case_from(q, k, v)
        parts = oracle.attention_parts(q, k, v)
        bound = attention_bounds(case, parts).output
        out = np.asarray(call(q, k, v), dtype=np.float64)
        worst = max(worst, float((np.abs(out - parts.output.value) / bound).max()))
    return f"20 random float16 cases: max |error| / bound = {worst:.3g}"


def probe_invalid(call) -> str:
    """What four invalid calls do: NaN query, head_dim mismatch, integer mask, query_start
    beyond Tk - Tq (raises which exception, or returns NaN/finite values)."""
    q = np.ones((1, 1, 2, 2), F64)
    k = np.ones((1, 1, 3, 2), F64)
    v = np.ones((1, 1, 3, 2), F64)
    nan_q = q.copy()
    nan_q[0, 0, 0, 0] = np.nan
    calls = {
        "NaN in query": lambda: call(nan_q, k, v),
        "head_dim mismatch": lambda: call(q, np.ones((1, 1, 3, 3)), v),
        "integer mask": lambda: call(q, k, v, attn_mask=np.ones((2, 3), np.int64)),
        "query_start=5 > Tk-Tq": lambda: call(q, k, v, is_causal=True, query_start=5),
    }
    lines = []
    for name, fn in calls.items():
        out, err = _try(fn)
        if err:
            lines.append(f"{name}: raises {err}")
        else:
            nan = np.isnan(np.asarray(out, dtype=np.float64)).any()
            lines.append(f"{name}: accepted, returned {'NaN' if nan else 'finite values'}")
    return "\n    ".join(lines)


def probe_window(call) -> str:
    """Which keys ``window=(left, right)`` shows (q = k = 0, value = identity: the output row
    is the weight row): causal ``(2, 0)`` at Tq = Tk = 6 (the offsets convention, this
    project's and FlashAttention's, shows 3 keys: ``p - 2 .. p``; a count that includes the
    query, Hugging Face's, 2), ``(1, 1)`` without causality, and ``(1, 0)`` with Tq=2 < Tk=5
    (bottom-right: query 0 is at position 3)."""
    parts = []
    for tq, tk, window, causal in (
        (6, 6, (2, 0), True),
        (5, 5, (1, 1), False),
        (2, 5, (1, 0), False),
    ):
        q = np.zeros((1, 1, tq, 3), F64)
        k = np.zeros((1, 1, tk, 3), F64)
        v = np.eye(tk).reshape(1, 1, tk, tk)
        out, err = _try(lambda: call(q, k, v, is_causal=causal, window=window))
        label = f"window={window}{', causal' if causal else ''}, Tq={tq}, Tk={tk}"
        if err:
            parts.append(f"{label}: raised {err}")
            continue
        rows = np.asarray(out)[0, 0] > 0
        seen = "; ".join(
            f"query {i} sees {np.flatnonzero(r).tolist()}"
            for i, r in enumerate(rows)
            if i in (0, tq - 1)
        )
        parts.append(f"{label}: {seen}")
    return "\n    ".join(parts)


def load(name: str):
    """The caller and description for ``name`` (a module, a properties.subjects name, or
    ``torch``/``jax`` for the raw libraries)."""
    if name == "torch":
        call = _torch_caller()
        return call, call.version, False
    if name == "jax":
        call = _jax_caller()
        return call, call.version, False
    try:
        module = importlib.import_module(f"attnprops.properties.subjects.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"attnprops.properties.subjects.{name}":
            raise
        module = importlib.import_module(name)
    return (
        _subject_caller(module),
        f"subject {module.__name__} {getattr(module, '__version__', '')}",
        True,
    )


def report(name: str) -> str:
    """The probe report for one subject (several lines)."""
    call, description, is_subject = load(name)
    lines = [f"== {name}: {description}"]
    for label, text in (
        ("mask polarity", probe_mask_polarity(call)),
        ("causal alignment", probe_causal_alignment(call, explicit=is_subject)),
        ("fully masked row", probe_fully_masked(call)),
        ("GQA mapping", probe_gqa(call)),
        ("local window", probe_window(call)),
        ("float16", probe_float16(call, oracle_bound=True)),
        ("invalid inputs", probe_invalid(call)),
    ):
        lines.append(f"  {label}:\n    {text}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print :func:`report` for each subject named on the command line."""
    parser = argparse.ArgumentParser(
        prog="python -m attnprops.properties.subjects.probe", description=__doc__.splitlines()[0]
    )
    parser.add_argument("subjects", nargs="+", metavar="SUBJECT")
    args = parser.parse_args(argv)
    for name in args.subjects:
        print(report(name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
