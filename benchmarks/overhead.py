"""Per-call overhead and views: tensorc.einsum against numpy.einsum(optimize=True) and
opt_einsum.contract on tiny, small and strided (view) operands, in one process.

    .venv/bin/python benchmarks/overhead.py [--json out.json] [--samples 9]
                                            [--blas-threads 2] [--only NAME ...]

Every case runs each system on the same operands: one warm-up call (checked against numpy;
for tensorc it also fills the plan cache, so the timed calls are cache hits), then
``--samples`` samples per system, the systems interleaved sample by sample so a noisy moment
hits all of them. A sample times a batch of calls sized to last ~20 ms; the table gives the
median time per call and its ratio to numpy. Targets (PERFORMANCE.md): tiny calls within
1.2x of numpy, views within 1.1x.

BLAS threads are pinned for the whole run with
``threadpoolctl.threadpool_limits(limits=--blas-threads, user_api="blas")``, default 1: no
tiny call reaches BLAS threading, and on a shared 2-core machine two BLAS threads turn any
other process's load into multi-millisecond stalls (a descheduled BLAS thread holds the call
until the next tick), which swamps the strided cases' differences; ``--blas-threads 2``
measures them with every core. tensorc's executor re-limits BLAS only while it runs two or
more tasks at once, which no case here does. The pin is printed and written to the JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import opt_einsum as oe
from threadpoolctl import threadpool_info, threadpool_limits

import tensorc as tc


@dataclass(frozen=True)
class Case:
    name: str
    group: str  # tiny | small | strided
    subscripts: str
    make: Callable[[np.random.Generator], tuple[np.ndarray, ...]]


def _cases() -> list[Case]:
    def rand(r, *shape):
        return r.random(shape)

    return [
        Case("matmul 6x5 @ 5x7", "tiny", "ij,jk->ik", lambda r: (rand(r, 6, 5), rand(r, 5, 7))),
        Case("transpose 6x5", "tiny", "ij->ji", lambda r: (rand(r, 6, 5),)),
        Case("dot 9", "tiny", "i,i->", lambda r: (rand(r, 9), rand(r, 9))),
        Case("diagonal 6x6", "tiny", "ii->i", lambda r: (rand(r, 6, 6),)),
        Case("trace 6x6", "tiny", "ii->", lambda r: (rand(r, 6, 6),)),
        Case("matvec 8x8", "tiny", "ij,j->i", lambda r: (rand(r, 8, 8), rand(r, 8))),
        Case("outer 5,6", "tiny", "i,j->ij", lambda r: (rand(r, 5), rand(r, 6))),
        Case("MTTKRP 4x5x6", "tiny", "ijk,jf,kf->if",
             lambda r: (rand(r, 4, 5, 6), rand(r, 5, 3), rand(r, 6, 3))),
        Case("matmul 64", "small", "ij,jk->ik", lambda r: (rand(r, 64, 64), rand(r, 64, 64))),
        Case("batched matmul 8x32", "small", "bij,bjk->bik",
             lambda r: (rand(r, 8, 32, 32), rand(r, 8, 32, 32))),
        Case("sum axis 100x100", "small", "ij->j", lambda r: (rand(r, 100, 100),)),
        Case("mission ijk,jkf->if 16", "small", "ijk,jkf->if",
             lambda r: (rand(r, 16, 16, 16), rand(r, 16, 16, 10))),
        Case("column-slice B", "strided", "ij,jk->ik",
             lambda r: (rand(r, 896, 224), rand(r, 224, 896)[:, :448])),
        Case("row-step A", "strided", "ij,jk->ik",
             lambda r: (rand(r, 1792, 224)[::2], rand(r, 224, 448))),
        Case("transposed A", "strided", "ij,jk->ik",
             lambda r: (rand(r, 224, 896).T, rand(r, 224, 448))),
        Case("transposed A and B", "strided", "ij,jk->ik",
             lambda r: (rand(r, 224, 896).T, rand(r, 448, 224).T)),
        Case("strided middle axis", "strided", "ijk,jkf->if",
             lambda r: (rand(r, 64, 128, 64)[:, ::2, :], rand(r, 64, 64, 100))),
        Case("contiguous (reference)", "strided", "ij,jk->ik",
             lambda r: (rand(r, 896, 224), rand(r, 224, 448))),
    ]


SYSTEMS: dict[str, Callable] = {
    "numpy": lambda s, ops: (lambda: np.einsum(s, *ops, optimize=True)),
    "opt_einsum": lambda s, ops: (lambda: oe.contract(s, *ops)),
    "tensorc": lambda s, ops: (lambda: tc.einsum(s, *ops)),
}


def _batch_size(fn: Callable[[], object], seconds: float = 0.02) -> int:
    started = time.perf_counter()
    calls = 0
    while time.perf_counter() - started < seconds / 4 and calls < 100_000:
        fn()
        calls += 1
    per_call = (time.perf_counter() - started) / calls
    return max(1, int(seconds / per_call))


def run_case(case: Case, samples: int) -> dict:
    operands = case.make(np.random.default_rng(0))
    expected = np.einsum(case.subscripts, *operands, optimize=True)
    runs = {name: make(case.subscripts, operands) for name, make in SYSTEMS.items()}
    batches = {}
    for name, fn in runs.items():
        result = fn()
        assert np.allclose(result, expected), f"{name} differs from numpy on {case.name}"
        batches[name] = _batch_size(fn)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(samples):
        for name, fn in runs.items():
            count = batches[name]
            started = time.perf_counter()
            for _ in range(count):
                fn()
            times[name].append((time.perf_counter() - started) / count)
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    tc.einsum(case.subscripts, *operands)
    stats = tc.last_stats()
    return {
        "name": case.name,
        "group": case.group,
        "subscripts": case.subscripts,
        "shapes": [list(op.shape) for op in operands],
        "median_us": {name: m * 1e6 for name, m in medians.items()},
        "ratio_to_numpy": {name: m / medians["numpy"] for name, m in medians.items()},
        "tensorc_fast_path": bool(stats.get("fast_path")),
        "tensorc_view": bool(stats.get("view")),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results to this file")
    parser.add_argument("--samples", type=int, default=9)
    parser.add_argument("--blas-threads", type=int, default=1)
    parser.add_argument("--only", nargs="*", help="groups or case names to run")
    args = parser.parse_args(argv)
    cases = [c for c in _cases() if not args.only or c.group in args.only or c.name in args.only]
    results = []
    with threadpool_limits(limits=args.blas_threads, user_api="blas"):
        pools = [
            {k: p[k] for k in ("internal_api", "num_threads")}
            for p in threadpool_info() if p["user_api"] == "blas"
        ]
        print(f"BLAS pinned to {args.blas_threads} thread(s) with threadpoolctl: {pools}")
        header = (f"{'case':<26} {'group':<8} {'numpy us':>10} {'opt_einsum us':>14} "
                  f"{'tensorc us':>11} {'tc/numpy':>9} {'oe/numpy':>9}  path")
        print(header)
        print("-" * len(header))
        for case in cases:
            row = run_case(case, args.samples)
            results.append(row)
            m, r = row["median_us"], row["ratio_to_numpy"]
            path = "view" if row["tensorc_view"] else ("fast" if row["tensorc_fast_path"]
                                                        else "full")
            print(f"{case.name:<26} {case.group:<8} {m['numpy']:>10.1f} {m['opt_einsum']:>14.1f} "
                  f"{m['tensorc']:>11.1f} {r['tensorc']:>9.2f} {r['opt_einsum']:>9.2f}  {path}",
                  flush=True)
    for group in ("tiny", "small", "strided"):
        ratios = [row["ratio_to_numpy"]["tensorc"] for row in results if row["group"] == group]
        if ratios:
            print(f"{group}: tensorc/numpy geometric mean "
                  f"{statistics.geometric_mean(ratios):.2f}, worst {max(ratios):.2f}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({
                "benchmark": "overhead",
                "python": sys.version.split()[0],
                "numpy": np.__version__,
                "machine": platform.machine(),
                "blas_threads": args.blas_threads,
                "blas_pools": pools,
                "samples": args.samples,
                "results": results,
            }, handle, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
