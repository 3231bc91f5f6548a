"""``attnprops kv-bytes``: raw KV-cache size of a model configuration, in bytes and GiB.

Formula (source lab, seed ``000`` §6; Pope et al. 2022, "Efficiently Scaling Transformer
Inference")::

    bytes = 2 * num_layers * batch * tokens * num_kv_heads * head_dim * bytes_per_element

The 2 counts K and V. It is the raw payload only: no allocator slack, metadata, paging
(PagedAttention changes allocation, not this count) or activations. Computed by
:func:`oracle.kv_cache_bytes` (the rulebook's function, shared with :mod:`impl`).

Defaults are the lab's configuration: 32 layers, batch 1, 10,000 tokens, 32 KV heads, head_dim
128, float16. ``--num-heads HQ`` adds the comparison MHA (``Hkv = HQ``), GQA (the given
``--num-kv-heads`` when ``1 < Hkv < HQ``) and MQA (``Hkv = 1``); the ratio to MHA is
``Hkv / HQ`` (Shazeer 2019; Ainslie et al. 2023).

Sizes must be integers >= 1 and ``--dtype`` one of :data:`oracle.rules.DTYPE_BYTES`; anything
else is an argparse error (exit status 2) naming the argument.
"""

from __future__ import annotations

import argparse

from attnprops.oracle.rules import DTYPE_BYTES

GIB = 2**30
FORMULA = "2 * num_layers * batch * tokens * num_kv_heads * head_dim * bytes_per_element"
DEFAULTS = dict(num_layers=32, batch=1, tokens=10_000, num_kv_heads=32, head_dim=128,
                dtype="float16")


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (a count, not bytes); raises ArgumentTypeError."""
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1 (a size cannot be zero or "
                                         "negative)")
    return value


def kv_dtype(text: str) -> str:
    """argparse type: a dtype name of :data:`oracle.rules.DTYPE_BYTES` (e.g. ``bfloat16``)."""
    name = text.strip().lower()
    aliases = {"fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp32": "float32",
               "float": "float32", "fp64": "float64", "double": "float64"}
    name = aliases.get(name, name)
    if name not in DTYPE_BYTES:
        raise argparse.ArgumentTypeError(
            f"unknown dtype {text!r}; use one of {', '.join(sorted(DTYPE_BYTES))}")
    return name


def add_arguments(parser) -> None:
    """The model configuration; every size defaults to the source lab's (see module doc)."""
    for flag, key, help_text in (
        ("--num-layers", "num_layers", "transformer layers"),
        ("--batch", "batch", "sequences in the batch"),
        ("--tokens", "tokens", "cached tokens per sequence"),
        ("--num-kv-heads", "num_kv_heads", "key/value heads per layer"),
        ("--head-dim", "head_dim", "dimension of one head"),
    ):
        parser.add_argument(flag, type=positive_int, default=DEFAULTS[key], metavar="N",
                            help=f"{help_text} (default {DEFAULTS[key]})")
    parser.add_argument("--dtype", type=kv_dtype, default=DEFAULTS["dtype"], metavar="DTYPE",
                        help=f"element type, one of {', '.join(sorted(DTYPE_BYTES))} "
                             f"(default {DEFAULTS['dtype']})")
    parser.add_argument("--num-heads", type=positive_int, default=None, metavar="N",
                        help="query heads: also print the MHA / GQA / MQA comparison")
    parser.set_defaults(_parser=parser)


def human(nbytes: int) -> str:
    """``nbytes`` in GiB (2**30 bytes; 4 decimals, or 4 significant digits below 0.001 GiB),
    followed below 1 GiB by the size in MiB, KiB or bytes (powers of 1024)."""
    gib = nbytes / GIB
    text = f"{gib:.4f} GiB" if gib >= 1e-3 else f"{gib:.4g} GiB"
    if nbytes >= GIB:
        return text
    for unit, size in (("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= size:
            return f"{text} = {nbytes / size:.2f} {unit}"
    return f"{text} = {nbytes} bytes"


def kv_bytes(args, num_kv_heads: int) -> int:
    """:func:`oracle.kv_cache_bytes` for ``args``'s configuration with ``num_kv_heads``."""
    from attnprops import oracle

    return oracle.kv_cache_bytes(num_layers=args.num_layers, batch=args.batch,
                                 tokens=args.tokens, num_kv_heads=num_kv_heads,
                                 head_dim=args.head_dim, dtype=args.dtype)


def run(args) -> int:
    """Print the bytes, GiB and the formula with the numbers substituted; 0 on success.

    With ``--num-heads`` also a table for MHA, GQA and MQA. An invalid head combination
    (``num_kv_heads > num_heads`` or not dividing it) is an argparse error (exit 2).
    """
    parser = getattr(args, "_parser", None)
    if args.num_heads is not None:
        problem = None
        if args.num_kv_heads > args.num_heads:
            problem = (f"--num-kv-heads {args.num_kv_heads} exceeds --num-heads "
                       f"{args.num_heads}")
        elif args.num_heads % args.num_kv_heads:
            problem = (f"--num-kv-heads {args.num_kv_heads} must divide --num-heads "
                       f"{args.num_heads} (each K/V head serves num_heads / num_kv_heads "
                       "query heads)")
        if problem:
            if parser is not None:
                parser.error(problem)  # exits with status 2
            print(f"attnprops kv-bytes: error: {problem}")
            return 2
    itemsize = DTYPE_BYTES[args.dtype]
    total = kv_bytes(args, args.num_kv_heads)
    print("KV cache, raw K and V payload (no allocator slack, metadata or paging):")
    print(f"  bytes = {FORMULA}")
    print(f"        = 2 * {args.num_layers} * {args.batch} * {args.tokens} * "
          f"{args.num_kv_heads} * {args.head_dim} * {itemsize}   ({args.dtype}: {itemsize} "
          "bytes per element)")
    print(f"        = {total:,} bytes")
    print(f"        = {human(total)}   (1 GiB = 2**30 bytes)")
    if args.num_heads is not None:
        hq = args.num_heads
        rows = [("MHA", hq)]
        if 1 < args.num_kv_heads < hq:
            rows.append(("GQA", args.num_kv_heads))
        if hq > 1:
            rows.append(("MQA", 1))
        print(f"\nWith {hq} query heads (same layers, batch, tokens, head_dim, dtype):")
        print(f"  {'attention':<10}{'kv_heads':>9}{'bytes':>22}{'GiB':>12}{'vs MHA':>9}")
        for label, heads in rows:
            b = kv_bytes(args, heads)
            print(f"  {label:<10}{heads:>9}{b:>22,}{b / GIB:>12.4f}{heads / hq:>9.4g}")
    return 0
