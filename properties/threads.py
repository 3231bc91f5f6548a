"""One BLAS / OpenMP thread per process when processes run in parallel."""

from __future__ import annotations

import os

__all__ = ["THREAD_ENV_VARS", "one_thread_per_process"]

# Thread-pool sizes of the numerical libraries (OpenBLAS, MKL, OpenMP: NumPy's matmul, torch's
# intra-op pool), read when each library loads.
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def one_thread_per_process(*, workers) -> None:
    """Before parallel processes start (pytest-xdist's workers, ``workers`` of them, or the
    mutation runner's pool), give each one thread per numerical library, unless the
    environment already sets the size (:data:`THREAD_ENV_VARS`; the processes inherit it).

    Each process otherwise starts one BLAS / OpenMP thread per core, so two processes on two
    cores run four busy threads: measured here, ``pytest -n auto`` took 59-62 s with the
    default pools and 49 s with one thread per worker (2 cores; the properties' matmuls are
    small, and spinning pool threads cost more than they gain). ``workers`` None, 0 or 1
    (no parallel processes): nothing changes.
    """
    if isinstance(workers, int) and workers > 1:
        for name in THREAD_ENV_VARS:
            os.environ.setdefault(name, "1")
