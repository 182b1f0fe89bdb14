"""Scheduling-throughput benchmark: ``tensorc.placement.schedule.schedule`` on small and
million-task graphs.

Default: plans MTTKRP ``ijk,jf,kf->if`` (N = 256, F = 100) with grid 32×32×32 (f = 1), lays
the operands out block-cyclically over a (2, 2) node grid, and times each scheduler on 4
nodes: one warm-up, then the median of ``--repeats``. Target: at least 100,000 tasks per
second on 4 nodes.

``--scale``: the planning-at-scale figures (issue 24). Plans the double contraction
``ijk,jkf->if`` at ``N = --scale-n`` (default 8192, F = 256) on ``--scale-nodes`` (default
1,024) simulated nodes from shapes alone, then times, median of ``--repeats`` each, lowering
the chosen plan to its task graph (2.1 million tasks) and LSHS on it with the grid's hints
(the compiled loop; ``--python`` also times the Python loop, which places the small
graphs). Target: LSHS ≥ 500,000 tasks/s on ≥ 1M tasks.

    python benchmarks/scheduling.py [--nodes 4] [--grid 32] [--repeats 5]
    python benchmarks/scheduling.py --scale [--scale-n 8192] [--scale-nodes 1024] [--python]
"""

from __future__ import annotations

import argparse
import statistics
import time

from planner_targets import problem_for

import tensorc as tc
from tensorc.placement import schedule as scheduling
from tensorc.placement.layout import block_cyclic_load_nodes
from tensorc.placement.schedule import SCHEDULERS, schedule
from tensorc.planning import distribution
from tensorc.planning.planners import search


def median_seconds(run, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def small(args) -> None:
    g = args.grid
    graph = tc.plan(
        "ijk,jf,kf->if",
        (256, 256, 256),
        (256, 100),
        (256, 100),
        grid={"i": g, "j": g, "k": g, "f": 1},
    ).graph
    loads = block_cyclic_load_nodes(graph, [(2, 2)] * 3)
    print(f"{len(graph.tasks)} tasks, {args.nodes} nodes")
    for name in SCHEDULERS:
        schedule(graph, args.nodes, name, load_nodes=loads)
        median = median_seconds(lambda n=name: schedule(graph, args.nodes, n, load_nodes=loads),
                                args.repeats)
        print(
            f"{name:12} median {median * 1e3:7.1f} ms  {len(graph.tasks) / median:12,.0f} tasks/s"
        )


def scale(args) -> None:
    n, nodes = args.scale_n, args.scale_nodes
    plan = search(problem_for("ijk,jkf->if", [(n, n, n), (n, n, 256)], nodes), "smt",
                  lower=False)
    problem = plan.problem
    def lower():
        problem._graphs.clear()  # lower afresh every time
        return problem.graph_of(plan.candidate)

    lowering = median_seconds(lower, args.repeats)
    graph = problem.graph_of(plan.candidate)
    tasks = len(graph.tasks)
    print(f"ijk,jkf->if N={n} F=256 on {nodes} nodes: {plan.candidate.describe()}; {tasks:,} tasks")
    print(f"  lowering      median {lowering:7.2f} s  {tasks / lowering:12,.0f} tasks/s")
    loads, outputs, hints, _ = distribution.layout(problem, plan.candidate)
    options = {"load_nodes": loads, "output_nodes": outputs, "task_hints": hints}
    loops = [("compiled", 0)] + ([("python", 10**12)] if args.python else [])
    for name, threshold in loops:
        scheduling.COMPILED_TASKS = threshold
        schedule(graph, nodes, "lshs", **options)  # warm-up (numba: import, cached compile)
        seconds = median_seconds(lambda: schedule(graph, nodes, "lshs", **options), args.repeats)
        print(f"  LSHS {name:8} median {seconds:7.2f} s  {tasks / seconds:12,.0f} tasks/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--grid", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--scale", action="store_true", help="the million-task figures")
    parser.add_argument("--scale-n", type=int, default=8192)
    parser.add_argument("--scale-nodes", type=int, default=1024)
    parser.add_argument("--python", action="store_true", help="--scale: time the Python loop")
    args = parser.parse_args()
    if args.scale:
        scale(args)
    else:
        small(args)


if __name__ == "__main__":
    main()
