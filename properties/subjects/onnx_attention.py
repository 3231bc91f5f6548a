"""Subject: the ONNX ``Attention`` operator (opset 25), executed by ONNX's reference evaluator
(``onnx.reference.ReferenceEvaluator``, the specification's executable form).

Install onnx first (``pip install onnx``; from a clone, the extra: ``pip install -e .[onnx]``).
Run: ``attnprops check --impl attnprops.properties.subjects.onnx_attention``. The same models
on onnxruntime's CPU provider: :mod:`properties.subjects.onnxruntime_attention`.

Every call builds (once per signature, then cached) a one-node model with ``onnx.helper`` --
inputs ``Q, K, V`` and, where the call needs them, ``attn_mask``, ``past_key``/``past_value``
and ``nonpad_kv_seqlen`` -- and runs it. What the adapter maps, and the op's conventions where
they differ from this project's (``docs/conventions.md``):

- Layout: the op's 4-D form ``(B, H, T, D)`` is this project's; 2-D ``(T, D)`` inputs become
  ``(1, 1, T, D)``. ``D != Dv`` is native (``v_head_size``). GQA: ``q_num_heads`` a multiple
  of ``kv_num_heads``, each K/V head repeated to its group (``h // G``): the same.
- Mask polarity: a bool ``attn_mask`` is True = take part, a float one is added to the scores
  (the op needs it in the inputs' type ``T``: the adapter casts it to the query's dtype).
  The op's mask broadcasts to ``(B, Hq, Tq, T_total)``, with one exception NumPy does not
  have: a last axis shorter than ``T_total`` is *padded* (False / ``-inf``), not broadcast;
  so the adapter expands a size-1 key axis to ``T_total`` (this project's NumPy meaning).
- Causality and positions: the op's causal mask is ``j <= i + offset`` (bottom-right), where
  ``offset`` is ``past_key``'s length, or ``nonpad_kv_seqlen - Tq`` per batch without a past,
  or 0 with neither; its window (``left_window_size``/``right_window_size``, -1 = unbounded)
  is ``p - left <= j <= p + right`` at ``p = offset + i``: this project's ``window`` over
  absolute positions. With no cache input the offset is 0 (top-left), where this project's
  ``query_start=None`` means ``Tk - Tq``. The adapter says where the queries are the way an
  exported decoder does: when the call is causal or windowed and ``s = query_start``
  (``Tk - Tq`` for None) is positive, the first ``s`` keys and values go in as
  ``past_key``/``past_value`` and the rest as ``K``/``V`` (the op concatenates them back,
  ``present_key``); when ``s < 0`` (``Tq > Tk``, no causality) ``nonpad_kv_seqlen = Tk``
  gives the offset ``Tk - Tq`` and pads nothing.
- ``scale``: a FLOAT (32-bit) attribute, so the scale is rounded to float32 whatever ``T``;
  omitted when None (the op's default ``1/sqrt(head_size)``). The op applies ``sqrt(scale)``,
  computed in float, to ``Q`` and to ``K`` before the product (its function body; the spec's
  overflow advice): declared, ``parameter_dtypes={"float64": "float32"}``, so float64 scores
  are held to that arithmetic (finding N2 says what it costs).
- ``softcap``: the FLOAT attribute ``softcap`` (``c tanh(s / c)`` before the mask), 0 = none:
  rounded to float32 like the scale (declared the same way; a cap below float32's smallest
  subnormal becomes 0, "no cap": finding N2).
- Fully masked rows: zeros (the op's rule; ``fully_masked_rows="zeros"``).
- ``attention_weights``: the fourth output with ``qk_matmul_output_mode=3`` (the
  post-softmax probabilities, zero rows for fully masked ones).
- KV cache: :class:`KVCache` holds NumPy arrays; :func:`cached_attention` passes them as
  ``past_key``/``past_value`` with ``is_causal=1`` and keeps the op's ``present_key``/
  ``present_value`` (the op's own cache update, the "cache inside the operator" use).
- No input validation of its own (``validates_inputs=False``); the cache checks its appends
  with the rulebook (the op has no cache object).

Known deviations: ``onnx_attention.xfail.txt``, explained in ``docs/findings.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper

from attnprops.oracle.rules import check_cache_append
from attnprops.oracle.rules import check_cache_instance
from attnprops.oracle.rules import check_cached_query
from attnprops.oracle.rules import read_only_copy
from attnprops.oracle.rules import takes_options
from attnprops.properties.subjects._concat_cache import ConcatKVCache

__version__ = onnx.__version__

OPSET = 25  # Attention-25: windows and the offset-aware (bottom-right) causal mask
IR_VERSION = 10  # read by onnxruntime 1.20 and later

ATTNPROPS_EXPECTED_FAILURES = "onnx_attention.xfail.txt"

ATTNPROPS_CAPABILITIES = {
    "dtypes": ("float16", "float32", "float64"),
    "validates_inputs": False,
    "fully_masked_rows": "zeros",
    "window": "offsets",  # left_window_size / right_window_size
    "softcap": True,
    # the scale and the cap are FLOAT attributes and the op takes the scale's Sqrt in float:
    # float64 scores are charged those roundings (properties/bounds.py item 1; finding N2)
    "parameter_dtypes": {"float64": "float32"},
}

_INT64_MAX = int(np.iinfo(np.int64).max)
# The options of oracle.rules.options the op serves (the others it has no input for).
OP_OPTIONS = ("attn_mask", "is_causal", "query_start", "scale", "window", "softcap")

Runner = Callable[[dict], list]  # feeds by input name -> the model's outputs, in order


def _tensor(name: str, elem_type: int):
    return helper.make_tensor_value_info(name, elem_type, None)  # any rank and shape


def build_model(signature: tuple) -> onnx.ModelProto:
    """The one-node ``Attention`` model of a call's ``signature`` (see
    :meth:`OnnxAttention.call`): ``(dtype name, mask kind (None, "bool", "float"), past,
    nonpad, outputs ("y", "cache" or "weights"), attributes as sorted (name, value) pairs)``.
    """
    dtype, mask, past, nonpad, outputs, attributes = signature
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    inputs = [_tensor("Q", elem), _tensor("K", elem), _tensor("V", elem)]
    names = ["Q", "K", "V", "", "", "", ""]
    if mask is not None:
        names[3] = "attn_mask"
        inputs.append(_tensor("attn_mask", TensorProto.BOOL if mask == "bool" else elem))
    if past:
        names[4:6] = ["past_key", "past_value"]
        inputs += [_tensor("past_key", elem), _tensor("past_value", elem)]
    if nonpad:
        names[6] = "nonpad_kv_seqlen"
        inputs.append(_tensor("nonpad_kv_seqlen", TensorProto.INT64))
    while names[-1] == "":
        names.pop()
    out_names = {
        "y": ["Y"],
        "cache": ["Y", "present_key", "present_value"],
        "weights": ["Y", "", "", "W"],
    }[outputs]
    node = helper.make_node("Attention", names, out_names, **dict(attributes))
    graph = helper.make_graph(
        [node], "attention", inputs, [_tensor(n, elem) for n in out_names if n]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    return model


def reference_runner(model: onnx.ModelProto) -> Runner:
    """``onnx.reference.ReferenceEvaluator`` on ``model``."""
    from onnx.reference import ReferenceEvaluator

    return partial(ReferenceEvaluator(model).run, None)


def _four_d(x: np.ndarray) -> np.ndarray:
    return x.reshape((1,) * (4 - x.ndim) + x.shape)


class OnnxAttention:
    """Calls of the ``Attention`` op through ``make_runner`` (model -> :data:`Runner`), one
    runner per call signature, built on first use."""

    def __init__(self, make_runner: Callable[[onnx.ModelProto], Runner]):
        self._make_runner = make_runner
        self._runners: dict[tuple, Runner] = {}

    @takes_options(only=OP_OPTIONS)
    def call(self, query, key, value, *, past=None, outputs="y", **options) -> list:
        """Run the op on 4-D ``query`` ``(B, Hq, Tq, D)``, ``key`` ``(B, Hkv, Tk, D)``,
        ``value`` ``(B, Hkv, Tk, Dv)`` (NumPy, one float dtype). ``past``: ``(past_key,
        past_value)`` passed as the op's cache (then ``query_start`` is ignored: the offset is
        the past's length). Returns the outputs ``outputs`` names (``"y"``: ``[Y]``,
        ``"cache"``: ``[Y, present_key, present_value]``, ``"weights"``: ``[Y, W]``)."""
        attn_mask, is_causal, scale, window, softcap = (
            options[name] for name in ("attn_mask", "is_causal", "scale", "window", "softcap")
        )
        dtype = query.dtype
        feeds = {"Q": query, "K": key, "V": value}
        attributes = {"is_causal": int(bool(is_causal))}
        if scale is not None:
            attributes["scale"] = float(scale)
        if softcap is not None:
            attributes["softcap"] = float(softcap)
        if window is not None:  # -1: unbounded; a side past int64 reaches every key too
            left, right = (-1 if n is None or n > _INT64_MAX else int(n) for n in window)
            attributes["left_window_size"], attributes["right_window_size"] = left, right
        if outputs == "weights":
            attributes["qk_matmul_output_mode"] = 3
        mask_kind = None
        if attn_mask is not None:
            mask = _four_d(np.asarray(attn_mask))
            total = key.shape[2] + (0 if past is None else past[0].shape[2])
            if mask.shape[3] == 1 < total:  # NumPy broadcasts a size-1 key axis; the op pads
                mask = np.broadcast_to(mask, mask.shape[:3] + (total,))
            mask_kind = "bool" if mask.dtype == np.bool_ else "float"
            feeds["attn_mask"] = mask if mask_kind == "bool" else mask.astype(dtype)
        nonpad = False
        if past is None and (is_causal or window is not None):
            Tq, Tk = query.shape[2], key.shape[2]
            start = Tk - Tq if options["query_start"] is None else int(options["query_start"])
            if start > 0:
                past = key[:, :, :start], value[:, :, :start]
                feeds["K"], feeds["V"] = key[:, :, start:], value[:, :, start:]
            elif start < 0:  # Tq > Tk: the offset Tk - Tq, no key padded
                nonpad = True
                feeds["nonpad_kv_seqlen"] = np.full(query.shape[0], Tk, np.int64)
        if past is not None:
            feeds["past_key"], feeds["past_value"] = past
        signature = (
            dtype.name,
            mask_kind,
            past is not None,
            nonpad,
            outputs,
            tuple(sorted(attributes.items())),
        )
        runner = self._runners.get(signature)
        if runner is None:
            runner = self._runners[signature] = self._make_runner(build_model(signature))
        results = runner({name: np.ascontiguousarray(x) for name, x in feeds.items()})
        return [np.array(r) for r in results]  # writable copies

    @takes_options(only=OP_OPTIONS)
    def attention(self, query, key, value, **options) -> np.ndarray:
        """Scaled dot-product attention through the ``Attention`` op.

        Args:
            query: ``(B, Hq, Tq, D)`` or ``(Tq, D)``, float16/32/64.
            key: ``(B, Hkv, Tk, D)`` or ``(Tk, D)``; value: ``(B, Hkv, Tk, Dv)`` or
                ``(Tk, Dv)``; the query's dtype.
            attn_mask, is_causal, query_start, scale, window, softcap: the keyword options
                of :mod:`oracle.rules.options` that the op serves; ``query_start`` is passed
                as the length of ``past_key`` (module docstring), ``scale`` rounded to
                float32 (the attribute's type).

        Returns:
            ``(B, Hq, Tq, Dv)`` (or ``(Tq, Dv)``), the query's dtype; zero rows where no key
            is visible.

        Raises:
            Whatever the runtime raises for inputs it cannot take; no validation of its own.
        """
        query, key, value = np.asarray(query), np.asarray(key), np.asarray(value)
        two_d = query.ndim == 2
        (out,) = self.call(
            _four_d(query),
            _four_d(key),
            _four_d(value),
            **options,
        )
        return out[0, 0] if two_d else out

    def attention_weights(self, query, key, **options) -> np.ndarray:
        """Weights ``(B, Hq, Tq, Tk)`` (or ``(Tq, Tk)``): the op's fourth output in
        ``qk_matmul_output_mode=3`` (post-softmax probabilities), with a value of zeros
        ``(B, Hkv, Tk, 1)``. Arguments, dtype and errors as :meth:`attention`."""
        query, key = np.asarray(query), np.asarray(key)
        two_d = query.ndim == 2
        q, k = _four_d(query), _four_d(key)
        value = np.zeros(k.shape[:3] + (1,), k.dtype)
        _, weights = self.call(q, k, value, outputs="weights", **options)
        return weights[0, 0] if two_d else weights

    def cached_attention(
        self, query, key, value, cache: KVCache, *, attn_mask=None, scale=None, window=None
    ) -> np.ndarray:
        """Append ``key``/``value`` to ``cache`` through the op: its ``past_key``/
        ``past_value`` are the cache, ``is_causal=1``, and its ``present_key``/
        ``present_value`` become the cache.

        Args:
            query: ``(B, Hq, Tnew, D)``, one query per appended token.
            key: ``(B, Hkv, Tnew, D)``; value: ``(B, Hkv, Tnew, Dv)``; the cache's dtype.
            cache: a :class:`KVCache` (modified in place).
            attn_mask: ``None`` or a mask broadcastable to ``(B, Hq, Tnew, T_total)``.
            scale, window: as :meth:`attention`.

        Returns:
            ``(B, Hq, Tnew, Dv)``: query ``i`` sees positions ``0 .. start + i``, ``start``
            the cache length before the call (the op's offset, the past's length).

        Raises:
            oracle.rules.AttentionInputError (a ValueError) for a query whose length differs
            from the new keys', or an append the rulebook refuses; whatever the runtime
            raises. The cache is then exactly as before.
        """
        query = np.asarray(query)
        check_cache_instance(cache, KVCache)  # another object has no past to pass
        check_cached_query(query, key, cache)
        key, value = check_cache_append(cache, key, value)  # the op has no cache rules
        past = (cache._keys, cache._values) if len(cache) else None
        out, keys, values = self.call(
            query,
            key,
            value,
            attn_mask=attn_mask,
            is_causal=True,
            scale=scale,
            window=window,
            past=past,
            outputs="cache",
        )
        cache._keys, cache._values = (
            read_only_copy(keys),
            read_only_copy(values),
        )  # both, after the op ran
        return out


class KVCache(ConcatKVCache):
    """A per-layer K/V cache of NumPy arrays ``(B, Hkv, T, D)`` / ``(B, Hkv, T, Dv)``, the
    op's ``past_key``/``past_value``
    (:class:`~properties.subjects._concat_cache.ConcatKVCache`: sizes, rules, ``append``).

    dtype: float16, float32 or float64. ``keys``/``values`` are read-only (views of
    immutable bytes); ``append`` stores copies.
    """

    def _empty(self, shape):
        return read_only_copy(np.zeros(shape, self.dtype))

    def _concat(self, past, new):
        return read_only_copy(np.concatenate([past, new], axis=2))

    def _view(self, x):
        return x


_OP = OnnxAttention(reference_runner)
attention = _OP.attention
attention_weights = _OP.attention_weights
cached_attention = _OP.cached_attention
