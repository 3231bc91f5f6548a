"""The keyword options of one attention call: their names, defaults and meanings, here only.

Every attention function of the project (the oracle, the ball reference, impl, the subjects'
adapters) takes the same ten keyword options; :func:`takes_options` gives a function written
``f(query, key, ..., **options)`` their signature, so it is written nowhere else.

Shapes as in :mod:`oracle.rules` (``query (B, Hq, Tq, D)``, ``key (B, Hkv, Tk, D)``; 2-D
inputs drop ``B`` and the heads). ``p = query_start + i`` is the absolute position of local
query ``i``.

``attn_mask``
    None; bool broadcastable to ``(B, Hq, Tq, Tk)``, True = may attend; or float of the same
    shapes added to the scaled scores (finite or ``-inf``).
``is_causal``
    key ``j`` visible to local query ``i`` iff ``j <= query_start + i`` (a bool).
``query_start``
    the absolute position of the first query, an int in ``[0, Tk - Tq]``; None: ``Tk - Tq``
    (the queries are the last ``Tq`` positions; PyTorch's ``is_causal`` is ``0``).
``scale``
    a finite float > 0 multiplying ``query @ key^T``; None: ``1/sqrt(D)``.
``window``
    local (sliding-window) attention ``(left, right)``: the query at ``p`` sees keys ``p - left
    ..= p + right`` (either side None = unbounded); None: no window. FlashAttention's
    ``window_size`` and JAX's ``local_window_size`` are the same pair; Hugging Face's
    ``sliding_window=W`` is ``(W - 1, 0)`` (:func:`oracle.rules.check_window`).
``segment_ids``
    packed documents, ``(query_segments, key_segments)`` of shapes ``(B, Tq)`` and ``(B, Tk)``
    (or ``(Tq,)``, ``(Tk,)``): a query sees only keys of its own document (FlashAttention's
    ``cu_seqlens``, FlexAttention's document masks; :mod:`oracle.rules.packing`); None: one
    document.
``chunk_size``
    chunked attention (Llama 4): the query at ``p`` sees only keys ``j`` with ``p //
    chunk_size == j // chunk_size``; None: no chunks.
``alibi_slopes``
    ALiBi, ``(Hq,)`` or ``(B, Hq)`` floats: ``-slope * |p - j|`` is added to the scaled scores
    (FlashAttention's ``alibi_slopes``; :mod:`oracle.rules.alibi`); None: no ALiBi.
``softcap``
    ``c > 0``: the scaled scores become ``c * tanh(s / c)`` before the mask and the biases
    (Gemma 2, FlashAttention's ``softcap``; :mod:`oracle.rules.softcap`); None: no cap.
``sinks``
    ``(Hq,)`` float logits, finite or ``-inf``: one per query head, in every row's softmax
    denominator, with no value (gpt-oss; :mod:`oracle.rules.sinks`): rows then sum to
    ``sigmoid(lse - sigma_h)``; a row that sees no key is allowed when its head's sink is
    finite, and its weights are 0. None: no sinks.

Visibility is the AND of the mask, causality, the window, the documents and the chunks.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from types import MappingProxyType
from typing import TypeVar

__all__ = ["CACHED_OPTIONS", "OPTIONS", "SERVING_OPTIONS", "takes_options"]

OPTIONS = MappingProxyType(
    {
        "attn_mask": None,
        "is_causal": False,
        "query_start": None,
        "scale": None,
        "window": None,
        "segment_ids": None,
        "chunk_size": None,
        "alibi_slopes": None,
        "softcap": None,
        "sinks": None,
    }
)

# The options of the two cached calls (each decides the rest itself):
# ``cached_attention(query, key, value, cache, ...)`` is causal at the cache's length, so it
# takes no is_causal or query_start; documents, chunks, ALiBi and caps are not served there.
CACHED_OPTIONS = ("attn_mask", "scale", "window", "sinks")
# ``attention_with_kvcache(query, key_cache, value_cache, cache_seqlens, ...)`` places each
# sequence's queries at its own length, hides keys by the lengths (no mask, no query_start)
# and takes no packed documents (one sequence per batch row: FlashAttention's convention).
SERVING_OPTIONS = ("is_causal", "scale", "window", "chunk_size", "alibi_slopes", "softcap", "sinks")

F = TypeVar("F", bound=Callable)


def takes_options(
    function: F | None = None, *, without: tuple[str, ...] = (), only: tuple[str, ...] = ()
):
    """Decorate ``function(..., **options)`` to take exactly the keyword options of
    :data:`OPTIONS` (less those named in ``without``: a subject that has no such feature; or
    only those named in ``only``, e.g. :data:`CACHED_OPTIONS`) besides its own parameters;
    use as ``@takes_options``, ``@takes_options(without=...)`` or ``@takes_options(only=...)``.

    The decorated function's signature (``inspect.signature``, ``help``) lists the options as
    keyword-only parameters with their defaults, before the function's own keyword-only ones;
    a keyword that is neither raises ``TypeError`` naming the function, as Python does; and
    ``options`` arrives complete, every option taken present (its default when not passed),
    so the function reads ``options["scale"]`` and forwards ``**options`` unchanged.

    Raises:
        TypeError at decoration when ``function``'s last parameter is not ``**options``, one
        of its own parameters is named like an option, ``without`` or ``only`` names no
        option, or both are given.
    """
    if function is None:
        return functools.partial(takes_options, without=without, only=only)
    if without and only:
        raise TypeError(f"{function.__qualname__}: give without= or only=, not both")
    if unknown := sorted(set(without) - set(OPTIONS)):
        raise TypeError(f"{function.__qualname__}: without={unknown} names no option")
    if unknown := sorted(set(only) - set(OPTIONS)):
        raise TypeError(f"{function.__qualname__}: only={unknown} names no option")
    taken = {n: d for n, d in OPTIONS.items() if n not in without and (not only or n in only)}
    signature = inspect.signature(function)
    *own, rest = signature.parameters.values()
    if rest.kind is not inspect.Parameter.VAR_KEYWORD or rest.name != "options":
        raise TypeError(f"{function.__qualname__}: the last parameter must be **options")
    if clash := sorted(p.name for p in own if p.name in OPTIONS):
        raise TypeError(f"{function.__qualname__}: parameters {clash} are options")
    kw_only = [p for p in own if p.kind is inspect.Parameter.KEYWORD_ONLY]
    positional = [p for p in own if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    keyword = inspect.Parameter.KEYWORD_ONLY
    listed = [inspect.Parameter(n, keyword, default=d) for n, d in taken.items()]
    own_keywords = frozenset(p.name for p in own if p.kind is not inspect.Parameter.POSITIONAL_ONLY)

    @functools.wraps(function)
    def with_options(*args, **kwargs):
        options = dict(taken)
        for name in list(kwargs):
            if name in taken:
                options[name] = kwargs.pop(name)
            elif name not in own_keywords:
                raise TypeError(
                    f"{function.__qualname__}() got an unexpected keyword argument {name!r}"
                )
        return function(*args, **kwargs, **options)

    with_options.__signature__ = signature.replace(parameters=positional + listed + kw_only)
    return with_options
