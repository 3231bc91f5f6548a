"""``python -m attnprops.benchmarks`` / ``attnprops bench``: every performance figure of attnprops in one run.

Sections (``--only`` selects some):

1. ``verdict`` — time to verdict: ``pytest -n auto`` (with ``--suite``), ``attnprops mutants``
   (read from its report), and a profile of where a property run spends its time.
2. ``oracle`` — the 50-digit oracle's multiply-adds per second against a naive mpmath loop.
3. ``numpy`` — impl.attention (its default call, the dense and the blocked path) against
   ``torch.nn.functional.scaled_dot_product_attention``.
4. ``memory`` — peak memory of the blocked path against the dense path (tracemalloc).
5. ``kv`` — KV cache appends: linear growth, and against ``np.concatenate`` per step.

Every figure is printed with the anchor it is compared with, measured in the same run (or a
fixed target), and written to ``benchmark-results/results.json`` in the current folder
(``--out``; never into the package: the committed table is the README's). Ratios measured in one
run stay meaningful on a shared machine; absolute times do not: the run prints the load
average at its start and end. NumPy's BLAS and PyTorch use ``--threads`` threads (default 1,
the robust choice on a loaded machine; on a quiet one try ``--threads 2``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import time
from pathlib import Path

from attnprops.benchmarks._harness import REPO
from attnprops.benchmarks._harness import environment
from attnprops.benchmarks._harness import load_average
from attnprops.benchmarks._harness import set_threads
from attnprops.benchmarks._harness import table

SECTIONS = ("verdict", "oracle", "numpy", "memory", "kv")
DEFAULT_OUT = "benchmark-results/results.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--only",
        nargs="+",
        choices=SECTIONS,
        metavar="SECTION",
        help=f"run only these sections ({', '.join(SECTIONS)})",
    )
    parser.add_argument(
        "--out",
        default=DEFAULT_OUT,
        help=f"where to write the results (default: {DEFAULT_OUT}, in the current folder)",
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="threads for NumPy's BLAS and PyTorch (default 1)"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=5,
        help="timed runs per measurement; the best is kept (default 5)",
    )
    parser.add_argument(
        "--suite",
        action="store_true",
        help="also time `pytest -n auto` (the whole project, ci profile; "
        "minutes); otherwise the last recorded time is shown",
    )
    parser.add_argument(
        "--report",
        default=str(REPO / "mutation-report" / "mutation-report.json"),
        help="mutation report written by `attnprops mutants`",
    )
    parser.add_argument(
        "--profile-all",
        action="store_true",
        help="profile every property (default: a representative few)",
    )
    parser.add_argument(
        "--profile-tests", nargs="+", metavar="TEST", help="properties to profile against impl"
    )
    parser.add_argument(
        "--shrink-mutant",
        metavar="NAME",
        help="mutant whose run (with shrinking) is profiled (default: the "
        "report's slowest, else online_softmax_last_partial_block_dropped)",
    )
    parser.add_argument(
        "--block-size",
        type=int,
        default=128,
        help="impl block_size timed next to the default call for the causal "
        "speed case (default 128)",
    )
    parser.add_argument(
        "--decode-block-size",
        type=int,
        default=128,
        help="impl block_size timed next to the default call for the decode "
        "speed case (default 128)",
    )
    parser.add_argument(
        "--memory-T",
        type=int,
        default=16384,
        help="sequence length of the blocked memory run (default 16384)",
    )
    parser.add_argument(
        "--memory-block-size",
        type=int,
        default=256,
        help="impl block_size of the memory runs (default 256)",
    )
    parser.add_argument(
        "--kv-steps", type=int, default=16384, help="single-token KV cache appends (default 16384)"
    )
    parser.add_argument(
        "--kv-baseline-steps",
        type=int,
        default=4096,
        help="steps of the np.concatenate baseline (default 4096)",
    )


def _previous(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def run(args) -> int:
    from attnprops.benchmarks import kv_cache
    from attnprops.benchmarks import memory
    from attnprops.benchmarks import numpy_speed
    from attnprops.benchmarks import oracle_speed
    from attnprops.benchmarks import verdict

    sections = args.only or SECTIONS
    out = Path(args.out)
    previous = _previous(out)
    started = time.perf_counter()
    started_at = _dt.datetime.now().isoformat(timespec="seconds")
    threads = set_threads(args.threads)
    env = environment()
    prog = (
        "attnprops" if Path(sys.argv[0]).name == "attnprops" else "python -m attnprops.benchmarks"
    )
    command = " ".join([prog, *sys.argv[1:]])
    print(
        f"attnprops benchmarks, {started_at}; threads {threads}; load average "
        f"{env['load_average_1_5_15min']} on {env['cpu_count']} CPUs ({env['processor']})",
        flush=True,
    )
    rows, details = [], {}
    runners = {
        "verdict": lambda: verdict.run(args, (previous.get("details") or {}).get("verdict")),
        "oracle": lambda: oracle_speed.run(args),
        "numpy": lambda: numpy_speed.run(args),
        "memory": lambda: memory.run(args),
        "kv": lambda: kv_cache.run(args),
    }
    timings = {}
    for name in SECTIONS:
        if name not in sections:
            continue
        t0 = time.perf_counter()
        print(f"  running {name} ...", flush=True)
        section_rows, section_details = runners[name]()
        timings[name] = round(time.perf_counter() - t0, 1)
        rows += section_rows
        details[name] = section_details
    seconds = time.perf_counter() - started
    env["load_average_at_end"] = load_average()
    print()
    print(table(rows))
    print()
    met = [r for r in rows if r.met is not None]
    print(
        f"targets met: {sum(bool(r.met) for r in met)}/{len(met)}; sections' seconds "
        f"{timings}; total {seconds:.0f} s; load average at end "
        f"{env['load_average_at_end']} (absolute times on a shared machine are noisy; "
        "ratios are measured within this run)"
    )
    results = {
        "command": command,
        "started": started_at,
        "seconds": round(seconds, 1),
        "section_seconds": timings,
        "threads": threads,
        "environment": env,
        "rows": [r.as_dict() for r in rows],
        "details": details,
        "table": table(rows),
    }
    if "verdict" not in sections and previous.get("details", {}).get("verdict"):
        results["details"]["verdict"] = previous["details"]["verdict"]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=float))
    print(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m attnprops.benchmarks", description=__doc__.split("\n")[0]
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
