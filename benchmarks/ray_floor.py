"""The floor a block factorisation pays on Ray before any compute: Ray's own cost of one node
reading a distributed matrix's blocks and keeping a factor's blocks in its object store.

On the private cluster ``tc.init(num_nodes=--nodes)`` makes, four blocks of ``n / 4`` x
``n / 4`` float64 are made by a plain actor on each node (16 blocks, cut as the Cholesky
input of ``benchmarks/linalg.py``), then, on the clock, one call on node 0's actor reads all
16 (12 from other nodes) and returns 10 new blocks (a lower factor's), waited for where they
are. No arithmetic: what is measured is the object store's transfers and stores and one
call's latency, which every plan of the factorisation pays at least once (its inputs arrive
and its result is stored). Printed per ``n`` in ``--sizes``: the median of ``--repeats``
timed calls after one warm-up, each on fresh blocks.

Compare it with tensorc's local time for the same factorisation (``benchmarks/linalg.py``):
a cluster run cannot take less than the floor plus the compute shared by the machine's
cores. Usage: ``.venv/bin/python benchmarks/ray_floor.py [--sizes 1536 4096] [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import tensorc as tc

BLOCKS = 4


def _node_actors():
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    class Holder:
        def make(self, count: int, edge: int, seed: int):
            rng = np.random.default_rng(seed)
            return [rng.random((edge, edge)) for _ in range(count)]

        def factor_blocks(self, outputs: int, *blocks):
            made = [blocks[k % len(blocks)].copy() for k in range(outputs)]
            return made if outputs > 1 else made[0]

        def ready(self) -> bool:
            return True

    holder = ray.remote(num_cpus=0)(Holder)
    nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    actors = [holder.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
        node, soft=False)).remote() for node in nodes]
    ray.get([a.ready.remote() for a in actors])
    return actors


def floor_seconds(actors, n: int, repeats: int) -> list[float]:
    """Seconds of each timed call (the first, a warm-up, included first)."""
    import ray

    edge = n // BLOCKS
    per_node = BLOCKS * BLOCKS // len(actors)
    outputs = BLOCKS * (BLOCKS + 1) // 2
    times = []
    for seed in range(repeats + 1):
        blocks = []
        for k, actor in enumerate(actors):
            blocks += actor.make.options(num_returns=per_node).remote(per_node, edge,
                                                                       seed * 100 + k)
        ray.wait(blocks, num_returns=len(blocks))
        started = time.perf_counter()
        made = actors[0].factor_blocks.options(num_returns=outputs).remote(outputs, *blocks)
        ray.wait(made, num_returns=len(made), fetch_local=False)
        times.append(time.perf_counter() - started)
        del made, blocks
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1536, 4096])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    tc.init(num_nodes=args.nodes)
    actors = _node_actors()
    for n in args.sizes:
        times = floor_seconds(actors, n, args.repeats)
        timed = times[1:]
        print(f"n={n}: one call reading {BLOCKS * BLOCKS} blocks of {n // BLOCKS}x"
              f"{n // BLOCKS} from {args.nodes} nodes and storing 10: median "
              f"{statistics.median(timed) * 1e3:.1f} ms (min {min(timed) * 1e3:.1f}, "
              f"first {times[0] * 1e3:.1f})")


if __name__ == "__main__":
    main()
