"""Subject selection: which attention module the properties test, and what it declares.

A *subject* is any importable module exposing ``attention(query, key, value, *, attn_mask,
is_causal, query_start, scale)`` and optionally ``attention_weights``, ``KVCache``,
``cached_attention`` and ``kv_cache_bytes`` with :mod:`impl`'s signatures and shape
conventions (query ``(B, Hq, Tq, D)``, key ``(B, Hkv, Tk, D)``, value ``(B, Hkv, Tk, Dv)``).
The keywords of the features a subject declares below (``window``, ``segment_ids``,
``chunk_size``, ``alibi_slopes``, ``softcap``, ``sinks``) are passed only to subjects that
declare them,
and only in calls that use them.

It is chosen by ``pytest --attn-impl MODULE`` or the environment variable ``ATTN_IMPL``
(default ``impl``). A subject declares what it does not support, and which convention it
follows where real libraries differ, in a module-level dict ``ATTNPROPS_CAPABILITIES``; every
key is optional and an unknown key is an error (a typo must not silently pass):

``dtypes``             tuple of dtype names it supports, of ``float16``, ``bfloat16``
                       (``ml_dtypes``' NumPy dtype, :mod:`oracle.rules.dtypes`), ``float32``
                       and ``float64``; default ``("float16", "float32", "float64")``:
                       bfloat16 is tested only where declared
``validates_inputs``   raises ``ValueError``/``TypeError`` on invalid input; default True.
                       False skips the rejection properties; a failed append or
                       ``cached_attention`` may then raise anything (or be accepted),
                       but when it raises the cache must still be as before
``fully_masked_rows``  ``"raise"`` (this project's rule) or ``"zeros"`` (PyTorch >= 2.5,
                       FlashAttention); default ``"raise"``
``weights``            exposes ``attention_weights``; default: whether the module has it
``kv_cache``           exposes ``KVCache``/``cached_attention``; default: whether it has them
                       (the instance's attributes the properties read:
                       docs/use-in-your-codebase.md, its first code block)
``kv_cache_bytes``     exposes ``kv_cache_bytes``; default: whether it has it
``ragged_cache``       exposes ``attention_with_kvcache(query, key_cache, value_cache,
                       cache_seqlens, *, block_table=None, is_causal=False, ...)``: one length
                       per sequence over contiguous storage (:mod:`oracle.rules.serving`);
                       default: whether it has it
``paged_cache``        ``attention_with_kvcache`` also takes a page pool and a ``block_table``,
                       the module exposes ``PagedKVCache``, and ``cached_attention(query, key,
                       value, cache, seqs=ids)`` appends to and attends through one; default:
                       whether it has both
``rolling_cache``      exposes ``RollingKVCache(batch, num_kv_heads, head_dim, value_dim, *,
                       capacity, dtype)`` that ``cached_attention`` takes with a window; default:
                       whether it has it and ``cached_attention``
``quantized_cache``    exposes ``QuantizedKVCache(batch, num_kv_heads, head_dim, value_dim, *,
                       dtype, storage, key_scale, value_scale)``: fp8 codes (``key_codes``,
                       ``value_codes``) with per-tensor or per-head float32 scales, read back
                       dequantized (``keys``, ``values``), that ``cached_attention`` takes
                       (:mod:`oracle.rules.quantization`); default: whether it has it and
                       ``cached_attention``
``two_d_inputs``       accepts 2-D ``(T, D)`` inputs; default True
``float_masks``        accepts float additive masks; default True
``block_size``         ``attention`` takes a ``block_size=`` keyword (blocked online softmax);
                       default False
``compute_dtypes``     dict: input dtype name -> the dtype it computes in (products, sums,
                       ``exp``, division), e.g. ``{"float16": "float32"}`` (impl, PyTorch's CPU
                       kernels, FlashAttention); never less precise than the input. Default
                       ``{}``: each dtype computes in itself, and the error bounds charge its
                       unit roundoff to every operation (sound for any subject, but at
                       float16 and a few hundred keys they demand next to nothing)
``window``             local (sliding-window) attention and its convention: ``None`` (default:
                       not supported; the window properties skip), ``"offsets"`` (called with
                       ``window=(left, right)``: the query at position ``p`` sees keys
                       ``p - left ..= p + right``, either side None = unbounded; impl,
                       FlashAttention's ``window_size``, JAX's ``local_window_size``,
                       xFormers' ``LocalAttentionFromBottomRightMask``) or ``"sliding_window"``
                       (called with ``sliding_window=W``: causal, ``W`` keys counting the
                       query's own, i.e. ``(W - 1, 0)``; Hugging Face, Mistral). The suite
                       draws windows in its own convention and passes them in the declared one
                       (:meth:`Subject.call_kwargs`), so a subject one key off fails.
``segment_ids``        takes ``segment_ids=(query_segments, key_segments)``, packed documents:
                       a query sees only keys of its own document (:mod:`oracle.rules.packing`;
                       FlexAttention's document masks, FlashAttention's ``cu_seqlens`` through
                       an adapter); default False
``chunk_size``         takes ``chunk_size=C``, chunked attention (Llama 4): the query at ``p``
                       sees only keys ``j`` with ``p // C == j // C``; default False
``alibi``              takes ``alibi_slopes`` (``(Hq,)`` or ``(B, Hq)``): ``-slope * |p - j|``
                       added to the scores (FlashAttention's ``alibi_slopes``;
                       :mod:`oracle.rules.alibi`); default False
``softcap``            takes ``softcap=c``: the scaled scores become ``c * tanh(s / c)`` before
                       the mask and the biases (Gemma 2, FlashAttention's ``softcap``;
                       :mod:`oracle.rules.softcap`); default False
``sinks``              takes ``sinks`` (``(Hq,)``, finite or ``-inf``): one logit per query head
                       in every row's softmax denominator, with no value; a row that sees no
                       key but has a finite sink gives 0 (gpt-oss; :mod:`oracle.rules.sinks`);
                       default False
``lse``                ``attention`` takes ``return_lse=True`` and returns ``(output, lse)``,
                       ``lse`` ``(B, Hq, Tq)``: ``log sum_j exp(s_j)`` over each row's
                       visible keys, the sink not counted, ``-inf`` for a row that sees no
                       key (FlashAttention's ``softmax_lse``, FlexAttention's
                       ``return_lse``); default False
``accumulate_dtypes``  dict: input dtype name -> the dtype the weighted sum ``P @ V``
                       accumulates in, where it differs from the compute dtype (a bfloat16
                       GEMM with a bfloat16 accumulator: ``{"bfloat16": "bfloat16"}``); never
                       less precise than the input. Default ``{}``: the compute dtype
``parameter_dtypes``   dict: input dtype name -> the dtype the call's float parameters are
                       rounded to (the scale, whose square root is taken there too, and the
                       soft cap), where that is less precise than the compute dtype (the ONNX
                       ``Attention`` op: FLOAT attributes, ``Sqrt`` in float, so
                       ``{"float64": "float32"}``); the scores are then charged those
                       roundings (:mod:`properties.bounds`, item 1). Default ``{}``: the
                       parameters in the compute dtype
``rounds_weights``     the unnormalised weights ``exp(s - m)`` are rounded to the input dtype
                       before the weighted sum of the values (FlashAttention's ``P``, PyTorch's
                       CPU flash kernel for float16); default False
``exp2``               the softmax's exponentials are ``exp2`` of the scores times one constant
                       ``scale * log2 e`` rounded to the compute dtype, the running-max
                       rescales too, ``exp2`` within 2 ulps (FlashAttention's
                       ``softmax_scale_log2``, xFormers' memory-efficient kernel: SDPA's CUDA
                       kernels); the bounds charge its roundings (:mod:`properties.bounds`,
                       item 2: ``u |s_m|`` per weight, which ``exp`` does not owe); default False

Arithmetic conventions differ: FlashAttention (Dao et al. 2022) accumulates both products in
float32 and rounds ``P`` to float16/bfloat16 for the second (``compute_dtypes`` float32,
``rounds_weights``); PyTorch's CPU kernels do the same (``torch_sdpa`` declares it); Hugging
Face's eager attention computes the scores in the input dtype, the softmax in float32, and
casts the weights back before ``P @ V`` (declare no ``compute_dtypes`` for float16 there: it
stores the scores in float16); JAX's ``dot_product_attention`` computes float16 and bfloat16 in float32
and rounds the normalised weights to the input dtype before ``P @ V`` (the JAX adapter
declares ``compute_dtypes`` float32 and ``rounds_weights``, measured on XLA's CPU path). A subject that declares more precision
than it has fails the value properties at kernel sizes, as the mutant
``float16_scores_accumulated_in_float16`` does.

Properties that need a capability the subject lacks are reported as skipped with the reason.
"""

from __future__ import annotations

import os
import sys
import traceback
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from attnprops.properties import DEFAULT_DTYPES  # re-exported: the names' home is the package
from attnprops.properties import DEFAULT_SUBJECT  # re-exported: the names' home is the package
from attnprops.properties import ENV_VAR  # re-exported: the names' home is the package
from attnprops.properties.arithmetic import Arithmetic
from attnprops.properties.subject_dtypes import dtype_names
from attnprops.properties.subject_dtypes import dtype_pairs
from attnprops.properties.subject_import import EXTRAS
from attnprops.properties.subject_import import SubjectError
from attnprops.properties.subject_import import import_subject_module
from attnprops.properties.subject_import import install_hint

_DEFAULTS = {
    "dtypes": DEFAULT_DTYPES,
    "validates_inputs": True,
    "fully_masked_rows": "raise",
    "weights": None,
    "kv_cache": None,
    "kv_cache_bytes": None,
    "ragged_cache": None,
    "paged_cache": None,
    "rolling_cache": None,
    "quantized_cache": None,
    "two_d_inputs": True,
    "float_masks": True,
    "block_size": False,
    "compute_dtypes": {},
    "accumulate_dtypes": {},
    "parameter_dtypes": {},
    "rounds_weights": False,
    "exp2": False,
    "window": None,
    "segment_ids": False,
    "chunk_size": False,
    "alibi": False,
    "softcap": False,
    "sinks": False,
    "lse": False,
}
WINDOW_CONVENTIONS = ("offsets", "sliding_window")


@dataclass(frozen=True)
class Capabilities:
    """What a subject declares in ``ATTNPROPS_CAPABILITIES`` (the keys of the module doc),
    validated, the defaults filled in. ``weights``, ``kv_cache``, ``kv_cache_bytes``,
    ``ragged_cache``, ``paged_cache``, ``rolling_cache``, ``quantized_cache`` and ``block_size``
    say whether the subject *has* ``attention_weights``, a KV cache, ``kv_cache_bytes``,
    ``attention_with_kvcache``, a ``PagedKVCache``, a ``RollingKVCache``, a
    ``QuantizedKVCache`` and a ``block_size=`` keyword (flags, not the things themselves);
    ``compute_dtypes`` is sorted ``(input, compute)`` pairs of dtype names."""

    dtypes: tuple[str, ...] = DEFAULT_DTYPES
    validates_inputs: bool = True
    fully_masked_rows: str = "raise"
    weights: bool = False
    kv_cache: bool = False
    kv_cache_bytes: bool = False
    ragged_cache: bool = False
    paged_cache: bool = False
    rolling_cache: bool = False
    quantized_cache: bool = False
    two_d_inputs: bool = True
    float_masks: bool = True
    block_size: bool = False
    compute_dtypes: tuple[tuple[str, str], ...] = ()
    accumulate_dtypes: tuple[tuple[str, str], ...] = ()
    parameter_dtypes: tuple[tuple[str, str], ...] = ()
    rounds_weights: bool = False
    exp2: bool = False
    window: str | None = None
    segment_ids: bool = False
    chunk_size: bool = False
    alibi: bool = False
    softcap: bool = False
    sinks: bool = False
    lse: bool = False


@dataclass(frozen=True, repr=False)
class Subject:
    """A loaded subject module and its declared :class:`Capabilities`."""

    name: str
    module: ModuleType
    capabilities: Capabilities

    def __repr__(self) -> str:  # short: it appears in every falsifying example
        return f"Subject({self.name!r})"

    def _repr_pretty_(self, printer, cycle) -> None:  # Hypothesis's pretty printer
        printer.text(repr(self))

    @property
    def version(self) -> str:
        return str(getattr(self.module, "__version__", "unknown"))

    def describe(self) -> str:
        caps = ", ".join(f"{k}={getattr(self.capabilities, k)!r}" for k in _DEFAULTS)
        return f"{self.name} {self.version} ({caps})"

    def supports(self, dtype) -> bool:
        return np.dtype(dtype).name in self.capabilities.dtypes

    def arithmetic(self, dtype) -> Arithmetic:
        """How the subject computes inputs of ``dtype`` (what the error bounds charge)."""
        storage = np.dtype(dtype)
        compute = dict(self.capabilities.compute_dtypes).get(storage.name, storage.name)
        rounds = self.capabilities.rounds_weights and np.dtype(compute) != storage
        accumulate = dict(self.capabilities.accumulate_dtypes).get(storage.name)
        accumulate = None if accumulate is None else np.dtype(accumulate)
        parameters = dict(self.capabilities.parameter_dtypes).get(storage.name)
        parameters = None if parameters is None else np.dtype(parameters)
        exp2 = self.capabilities.exp2
        return Arithmetic(storage, np.dtype(compute), rounds, accumulate, parameters, exp2)

    def call_kwargs(self, kwargs: dict) -> dict:
        """The properties' keyword arguments in the subject's declared conventions: a
        ``window=(left, right)`` becomes ``sliding_window=left + 1`` for a subject following
        Hugging Face's (drawn only causal, ``right=None``)."""
        if "window" in kwargs and self.capabilities.window == "sliding_window":
            kwargs = dict(kwargs)
            left, _ = kwargs.pop("window")
            kwargs["sliding_window"] = left + 1
        return kwargs

    # The calls the properties make; kept thin so a traceback points at the subject.
    def attention(self, query, key, value, **kwargs):
        return self.module.attention(query, key, value, **self.call_kwargs(kwargs))

    def attention_weights(self, query, key, **kwargs):
        return self.module.attention_weights(query, key, **self.call_kwargs(kwargs))

    def cached_attention(self, query, key, value, cache, **kwargs):
        return self.module.cached_attention(query, key, value, cache, **self.call_kwargs(kwargs))

    def attention_with_kvcache(self, query, key_cache, value_cache, cache_seqlens, **kwargs):
        return self.module.attention_with_kvcache(
            query, key_cache, value_cache, cache_seqlens, **self.call_kwargs(kwargs)
        )


def load_subject(name: str | None = None) -> Subject:
    """Import the subject ``name`` (default: ``$ATTN_IMPL`` or ``impl``) and read its declaration.

    Raises:
        SubjectError: the module cannot be imported, lacks ``attention``, or its
            ``ATTNPROPS_CAPABILITIES`` has unknown keys or invalid values.
    """
    if name is None:
        name = os.environ.get(ENV_VAR, DEFAULT_SUBJECT)
    if not name.strip():
        raise SubjectError(
            f"the attention subject's name is empty; pass a module with --attn-impl MODULE or "
            f"{ENV_VAR}=MODULE (unset {ENV_VAR} for the default, {DEFAULT_SUBJECT!r})"
        )
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())  # a module in the current folder, as `python -m pytest`
    try:
        module = import_subject_module(name)
    except SubjectError:
        raise
    except Exception as exc:
        where = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
        missing = getattr(exc, "name", None) or ""
        if isinstance(exc, ModuleNotFoundError) and (
            missing == name or name.startswith(missing + ".")
        ):
            where = ""  # the subject itself is not there: its traceback is attnprops' own frames
        library = missing.split(".")[0]
        if isinstance(exc, ModuleNotFoundError) and library in EXTRAS:
            where = install_hint(library) + "\n" + where
        raise SubjectError(
            f"cannot import the attention subject {name!r} ({type(exc).__name__}: {exc}). "
            f"Name an importable module (--impl MODULE for attnprops, --attn-impl MODULE or "
            f"{ENV_VAR}=MODULE for pytest; a module in the current folder, or on PYTHONPATH, "
            f"imports) or a file (--impl ./my_attention.py).\n{where}"
        ) from exc
    if not callable(getattr(module, "attention", None)):
        raise SubjectError(f"subject {name!r} has no callable 'attention'")
    declared = dict(getattr(module, "ATTNPROPS_CAPABILITIES", {}))
    unknown = sorted(set(declared) - set(_DEFAULTS))
    if unknown:
        raise SubjectError(
            f"subject {name!r}: unknown keys in ATTNPROPS_CAPABILITIES: {unknown}; "
            f"known keys are {sorted(_DEFAULTS)}"
        )
    caps = {**_DEFAULTS, **declared}
    if caps["weights"] is None:
        caps["weights"] = callable(getattr(module, "attention_weights", None))
    if caps["kv_cache"] is None:
        caps["kv_cache"] = hasattr(module, "KVCache") and hasattr(module, "cached_attention")
    if caps["kv_cache_bytes"] is None:
        caps["kv_cache_bytes"] = callable(getattr(module, "kv_cache_bytes", None))
    if caps["ragged_cache"] is None:
        caps["ragged_cache"] = callable(getattr(module, "attention_with_kvcache", None))
    if caps["paged_cache"] is None:
        caps["paged_cache"] = caps["ragged_cache"] and hasattr(module, "PagedKVCache")
    if caps["rolling_cache"] is None:
        caps["rolling_cache"] = caps["kv_cache"] and hasattr(module, "RollingKVCache")
    if caps["quantized_cache"] is None:
        caps["quantized_cache"] = caps["kv_cache"] and hasattr(module, "QuantizedKVCache")
    dtypes = dtype_names(name, caps["dtypes"])
    if caps["fully_masked_rows"] not in ("raise", "zeros"):
        raise SubjectError(
            f"subject {name!r}: fully_masked_rows={caps['fully_masked_rows']!r} must be "
            "'raise' or 'zeros'"
        )
    compute_dtypes = dtype_pairs(name, "compute_dtypes", caps["compute_dtypes"])
    accumulate_dtypes = dtype_pairs(name, "accumulate_dtypes", caps["accumulate_dtypes"])
    parameter_dtypes = dtype_pairs(name, "parameter_dtypes", caps["parameter_dtypes"], False)
    for key, pairs in (
        ("compute_dtypes", compute_dtypes),
        ("accumulate_dtypes", accumulate_dtypes),
        ("parameter_dtypes", parameter_dtypes),
    ):
        undeclared = sorted({given for given, _ in pairs} - set(dtypes))
        if undeclared:  # never drawn: a model the suite would never hold the subject to
            raise SubjectError(
                f"subject {name!r}: {key} declares {undeclared}, which dtypes={dtypes} does "
                "not list (add them to dtypes, or drop their entries)"
            )
    if caps["window"] is not None and caps["window"] not in WINDOW_CONVENTIONS:
        raise SubjectError(
            f"subject {name!r}: window={caps['window']!r} must be None (no local window) or "
            f"one of {WINDOW_CONVENTIONS}"
        )
    flags = (
        "rounds_weights",
        "exp2",
        "validates_inputs",
        "two_d_inputs",
        "float_masks",
        "block_size",
    )
    flags += ("ragged_cache", "paged_cache", "rolling_cache", "quantized_cache")
    for key in (*flags, "segment_ids", "chunk_size", "alibi", "softcap", "sinks", "lse"):
        if not isinstance(caps[key], (bool, np.bool_)):
            raise SubjectError(f"subject {name!r}: {key}={caps[key]!r} must be True or False")
    capabilities = Capabilities(
        dtypes=dtypes,
        validates_inputs=bool(caps["validates_inputs"]),
        fully_masked_rows=caps["fully_masked_rows"],
        weights=bool(caps["weights"]),
        kv_cache=bool(caps["kv_cache"]),
        kv_cache_bytes=bool(caps["kv_cache_bytes"]),
        ragged_cache=bool(caps["ragged_cache"]),
        paged_cache=bool(caps["paged_cache"]),
        rolling_cache=bool(caps["rolling_cache"]),
        quantized_cache=bool(caps["quantized_cache"]),
        two_d_inputs=bool(caps["two_d_inputs"]),
        float_masks=bool(caps["float_masks"]),
        block_size=bool(caps["block_size"]),
        compute_dtypes=compute_dtypes,
        accumulate_dtypes=accumulate_dtypes,
        parameter_dtypes=parameter_dtypes,
        rounds_weights=bool(caps["rounds_weights"]),
        exp2=bool(caps["exp2"]),
        window=caps["window"],
        segment_ids=bool(caps["segment_ids"]),
        chunk_size=bool(caps["chunk_size"]),
        alibi=bool(caps["alibi"]),
        softcap=bool(caps["softcap"]),
        sinks=bool(caps["sinks"]),
        lse=bool(caps["lse"]),
    )
    return Subject(name=name, module=module, capabilities=capabilities)
