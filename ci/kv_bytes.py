"""``attnprops kv-bytes``: raw KV-cache size of a model configuration, in bytes and GiB.

Formula (source lab, seed ``000`` §6; Pope et al. 2022, "Efficiently Scaling Transformer
Inference")::

    bytes = 2 * num_layers * batch * tokens * num_kv_heads * head_dim * bytes_per_element

The 2 counts K and V. It is the raw payload only: no allocator slack, metadata or
activations. Computed by :func:`oracle.kv_cache_bytes` (the rulebook's function, shared with
:mod:`impl`).

Serving layouts (:mod:`oracle.rules.serving`): ``--page-size S`` adds the bytes a paged cache
allocates, each sequence's positions rounded up to whole pages (``ceil(tokens / S) * S``), and
the unused rest of the last pages; ``--seqlens L1,L2,...`` gives one length per sequence
(instead of ``--batch`` sequences of ``--tokens``) and prints used and allocated bytes per
sequence and in total (:func:`oracle.rules.paged_kv_cache_bytes`); ``--rolling-capacity W``
adds a rolling cache of ``W`` positions, which holds ``min(tokens, W)`` whatever the length.
The MHA / GQA / MQA table gets a column for each layout asked for.

Defaults are the lab's configuration, :data:`oracle.lab.KV_CONFIG` (``--help`` prints them). ``--num-heads HQ`` adds the comparison MHA (``Hkv = HQ``), GQA (the given
``--num-kv-heads`` when ``1 < Hkv < HQ``) and MQA (``Hkv = 1``); the ratio to MHA is
``Hkv / HQ`` (Shazeer 2019; Ainslie et al. 2023).

Sizes must be integers >= 1. ``--dtype`` takes the canonical names of
:data:`oracle.rules.DTYPE_BYTES` (``float16``, ``bfloat16``, ``float32``, ``float64``, ``int8``,
``float8_e4m3fn``, ``float8_e5m2``: how ``torch``, ``jax.numpy`` and ``ml_dtypes`` spell them)
plus the documented aliases of :data:`DTYPE_ALIASES`, case-insensitively: ``fp16``/``half``,
``bf16``, ``fp32``, ``fp64``/``double``. Decision: the ``fp16``/``bf16`` spellings are what
training configs use (Hugging Face Accelerate's ``mixed_precision``, DeepSpeed, Megatron) and
``half``/``double`` are torch's own aliases (``torch.half is torch.float16``), so a PyTorch or
JAX user expects them to work; they are listed in ``--help`` and in the error. ``float`` is
deliberately *not* an alias: it is float32 in PyTorch (``torch.float``) but float64 in NumPy and
Python, so it is rejected rather than guessed; so is ``fp8`` (e4m3 or e5m2?). Anything else is
an argparse error (exit status 2), one line naming the argument and the accepted values.

Units: 1 GiB = 2**30 bytes, 1 MiB = 2**20, 1 KiB = 2**10; "1 byte", "2 bytes".
"""

from __future__ import annotations

import argparse

from attnprops.oracle.lab import KV_CONFIG
from attnprops.oracle.rules import DTYPE_BYTES
from attnprops.oracle.rules import paged_kv_cache_bytes
from attnprops.oracle.rules import pages_needed

GIB = 2**30
FORMULA = "2 * num_layers * batch * tokens * num_kv_heads * head_dim * bytes_per_element"
DEFAULTS = KV_CONFIG  # the source lab's configuration (oracle.lab)


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (a count, not bytes); raises ArgumentTypeError."""
    digits = text.replace("_", "").replace(",", "")
    try:
        if not digits.isascii():  # int() would read "١٢" (Arabic-Indic digits) as 12
            raise ValueError(text)
        value = int(digits)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"{value} must be >= 1 (a size cannot be zero or negative)"
        )
    return value


# Accepted alternative spellings (see the module doc for why these and not ``float``/``fp8``).
DTYPE_ALIASES = {
    "fp16": "float16",
    "half": "float16",
    "bf16": "bfloat16",
    "fp32": "float32",
    "fp64": "float64",
    "double": "float64",
}


def plural(count: int, unit: str = "byte") -> str:
    """``"1 byte"``, ``"2 bytes"``, ``"5,242,880,000 bytes"`` (thousands separated)."""
    return f"{count:,} {unit}" if count == 1 else f"{count:,} {unit}s"


def accepted_dtypes() -> str:
    """The accepted ``--dtype`` values, for the help and the error: names, then aliases."""
    by_name: dict[str, list[str]] = {}
    for alias, name in DTYPE_ALIASES.items():
        by_name.setdefault(name, []).append(alias)
    aliases = "; ".join(f"{'/'.join(a)} = {name}" for name, a in by_name.items())
    return f"{', '.join(sorted(DTYPE_BYTES))} (aliases: {aliases})"


def kv_dtype(text: str) -> str:
    """argparse type: a dtype name of :data:`oracle.rules.DTYPE_BYTES` (e.g. ``bfloat16``) or
    an alias of :data:`DTYPE_ALIASES` (e.g. ``bf16``), case-insensitive; returns the name."""
    name = text.strip().lower()
    name = DTYPE_ALIASES.get(name, name)
    if name not in DTYPE_BYTES:
        raise argparse.ArgumentTypeError(f"unknown dtype {text!r}; use one of {accepted_dtypes()}")
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
        parser.add_argument(
            flag,
            type=positive_int,
            default=DEFAULTS[key],
            metavar="N",
            help=f"{help_text} (default {DEFAULTS[key]})",
        )
    parser.add_argument(
        "--dtype",
        type=kv_dtype,
        default=DEFAULTS["dtype"],
        metavar="DTYPE",
        help=f"element type (default {DEFAULTS['dtype']}; case-insensitive), "
        f"one of {accepted_dtypes()}",
    )
    parser.add_argument(
        "--num-heads",
        type=positive_int,
        default=None,
        metavar="N",
        help="query heads: also print the MHA / GQA / MQA comparison",
    )
    parser.add_argument(
        "--page-size",
        type=positive_int,
        default=None,
        metavar="S",
        help="positions per page of a paged cache (vLLM's block_size): also print the bytes "
        "allocated in whole pages next to the bytes used",
    )
    parser.add_argument(
        "--seqlens",
        type=seqlens,
        default=None,
        metavar="L1,L2,...",
        help="one cached length per sequence (ints >= 0), instead of --batch sequences of "
        "--tokens; with --page-size, used and allocated bytes per sequence",
    )
    parser.add_argument(
        "--rolling-capacity",
        type=positive_int,
        default=None,
        metavar="W",
        help="also print a rolling (sliding-window) cache of W positions: it holds "
        "min(tokens, W), a fixed size however long the sequence",
    )
    parser.set_defaults(_parser=parser)


def seqlens(text: str) -> tuple[int, ...]:
    """argparse type: comma-separated lengths, each an integer >= 0 (``"100,37,0"``)."""
    lengths = []
    for part in text.split(","):
        part = part.strip()
        try:  # Python's int literal: digits, "_" only between them ("1_000")
            if not part.isascii() or not part[:1].isdigit():
                raise ValueError(part)
            lengths.append(int(part))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r}: each length must be an integer >= 0, separated by commas"
            ) from None
    return tuple(lengths)


def gib(nbytes: int) -> str:
    """``nbytes / 2**30`` to 4 decimals (``"4.8828"``), rounded half up in integer
    arithmetic: exact at any size (a float quotient would print digits it does not have
    past 2**53 bytes, and overflow past about 1e308)."""
    tenths_of_a_milli = (nbytes * 10**4 + GIB // 2) // GIB
    whole, decimals = divmod(tenths_of_a_milli, 10**4)
    return f"{whole}.{decimals:04d}"


def human(nbytes: int) -> str:
    """``nbytes`` in GiB (2**30 bytes; 4 decimals, exact, or 4 significant digits below
    0.001 GiB), followed below 1 GiB by the size in MiB or KiB (2 decimals) or bytes
    (exact, "1 byte").

    A value that would print as ``1024.00`` moves up a unit: ``2**20 - 1`` bytes reads
    ``1.00 MiB`` (not ``1024.00 KiB``) and ``2**30 - 1`` bytes ``1.0000 GiB`` alone."""
    text = f"{gib(nbytes)} GiB" if nbytes * 1000 >= GIB else f"{nbytes / GIB:.4g} GiB"
    mib, kib = nbytes / 2**20, nbytes / 2**10
    if nbytes >= GIB or f"{mib:.2f}" == "1024.00":
        return text
    if nbytes >= 2**20 or f"{kib:.2f}" == "1024.00":
        return f"{text} = {mib:.2f} MiB"
    if nbytes >= 2**10:
        return f"{text} = {kib:.2f} KiB"
    return f"{text} = {plural(nbytes)}"


def kv_bytes(args, num_kv_heads: int, **layout) -> int:
    """:func:`oracle.kv_cache_bytes` for ``args``'s configuration with ``num_kv_heads``
    (``layout``: ``page_size`` or ``rolling_capacity``); with ``--seqlens``, the sum over the
    sequences."""
    from attnprops import oracle

    sizes = dict(num_layers=args.num_layers, num_kv_heads=num_kv_heads, head_dim=args.head_dim)
    if args.seqlens is not None:
        return sum(
            oracle.kv_cache_bytes(**sizes, batch=1, tokens=n, dtype=args.dtype, **layout)
            for n in args.seqlens
            if n
        )
    return oracle.kv_cache_bytes(
        **sizes, batch=args.batch, tokens=args.tokens, dtype=args.dtype, **layout
    )


def run(args) -> int:
    """Print the bytes, GiB and the formula with the numbers substituted; 0 on success.

    With ``--num-heads`` also a table for MHA, GQA and MQA. An invalid head combination
    (``num_kv_heads > num_heads`` or not dividing it) is an argparse error (exit 2).
    """
    if args.num_heads is not None:
        problem = None
        if args.num_kv_heads > args.num_heads:
            problem = f"--num-kv-heads {args.num_kv_heads} exceeds --num-heads {args.num_heads}"
        elif args.num_heads % args.num_kv_heads:
            problem = (
                f"--num-kv-heads {args.num_kv_heads} must divide --num-heads "
                f"{args.num_heads} (each K/V head serves num_heads / num_kv_heads "
                "query heads)"
            )
        if problem:
            args._parser.error(problem)  # exits with status 2 (add_arguments sets _parser)
    itemsize = DTYPE_BYTES[args.dtype]
    total = kv_bytes(args, args.num_kv_heads)
    print("KV cache, raw K and V payload (no allocator slack or metadata; pages below):")
    print(f"  bytes = {FORMULA}")
    positions = (
        f"{args.batch} * {args.tokens}"
        if args.seqlens is None
        else f"({'+'.join(map(str, args.seqlens))})"
    )
    print(
        f"        = 2 * {args.num_layers} * {positions} * "
        f"{args.num_kv_heads} * {args.head_dim} * {itemsize}   ({args.dtype}: "
        f"{plural(itemsize)} per element)"
    )
    print(f"        = {plural(total)}")
    print(f"        = {human(total)}   (1 GiB = 2**30 bytes)")
    if args.seqlens is not None:
        _print_sequences(args, args.num_kv_heads)
    elif args.page_size is not None:
        allocated = kv_bytes(args, args.num_kv_heads, page_size=args.page_size)
        rounded = pages_needed(args.tokens, args.page_size) * args.page_size
        print(f"\nPaged, pages of {args.page_size} positions (each sequence's last page whole):")
        print(f"  allocated = the same with tokens rounded up to {rounded} positions")
        print(f"            = {plural(allocated)} = {human(allocated)}")
        print(f"  unused    = {plural(allocated - total)} in partly filled last pages")
    if args.rolling_capacity is not None:
        W = args.rolling_capacity
        held = (
            f"min(tokens, W) = {min(args.tokens, W)}"
            if args.seqlens is None
            else f"min(L_b, W) = {[min(n, W) for n in args.seqlens]}"
        )
        pages = {} if args.page_size is None else {"page_size": args.page_size}
        rolling = kv_bytes(args, args.num_kv_heads, rolling_capacity=W, **pages)
        in_pages = "" if args.page_size is None else f", in pages of {args.page_size}"
        print(f"\nRolling cache of {W} positions (holds {held}{in_pages}):")
        print(f"  bytes     = {plural(rolling)} = {human(rolling)}, fixed however long")
    if args.num_heads is not None:
        hq = args.num_heads
        rows = [("MHA", hq)]
        if 1 < args.num_kv_heads < hq:
            rows.append(("GQA", args.num_kv_heads))
        if hq > 1:
            rows.append(("MQA", 1))
        print(f"\nWith {hq} query heads (same layers, batch, tokens, head_dim, dtype):")
        # one space between columns: a size wider than its column pushes the row, never joins
        layouts = [("bytes", {})]
        if args.page_size is not None:
            layouts.append(("paged bytes", {"page_size": args.page_size}))
        if args.rolling_capacity is not None:
            rolling = {"rolling_capacity": args.rolling_capacity}
            if args.page_size is not None:
                rolling["page_size"] = args.page_size
            layouts.append(("rolling bytes", rolling))
        header = "".join(f" {name:>21}" for name, _ in layouts)
        print(f"  {'attention':<10}{'kv_heads':>9}{header} {'GiB':>11} {'vs MHA':>8}")
        for label, heads in rows:
            sizes = [kv_bytes(args, heads, **layout) for _, layout in layouts]
            cells = "".join(f" {b:>21,}" for b in sizes)
            print(f"  {label:<10}{heads:>9}{cells} {gib(sizes[0]):>11} {heads / hq:>8.4g}")
    return 0


def _print_sequences(args, num_kv_heads: int) -> None:
    """Per-sequence lengths (``--seqlens``): used bytes, and with ``--page-size`` the pages
    and allocated bytes of each, then the totals (:func:`oracle.rules.paged_kv_cache_bytes`)."""
    size = args.page_size or 1
    paged = paged_kv_cache_bytes(
        num_layers=args.num_layers,
        seqlens=args.seqlens,
        page_size=size,
        num_kv_heads=num_kv_heads,
        head_dim=args.head_dim,
        dtype=args.dtype,
    )
    count = plural(len(args.seqlens), "sequence")
    print(f"\nPer sequence ({count}; --seqlens replaces --batch and --tokens):")
    pages = f" {'pages':>8} {'allocated bytes':>21}" if args.page_size else ""
    print(f"  {'sequence':>8} {'tokens':>10} {'used bytes':>21}{pages}")
    for b, (n, used, allocated) in enumerate(zip(args.seqlens, paged.used, paged.allocated)):
        row = f"  {b:>8} {n:>10,} {used:>21,}"
        if args.page_size:
            row += f" {pages_needed(n, size):>8,} {allocated:>21,}"
        print(row)
    print(f"  used total      = {plural(paged.used_total)} = {human(paged.used_total)}")
    if args.page_size:
        print(
            f"  allocated total = {plural(paged.allocated_total)} = "
            f"{human(paged.allocated_total)} (pages of {size}; unused "
            f"{plural(paged.allocated_total - paged.used_total)})"
        )
