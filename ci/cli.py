"""The ``attnprops`` command. Each subcommand lives in its own module of :mod:`ci` (or
:mod:`benchmarks`) exposing ``add_arguments(parser)`` and ``run(args) -> int`` (exit code);
modules are imported only when their subcommand runs, so a missing optional extra affects only
that subcommand."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

SUBCOMMANDS = {
    "example": ("attnprops.ci.example", "print the source lab's 3-token causal example"),
    "check": ("attnprops.ci.check", "run the property suite against a subject module"),
    "mutants": (
        "attnprops.ci.mutation_report",
        "run the suite against every mutant; write the report",
    ),
    "audit": ("attnprops.ci.audit", "recompute and check every number of the source lab"),
    "plot": (
        "attnprops.ci.plot",
        "heatmaps of the 3-token example and two wrong variants (extra: plot)",
    ),
    "kv-bytes": ("attnprops.ci.kv_bytes", "KV cache size in bytes for a model configuration"),
    "laws": (
        "attnprops.ci.laws",
        "the catalogue of the suite's laws (docs/laws.md), from the code",
    ),
    "bench": ("attnprops.benchmarks.__main__", "speed and memory benchmarks"),
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="attnprops",
        description="attnprops: an executable specification of transformer attention (a "
        "50-digit oracle, Hypothesis properties, mutants). Run a subcommand with "
        "--help for its options.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if only is None or name == only:
            try:
                importlib.import_module(module).add_arguments(p)
            except ModuleNotFoundError as exc:
                if only is not None:
                    raise
                p.set_defaults(_missing=str(exc))
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    only = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    args = build_parser(only).parse_args(argv)
    module = importlib.import_module(SUBCOMMANDS[args.command][0])
    try:
        return int(module.run(args) or 0)
    except BrokenPipeError:  # `attnprops example | head`: the reader left; not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        return 0
    except KeyboardInterrupt:  # Ctrl-C: the pytest runs ended with it (ci.pytest_process)
        print(f"attnprops {args.command}: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT, as a shell reports a command it interrupted


if __name__ == "__main__":
    sys.exit(main())
