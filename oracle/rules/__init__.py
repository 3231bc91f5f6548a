"""The rulebook: one set of input rules shared by the oracle and every implementation.

Shape legend used throughout the project::

    B   batch                 Hq  query heads (num_heads)     Hkv key/value heads (num_kv_heads)
    Tq  query positions       Tk  key/value positions         D   query/key head_dim
    Dv  value head dim        G = Hq // Hkv (query heads per K/V head)

    query (B, Hq, Tq, D)   key (B, Hkv, Tk, D)   value (B, Hkv, Tk, Dv)
    weights (B, Hq, Tq, Tk)                      output (B, Hq, Tq, Dv)

2-D inputs ``(T, D)`` mean one batch element and one head; results are then 2-D too.

Query head ``h`` reads K/V head ``h // G`` (grouped-query attention, Ainslie et al. 2023;
multi-query attention is ``Hkv == 1``, Shazeer 2019).

Masks
    ``attn_mask`` is ``None``, a bool array (True = this query may attend to this key), or a
    float array added to the scaled scores whose entries are finite or ``-inf``. Either kind
    broadcasts to ``(B, Hq, Tq, Tk)`` (to ``(Tq, Tk)`` for 2-D inputs), NumPy rules.
    Integer masks are rejected: ``1`` could mean "attend" or "add one".

Causality
    With ``is_causal=True`` key ``j`` is visible to local query ``i`` iff
    ``j <= query_start + i``; ``query_start`` is the absolute position of the first query.
    ``query_start=None`` means ``Tk - Tq`` (the queries are the last ``Tq`` positions, the
    KV-cache convention; note PyTorch's ``is_causal`` is top-left aligned, i.e. ``0``).
    An explicit ``query_start`` must be an ``int`` (not ``bool``) in ``[0, Tk - Tq]`` and is
    checked even when ``is_causal`` is False. Causal visibility is AND-ed with the mask.

Fully masked rows
    A query row with no visible key raises :class:`FullyMaskedRowError` (the source lab's rule:
    ``-inf - -inf`` would give NaN). The oracle also implements the ``"zeros"`` convention of
    PyTorch >= 2.5 and FlashAttention as a named parameter.

Every rule violation raises a subclass of :class:`AttentionInputError` (a ``ValueError``) whose
message names the argument and the rule. Nothing is ever modified.

Local windows, packed documents and chunks
    ``window=(left, right)``: the query at absolute position ``p`` sees keys ``p - left ..= p +
    right`` (:func:`check_window`, with FlashAttention's, JAX's, xFormers' and Hugging Face's
    conventions); ``segment_ids``: only keys of the query's own document; ``chunk_size``: only
    keys of the query's own chunk of positions (:mod:`oracle.rules.packing`). All AND-ed
    with the mask and causality.

ALiBi and soft-capping
    ``alibi_slopes``: the query at absolute position ``p`` adds ``-slope * |p - j|`` to its
    score for key ``j``, exactly (:mod:`oracle.rules.alibi`). ``softcap=c``: the scaled
    score ``s`` becomes ``c * tanh(s / c)`` before the mask and the biases
    (:mod:`oracle.rules.softcap`).

Sinks
    ``sinks``: one logit per query head that joins every row's softmax denominator and
    carries no value; a row with no visible key but a finite sink is allowed and gives 0
    (:mod:`oracle.rules.sinks`).

Serving caches
    ``cache_seqlens`` (one length per sequence), page pools addressed by a ``block_table``, and
    the rolling cache of the last ``capacity`` positions (:mod:`oracle.rules.serving`).

Quantized caches
    fp8 codes with one float32 scale per tensor or per K/V head, dequantized on read; values
    out of the fp8 range are rejected, not saturated (:mod:`oracle.rules.quantization`).

The rules live in twelve modules, re-exported here (``from attnprops.oracle.rules import ...``
is the one way to use them): :mod:`oracle.rules.errors`, :mod:`oracle.rules.dtypes` (float16,
bfloat16, float32, float64; fp8 for storage), :mod:`oracle.rules.arguments` (one
argument at a time), :mod:`oracle.rules.options` (the keyword options of a call: names,
defaults and meanings), :mod:`oracle.rules.packing` (documents and chunks),
:mod:`oracle.rules.alibi` (the bias by distance), :mod:`oracle.rules.softcap`,
:mod:`oracle.rules.sinks`,
:mod:`oracle.rules.attention` (a whole call), :mod:`oracle.rules.cache` (the KV cache),
:mod:`oracle.rules.serving` (ragged, paged and rolling caches) and
:mod:`oracle.rules.quantization` (the fp8 cache).
"""

from attnprops.oracle.rules.alibi import *  # noqa: F403
from attnprops.oracle.rules.arguments import *  # noqa: F403
from attnprops.oracle.rules.attention import *  # noqa: F403
from attnprops.oracle.rules.cache import *  # noqa: F403
from attnprops.oracle.rules.dtypes import *  # noqa: F403
from attnprops.oracle.rules.errors import *  # noqa: F403
from attnprops.oracle.rules.options import *  # noqa: F403
from attnprops.oracle.rules.packing import *  # noqa: F403
from attnprops.oracle.rules.quantization import *  # noqa: F403
from attnprops.oracle.rules.serving import *  # noqa: F403
from attnprops.oracle.rules.sinks import *  # noqa: F403
from attnprops.oracle.rules.softcap import *  # noqa: F403
