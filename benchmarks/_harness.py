"""Shared pieces of the benchmarks: timers, thread control, peak memory, result rows, table.

Every figure is a :class:`Row`: what was measured, its value, the anchor it is compared with
(measured in the same run, or a fixed target), the ratio and whether the target is met.
"""

from __future__ import annotations

import ctypes
import gc
import glob
import os
import statistics
import time
import tracemalloc
from dataclasses import asdict
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Row:
    """One figure of the table.

    ``value``/``unit``: the measurement. ``anchor``: what it is compared with, in words, and
    ``anchor_value`` its number (same unit unless said). ``ratio``: value / anchor (or the
    quotient named in ``ratio_of``). ``target``: the goal in words; ``met``: True/False, or
    None when the figure has no pass/fail target or was not measured.
    """

    section: str
    figure: str
    value: float | None
    unit: str
    anchor: str = ""
    anchor_value: float | None = None
    anchor_unit: str = ""
    ratio: float | None = None
    ratio_of: str = ""
    target: str = ""
    met: bool | None = None
    note: str = ""
    details: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def best_of(fn, *, repeat: int = 5, warmup: int = 1, budget_s: float | None = None) -> dict:
    """Run ``fn`` ``warmup`` times, then up to ``repeat`` timed times (fewer if ``budget_s``
    seconds are spent). Returns min, median and all times in seconds. The minimum is the
    figure used: on a shared machine other processes only ever add time."""
    for _ in range(warmup):
        fn()
    times = []
    spent = time.perf_counter()
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if budget_s is not None and time.perf_counter() - spent > budget_s:
            break
    return {"min": min(times), "median": statistics.median(times), "times": times}


def best_of_each(fns: dict, *, repeat: int = 5, warmup: int = 1) -> dict:
    """Like :func:`best_of` for several functions timed in turn: each round runs every
    function once, ``repeat`` rounds, so a burst of load from other processes falls on all of
    them alike and the ratios of their minima stay meaningful. Returns ``{name: {"min",
    "median", "times"}}``."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            gc.collect()
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {
        name: {"min": min(t), "median": statistics.median(t), "times": t}
        for name, t in times.items()
    }


def peak_bytes(fn) -> tuple[int, object]:
    """Peak memory allocated while ``fn`` runs, above what was allocated before (tracemalloc
    traces Python and NumPy allocations), and ``fn``'s result."""
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        result = fn()
        return tracemalloc.get_traced_memory()[1] - before, result
    finally:
        tracemalloc.stop()


# -- threads -------------------------------------------------------------------------------


def _openblas():
    """NumPy's bundled OpenBLAS (ctypes handle, symbol prefix) or None."""
    try:
        import numpy

        libdir = Path(numpy.__file__).resolve().parent.parent / "numpy.libs"
        candidates = glob.glob(str(libdir / "*openblas*"))
    except Exception:
        return None
    for path in candidates:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for setter, getter in (
            ("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
            ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
            ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
            ("openblas_set_num_threads", "openblas_get_num_threads"),
        ):
            if hasattr(lib, setter) and hasattr(lib, getter):
                return lib, setter, getter
    return None


def set_threads(n: int) -> dict:
    """Use ``n`` threads in NumPy's BLAS (threadpoolctl if installed, else OpenBLAS through
    ctypes) and in PyTorch (if installed). Returns what was set."""
    done = {"requested": n, "numpy_blas": None, "torch": None}
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n)
        done["numpy_blas"] = n
    except ImportError:
        found = _openblas()
        if found is not None:
            lib, setter, getter = found
            getattr(lib, setter)(ctypes.c_int(n))
            done["numpy_blas"] = int(getattr(lib, getter)())
    try:
        import torch

        torch.set_num_threads(n)
        done["torch"] = torch.get_num_threads()
    except ImportError:
        pass
    return done


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def environment() -> dict:
    import platform

    import numpy

    env = {
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "processor": _cpu_name(),
        "load_average_1_5_15min": load_average(),
    }
    try:
        import torch

        env["torch"] = torch.__version__
    except ImportError:
        env["torch"] = None
    try:
        import mpmath

        env["mpmath"] = mpmath.__version__
        env["mpmath_backend"] = mpmath.libmp.BACKEND
    except ImportError:
        pass
    return env


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor()


# -- table ---------------------------------------------------------------------------------


def fmt(value, unit: str = "") -> str:
    """A number with 3 significant digits and its unit (``s``/``ms``/``x``/``MiB``...)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if unit == "s" and abs(value) < 0.9995:
        return f"{value * 1e3:.3g} ms"
    if isinstance(value, int) and not isinstance(value, bool):
        text = f"{value:,}"
    elif abs(value) >= 1e5 or (0 < abs(value) < 1e-3):
        text = f"{value:.3g}"
    else:
        text = f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"
    return f"{text} {unit}".strip()


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table (also readable as plain text)."""
    head = ["#", "figure", "value", "anchor (same run unless said)", "ratio", "target", "met"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * len(head)) + "|"]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.section] = n = counts.get(r.section, 0) + 1
        anchor = r.anchor
        if r.anchor_value is not None:
            anchor = f"{anchor}: {fmt(r.anchor_value, r.anchor_unit or r.unit)}".strip(": ")
        ratio = "-" if r.ratio is None else f"{r.ratio:.3g}"
        if r.ratio is not None and r.ratio_of:
            ratio += f" ({r.ratio_of})"
        met = {True: "yes", False: "NO", None: "-"}[r.met]
        figure = r.figure + (f" — {r.note}" if r.note else "")
        cells = [
            f"{r.section}.{n}",
            figure,
            fmt(r.value, r.unit),
            anchor or "-",
            ratio,
            r.target or "-",
            met,
        ]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)
