"""Placement on a local multi-node Ray cluster: LSHS against round-robin and Ray's default.

Starts a private ``ray.cluster_utils.Cluster`` (``--nodes`` one-CPU nodes), makes the inputs
with ``tc.random`` (``--blocks`` blocks per dimension, block-cyclic over the nodes), and runs
MTTKRP (both forms) and the double contraction under each scheduler on the same task graph.
Prints, per benchmark and scheduler: modelled and measured inter-node bytes, the busiest
node's modelled and measured received bytes (first call on fresh inputs), and the median
time of repeated calls (where Ray's cached copies make later calls cheaper); then the
verdicts of the targets (docs/performance.md / issue 3):

- LSHS moves at most half the bytes round-robin moves (measured);
- LSHS's busiest receiver gets no more than under ``ray_default`` (measured);
- modelled bytes within 20 % of measured (under every pinned scheduler).

Usage: ``.venv/bin/python benchmarks/ray_placement.py [--n 128] [--f 32] [--blocks 4]
[--nodes 4] [--repeats 3] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from common import RAY_BENCHMARKS, finish_verdicts, ray_inputs

import tensorc as tc

SCHEDULERS = ("lshs", "round_robin", "ray_default")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=128)
    parser.add_argument("--f", type=int, default=32)
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    session = tc.init(num_nodes=args.nodes, measure=True)  # they report measured bytes
    print(f"{session.cluster.describe()}; N={args.n}, F={args.f}, {args.blocks} blocks per dim")
    rows, verdicts = [], []
    try:
        for name, (subscripts, names) in RAY_BENCHMARKS.items():
            # equal seeds give equal values: gather one set for numpy, and give every
            # scheduler a fresh set whose blocks sit only on their layout nodes (a gathered or
            # already-read block is cached by Ray where it was read, and costs nothing there)
            reference = ray_inputs(names, args.n, args.f, args.blocks)
            expected = np.einsum(subscripts, *[a.numpy() for a in reference], optimize=True)
            del reference
            got = {}
            for scheduler in SCHEDULERS:
                inputs = ray_inputs(names, args.n, args.f, args.blocks)
                result = tc.einsum(subscripts, *inputs, scheduler=scheduler)
                ok = np.allclose(result.numpy(), expected, rtol=1e-10)
                stats = tc.last_stats()
                times = []
                for _ in range(args.repeats):
                    started = time.perf_counter()
                    tc.einsum(subscripts, *inputs, scheduler=scheduler)
                    times.append(time.perf_counter() - started)
                row = {
                    "benchmark": name, "scheduler": scheduler, "check": ok,
                    "tasks": stats["tasks"],
                    "modelled_bytes": stats["inter_node_bytes"],
                    "measured_bytes": stats["measured_inter_node_bytes"],
                    "modelled_max_recv": stats["max_node_recv_bytes"],
                    "measured_max_recv": stats["measured_max_node_recv_bytes"],
                    "lower_bound_bytes": stats["lower_bound_bytes"],
                    "median_ms": statistics.median(times) * 1e3,
                }
                rows.append(row)
                got[scheduler] = row
            lshs, rr, default = got["lshs"], got["round_robin"], got["ray_default"]
            verdicts.append((name, "LSHS bytes <= 0.5 x round-robin (measured)",
                             lshs["measured_bytes"] <= 0.5 * rr["measured_bytes"]))
            verdicts.append((name, "LSHS busiest receiver <= ray_default's (measured)",
                             lshs["measured_max_recv"] <= default["measured_max_recv"]))
            for row in (lshs, rr):
                close = abs(row["measured_bytes"] - row["modelled_bytes"]) <= 0.2 * max(
                    row["modelled_bytes"], 1)
                verdicts.append((name, f"{row['scheduler']}: modelled within 20% of measured",
                                 close))
    finally:
        tc.shutdown()
    print(f"{'benchmark':32} {'scheduler':12} {'tasks':>6} {'modelled B':>12} "
          f"{'measured B':>12} {'max recv mod':>12} {'max recv meas':>13} {'ms':>8} check")
    for r in rows:
        print(f"{r['benchmark']:32} {r['scheduler']:12} {r['tasks']:6d} "
              f"{r['modelled_bytes']:12,d} {r['measured_bytes']:12,d} "
              f"{r['modelled_max_recv']:12,d} {r['measured_max_recv']:13,d} "
              f"{r['median_ms']:8.1f} {'OK' if r['check'] else 'WRONG'}")
    return finish_verdicts(args, rows, verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
