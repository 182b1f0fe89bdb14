"""What one more block task costs an einsum on Ray: the figure behind the distributed model's
per-task prices (``RAY_SUBMIT_SECONDS`` on the driver, ``task_seconds`` on a node).

On a private cluster (``tc.init(num_nodes=--nodes)``), the MTTKRP ``ijk,if,jf->if`` at
``--n``, ``F = --f`` runs with its blocking forced (``grid=``) from a few block tasks to
thousands, the tensor placed in that blocking beforehand (off the clock). Per blocking:
the tasks, the node calls of a repeated run, the first call (its plan made then: lowering,
LSHS, staging, cached after) with its ``plan_seconds``, and the median of ``--repeats``
repeated calls (the plan cached: submission and the run). Each result is checked against
``numpy.einsum`` (a wrong result exits 1). The marginal cost of a task is the slope between
the smallest and the largest blocking, first and repeated; with the calls' number fixed by
the nodes and stages, it is what the driver and the node workers spend per block step.

    .venv/bin/python benchmarks/ray_task_cost.py [--nodes 4] [--n 128] [--f 32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import common
import numpy as np

import tensorc as tc

BLOCKINGS = ((4, 4, 1, 1), (8, 8, 2, 2), (16, 16, 2, 2), (16, 16, 4, 4), (32, 32, 4, 2))
"""Blocks along ``i, j, k, f``."""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--n", type=int, default=128)
    parser.add_argument("--f", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    n, f = args.n, args.f
    rng = np.random.default_rng(0)
    x, a, b = rng.random((n, n, n)), rng.random((n, f)), rng.random((n, f))
    want = np.einsum("ijk,if,jf->if", x, a, b)
    tc.init(num_nodes=args.nodes)
    try:
        tc.wait(tc.einsum("ijk,if,jf->if", tc.asarray(x), a, b))  # the session's first call
        rows = [_blocking(counts, x, a, b, want, args.repeats) for counts in BLOCKINGS]
    finally:
        tc.shutdown()
    print(common.format_table(
        ["blocks i,j,k,f", "tasks", "calls", "first s", "of it planning s", "repeated s",
         "check"],
        [[",".join(map(str, r["blocks"].values())), r["tasks"], r["calls"],
          f"{r['first_seconds']:.3f}", f"{r['plan_seconds']:.3f}",
          f"{r['repeated_seconds']:.3f}", r["check"] or "ok"] for r in rows]))
    low, high = rows[0], rows[-1]
    extra = high["tasks"] - low["tasks"]
    slopes = {key: (high[key] - low[key]) / extra
              for key in ("first_seconds", "plan_seconds", "repeated_seconds")}
    print(f"per task ({low['tasks']} -> {high['tasks']} tasks): first call "
          f"{slopes['first_seconds'] * 1e6:.0f} us (planning {slopes['plan_seconds'] * 1e6:.0f} "
          f"us), repeated call {slopes['repeated_seconds'] * 1e6:.0f} us")
    if args.json:
        common.write_json(args.json, {"benchmark": "ray_task_cost", "args": vars(args),
                                      "rows": rows, "per_task_seconds": slopes,
                                      "environment": common.environment()})
    failed = [r for r in rows if r["check"]]
    for r in failed:
        print(f"WRONG RESULT with blocks {r['blocks']}: {r['check']}")
    return 1 if failed else 0


def _blocking(counts, x, a, b, want, repeats: int) -> dict:
    """One forced blocking: its first call, then ``repeats`` repeated calls (module
    docstring)."""
    n = x.shape[0]
    grid = dict(zip("ijkf", counts, strict=True))
    tensor = tc.asarray(x, block_shape=tuple(n // c for c in counts[:3]))
    tc.wait(tensor)

    def call():
        out = tc.einsum("ijk,if,jf->if", tensor, a, b, grid=grid)
        tc.wait(out)
        return out

    started = time.perf_counter()
    out = call()
    first = time.perf_counter() - started
    stats = tc.last_stats()
    times = common.measure(call, repeats=repeats, warmup=0)
    return {"blocks": grid, "tasks": stats["tasks"],
            "calls": tc.last_stats().get("remote_calls"), "first_seconds": first,
            "plan_seconds": stats.get("plan_seconds") or 0.0,
            "repeated_seconds": statistics.median(times),
            "check": common.check(np.asarray(out), want)}


if __name__ == "__main__":
    sys.exit(main())
