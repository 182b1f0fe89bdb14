"""Scheduling-throughput benchmark: ``tensorc.placement.schedule.schedule`` on a ~67k-task graph.

Plans MTTKRP ``ijk,jf,kf->if`` (N = 256, F = 100) with grid 32×32×32 (f = 1), lays the
operands out block-cyclically over a (2, 2) node grid, and times each scheduler on 4
nodes: one warm-up, then the median of ``--repeats``. Target (docs/performance.md and the
runtime issue): at least 100,000 tasks per second on 4 nodes.

    python benchmarks/scheduling.py [--nodes 4] [--grid 32] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import tensorc as tc
from tensorc.placement.layout import block_cyclic_load_nodes
from tensorc.placement.schedule import SCHEDULERS, schedule


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--grid", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
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
        times = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            schedule(graph, args.nodes, name, load_nodes=loads)
            times.append(time.perf_counter() - started)
        median = statistics.median(times)
        print(
            f"{name:12} median {median * 1e3:7.1f} ms  {len(graph.tasks) / median:12,.0f} tasks/s"
        )


if __name__ == "__main__":
    main()
