"""The ``attnprops`` command. Each subcommand lives in its own module of :mod:`ci` (or
:mod:`benchmarks`) exposing ``add_arguments(parser)`` and ``run(args) -> int`` (exit code);
modules are imported only when their subcommand runs, so a missing optional extra affects only
that subcommand."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading

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


@contextlib.contextmanager
def _interrupt_ends_the_imports(command: str | None):
    """While the subcommand's modules import (a second or two: NumPy, Hypothesis, pytest), a
    Ctrl-C ends the command at once, with the message and exit status of a later one
    (130), and no traceback: a ``KeyboardInterrupt`` raised inside an extension module's import
    comes out as another error (NumPy's ``ImportError: numpy._core.umath failed to import``),
    so it cannot be caught as one. Nothing has started yet (no run, no file), so there is
    nothing to undo. Afterwards the caller's handler is back. Only in the main thread (the
    only one where Python lets a handler be set)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def end(signum, frame):
        os.write(2, f"{_name(command)}: interrupted\n".encode())
        os._exit(130)  # 128 + SIGINT

    previous = signal.signal(signal.SIGINT, end)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _name(command: str | None) -> str:
    return "attnprops" if command is None else f"attnprops {command}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    only = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    with _interrupt_ends_the_imports(only):
        args = build_parser(only).parse_args(argv)
        module = importlib.import_module(SUBCOMMANDS[args.command][0])
    try:
        return int(module.run(args) or 0)
    except BrokenPipeError:  # `attnprops example | head`: the reader left; not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        return 0
    except KeyboardInterrupt:  # Ctrl-C: the pytest runs ended with it (ci.pytest_process)
        print(f"{_name(args.command)}: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT, as a shell reports a command it interrupted


if __name__ == "__main__":
    sys.exit(main())
