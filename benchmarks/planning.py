"""Planning-throughput benchmark: ``tensorc.plan`` for a blocked matmul of ~100,000 tasks.

Times ``tc.plan("ij,jk->ik", (n, n), (n, n), grid={"i": g, "j": g, "k": g})`` (shapes
only, no data).  ``g`` is calibrated for ``--tasks`` (default 100,000):
``plan.stats["tasks"]`` is read at g = 4 and g = 8, a power law tasks = c * g^p is
fitted and solved for the target, and secant steps refine g until the plan is within 5 %
of the target; the task count actually planned is printed.  ``--grid`` fixes g.

Each call plans a different problem size (g * (n // g), then + g, + 2g, ...: every block
size divides evenly and the task count is unchanged), so no plan cache can serve a repeat.
One warm-up call, then the median of ``--repeats``.  With ``--scaling`` (default) the same
is measured at about 1/4 and 1/2 of the target to show whether planning is linear in the
number of tasks.  Targets (docs/performance.md): under 2 s for ~100,000 tasks, at least
50,000 tasks per second.

    python benchmarks/planning.py [--n 4096] [--tasks 100000] [--grid G] [--repeats 5]
                                  [--no-scaling] [--json PATH]
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
from typing import Any

from common import (
    environment,
    error_text,
    fmt,
    format_table,
    load_module,
    make_parser,
    measure,
    require,
    write_json,
)

SUBSCRIPTS = "ij,jk->ik"
MAX_SECONDS = 2.0
MIN_TASKS_PER_SECOND = 50_000


def _plan(g: int, n: int) -> Any:
    grid = {"i": g, "j": g, "k": g}
    return load_module("tensorc").plan(SUBSCRIPTS, (n, n), (n, n), grid=grid)


def grid_for(tasks: int, n: int) -> tuple[int, dict[str, Any]]:
    """The grid size g whose plan has about ``tasks`` tasks, and the calibration data.

    Secant steps on log(tasks) against log(g), starting from g = 4 and g = 8, until a plan
    is within 5 % of ``tasks`` (at most 5 further plans); returns the closest g seen.
    """
    seen = {g: _plan(g, n).stats["tasks"] for g in (4, 8)}
    last, power = [4, 8], 3.0
    for _ in range(5):
        (g0, g1), (t0, t1) = last, (seen[last[0]], seen[last[1]])
        power = math.log(t1 / t0) / math.log(g1 / g0) if t1 != t0 else power
        g = max(1, min(n, round(g1 * (tasks / t1) ** (1 / power))))
        if g in seen:
            break
        seen[g] = _plan(g, n).stats["tasks"]
        last = [g1, g]
        if abs(seen[g] / tasks - 1) <= 0.05:
            break
    best = min(seen, key=lambda g: abs(seen[g] / tasks - 1))
    return best, {"tasks_by_grid": seen, "fitted_power": power}


def time_planning(g: int, n: int, repeats: int) -> dict[str, Any]:
    """Median wall time of planning a g x g x g blocked matmul, each call a fresh size."""
    block = max(1, n // g)
    sizes = (g * (block + k) for k in itertools.count())
    plans: list[Any] = []

    def call() -> None:
        size = next(sizes)
        plans[:] = [_plan(g, size)]

    times = measure(call, repeats=repeats, warmup=1)
    tasks = plans[0].stats["tasks"]
    median = statistics.median(times)
    return {
        "grid": g,
        "n": g * block,
        "tasks": tasks,
        "times_s": times,
        "median_s": median,
        "min_s": min(times),
        "tasks_per_second": tasks / median,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = make_parser(
        __doc__.splitlines()[0],
        {"n": (4096, "matrix size n (shapes only)"), "tasks": (100_000, "target task count")},
        systems=None,
        blas=False,
    )
    parser.add_argument("--grid", type=int, help="blocks per dimension g (skips calibration)")
    parser.add_argument(
        "--scaling",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time ~1/4 and ~1/2 of the target task count",
    )
    args = parser.parse_args(argv)
    payload: dict[str, Any] = {
        "benchmark": "planning",
        "args": vars(args),
        "subscripts": SUBSCRIPTS,
        "targets": {"max_seconds": MAX_SECONDS, "min_tasks_per_second": MIN_TASKS_PER_SECOND},
        "environment": environment(),
        "status": "ok",
        "error": None,
        "runs": [],
    }
    reason = require("tensorc", ("plan",))
    if reason:
        print(f"tensorc unavailable: {reason}")
        payload.update(status="unavailable", error=reason)
    else:
        try:
            _run(args, payload)
        except Exception as exc:  # reported, not raised: run_all summarises the JSON
            payload.update(status="ERROR", error=error_text(exc))
            print(f"<<< ERROR: {payload['error']}")
    if args.json:
        write_json(args.json, payload)
    return payload


def _run(args: argparse.Namespace, payload: dict[str, Any]) -> None:
    power = 3.0  # a blocked matmul has ~g^3 block products
    if args.grid:
        g = args.grid
    else:
        g, payload["calibration"] = grid_for(args.tasks, args.n)
        power = payload["calibration"]["fitted_power"]
        print(f"calibration: {payload['calibration']} -> g = {g}")
    grids = [g]
    if args.scaling:  # about 1/4 and 1/2 of the tasks
        grids = sorted({max(2, round(g * share ** (1 / power))) for share in (0.25, 0.5)} | {g})
    rows = []
    for grid in grids:
        run = time_planning(grid, args.n, args.repeats)
        payload["runs"].append(run)
        ok = run["median_s"] < MAX_SECONDS and run["tasks_per_second"] >= MIN_TASKS_PER_SECOND
        rows.append(
            [
                f"tc.plan {SUBSCRIPTS} n={run['n']} g={grid}",
                f"{run['tasks']:,}",
                fmt(run["median_s"], "{:.3f}"),
                fmt(run["min_s"], "{:.3f}"),
                f"{run['tasks_per_second']:,.0f}",
                "ok" if ok else "<<< MISSES TARGET",
            ]
        )
        print(f"  g={grid}: {run['tasks']:,} tasks, median {run['median_s']:.3f} s", flush=True)
    main_run = next(r for r in payload["runs"] if r["grid"] == g)
    payload["result"] = main_run
    headers = ["plan", "tasks", "median s", "min s", "tasks/s", "< 2 s and >= 50k tasks/s"]
    print()
    print(format_table(headers, rows))


if __name__ == "__main__":
    main()
