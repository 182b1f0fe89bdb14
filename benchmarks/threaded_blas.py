"""Two triangular solves on two threads: SciPy's BLAS wrapper against tensorc's GIL-free call.

Times ``--n`` x ``--n`` float64 ``trsm`` (a lower triangle, the right-hand side C- or
Fortran-ordered) alone and as two at once on a thread pool, BLAS pinned to one thread per
call: a ratio near 1 means the two ran side by side, near 2 that they took turns (SciPy's
wrapper holds the GIL for the whole call; ``tensorc.codegen.blas_calls.trsm`` calls the same
routine with it released). Medians of ``--repeats``. Usage: ``.venv/bin/python
benchmarks/threaded_blas.py [--n 1024] [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.linalg.blas
from threadpoolctl import threadpool_limits

from tensorc.codegen.blas_calls import trsm


def _seconds(call, repeats: int) -> tuple[float, float]:
    """Median seconds of one call, and of two at once on two threads."""
    call()
    alone, pairs = [], []
    with ThreadPoolExecutor(2) as pool:
        for _ in range(repeats):
            started = time.perf_counter()
            call()
            alone.append(time.perf_counter() - started)
            started = time.perf_counter()
            list(pool.map(lambda _: call(), range(2)))
            pairs.append(time.perf_counter() - started)
    return statistics.median(alone), statistics.median(pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n = args.n
    lower = np.asfortranarray(np.tril(rng.random((n, n))) + n * np.eye(n))
    rhs = {"C": rng.random((n, n)), "F": np.asfortranarray(rng.random((n, n)))}
    with threadpool_limits(1, "blas"):
        for order, b in rhs.items():
            for name, solve in (("scipy dtrsm", scipy.linalg.blas.dtrsm), ("tensorc trsm", trsm)):
                one, two = _seconds(lambda s=solve, b=b: s(1.0, lower, b, side=0, lower=1),
                                    args.repeats)
                print(f"{name:13s} b {order}-ordered: one {one * 1e3:6.1f} ms, two on two "
                      f"threads {two * 1e3:6.1f} ms ({two / one:.2f}x)")


if __name__ == "__main__":
    main()
