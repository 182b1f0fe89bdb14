"""The floor a block factorisation pays on Ray before any compute: Ray's own cost of moving a
distributed matrix's blocks to where a plan reads them, the calls' latency, and storing
those of its result's blocks tensorc stores (a final block too large for a call's reply
stays in the worker that made it until read: tensorc's held blocks).

On the private cluster ``tc.init(num_nodes=--nodes)`` makes, the input's blocks are made by a
plain actor on each node, cut and spread as ``benchmarks/linalg.py`` spreads them, then, on
the clock, Ray alone does what every plan of the factorisation must. No arithmetic: what is
measured is the object store's transfers and stores and the calls' latency. Per case
(``--cases``):

- ``cholesky`` (order ``n`` in ``--sizes``, 4 x 4 blocks of ``n / 4`` laid out as
  ``tc.asarray`` lays them out, block-cyclic over a 2 x 2 node grid on 4 nodes): one call
  on node 0 reads the 10 blocks of the lower triangle, the blocks a Cholesky reads (7 from
  other nodes), and keeps them in its actor (the factor's 10 blocks, held), returning one
  small block, waited for where it is. Two ways, both printed: Ray fetches the other nodes'
  blocks as the call's arguments, or the call pulls them from the actors of the nodes
  holding them, as tensorc's calls pull input blocks (``runtime/ray/peer_blocks.py``);
- ``solve`` (``--solve-sizes``): one call reading all 16 blocks (12 from other nodes: LU
  reads both triangles) and the right-hand side's 4, returning the solution's 4 blocks of
  ``n / 4`` x 1; the same two ways (the right-hand side's blocks, smaller than tensorc
  offers, through Ray either way);
- ``tsqr`` (``--tsqr-rows`` x ``--tsqr-cols`` in 8 row blocks, two on each node): the
  cheaper of the two ways any TSQR plan can go. *Gathered*: one call on node 0 reads all 8
  blocks (6 from other nodes), keeps them (Q's 8 blocks, held) and returns R. *Tree*: a
  call on each node reads its own 2 blocks and returns one small block (its R), keeping its
  Q's blocks in the actor's memory (no store); a call on node 0 reads the 4 small blocks
  and returns 4; a call on each node reads its small block, its 2 blocks of Q staying
  held. Both are printed.

Printed per case and size: the median of ``--repeats`` timed runs after one warm-up, each on
fresh blocks (made and not fetched: the driver's wait leaves them where they were made),
and the machine's mean busy core-seconds a run (every process). Compare them with tensorc's
runs of the same factorisation (``benchmarks/linalg.py``): a cluster run's copies and stores
overlap its arithmetic, so its time is not the floor's plus the local run's, but its CPU
is at least the floor's plus its arithmetic's, and a run takes at least its CPU over the
machine's cores (``linalg.py`` prints that bound, and says how it counts the arithmetic).
Usage: ``.venv/bin/python benchmarks/ray_floor.py
[--cases cholesky,solve,tsqr] [--sizes 1536 4096] [--solve-sizes 1536 4096] [--tsqr-rows 65536]
[--tsqr-cols 40] [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial

import common
import numpy as np

import tensorc as tc
from tensorc.placement.layout import own_node

BLOCKS = 4  # cholesky and solve: BLOCKS x BLOCKS blocks
NODES = 4  # the skeletons' layouts are tensorc's on this many nodes (a 2 x 2 node grid)
TSQR_BLOCKS = 8  # tsqr: row blocks, as benchmarks/linalg.py cuts them


def _returns(made: list):
    """An actor method's values as Ray hands them back: one, or a list for several."""
    return made if len(made) > 1 else made[0]


def node_actors():
    """One plain actor per node, in tensorc's node order (node 0 is the driver's, where a
    tensorc run on this cluster puts its node 0)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    class Holder:
        def __init__(self) -> None:
            self.kept: list = []
            self.pulled = (0, 0)

        def make(self, count: int, shape: tuple, seed: int):
            rng = np.random.default_rng(seed)
            return _returns([rng.random(shape) for _ in range(count)])

        def small_blocks(self, outputs: int, shape: tuple, *blocks):
            return _returns([np.ones(shape) for _ in range(outputs)])

        def leaf(self, cols: int, *blocks):
            """Keep each block (a factor's block, held in this process: not stored; a
            run's results are written by its arithmetic, which is not the floor's) and
            return one small block."""
            self.kept = list(blocks)
            return np.ones((cols, cols))

        def endpoint(self):
            """The address of the block server tensorc's node workers run (its direct
            path: ``runtime/ray/peer_blocks.py``), started in this actor."""
            from tensorc.runtime.ray import peer_blocks

            return peer_blocks.serve()

        def offer(self, refs: list) -> int:
            """Offer ``refs``, in place of what was offered before (a run's blocks are
            let go when the next run's are offered)."""
            from tensorc.runtime.ray import peer_blocks

            peer_blocks.OFFERED.clear()
            return peer_blocks.offer(refs)

        def pulling(self, method: str, head: tuple, *blocks):
            """``method`` (:meth:`leaf` or :meth:`small_blocks`) on ``head`` then
            ``blocks``, those other nodes hold pulled from them (tensorc's direct path)."""
            from tensorc.runtime.ray.peer_blocks import pulled_args

            blocks, self.pulled = pulled_args(blocks)
            return getattr(self, method)(*head, *blocks)

        def last_pulled(self) -> tuple[int, int]:
            """``(bytes pulled, blocks read through Ray)`` by its last pulling call."""
            return self.pulled

        def finish(self, small):
            """The last call of a node's tree: its kept blocks stay held."""
            return small.shape

        def ready(self) -> bool:
            return True

    from tensorc.runtime.ray.cluster import connected

    holder = ray.remote(num_cpus=0)(Holder)
    nodes = connected().node_ids  # tensorc's node order: node 0 is the driver's
    actors = [holder.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
        node, soft=False)).remote() for node in nodes]
    ray.get([a.ready.remote() for a in actors])
    return actors


def _made_on(actors, nodes_of: list[int], shape: tuple, seed: int) -> list:
    """Blocks of ``shape``, block ``q`` made on node ``nodes_of[q]``; waited for."""
    import ray

    per_node = [nodes_of.count(node) for node in range(len(actors))]
    made = []
    for k, actor in enumerate(actors):
        if not per_node[k]:
            made.append([])
            continue
        refs = actor.make.options(num_returns=per_node[k]).remote(per_node[k], shape,
                                                                   seed * 100 + k)
        made.append(list(refs) if per_node[k] > 1 else [refs])
    blocks = [made[node].pop(0) for node in nodes_of]
    # made, and not fetched here: a fetch would copy every block to the driver's node
    ray.wait(blocks, num_returns=len(blocks), fetch_local=False)
    return blocks


def _spread(actors, count: int, shape: tuple, seed: int) -> list:
    """``count`` blocks of ``shape`` made block-cyclically over the actors' nodes (block
    ``k`` on node ``k % nodes``), as ``tc.asarray`` spreads a column of blocks."""
    return _made_on(actors, [k % len(actors) for k in range(count)], shape, seed)


def _square_grid(nodes: int) -> dict[tuple[int, int], int]:
    """The node of each block of a BLOCKS x BLOCKS grid as ``tc.asarray`` lays it out on
    ``nodes`` nodes (block-cyclic over its default node grid: 2 x 2 for 4 nodes)."""
    return {(i, j): own_node((BLOCKS, BLOCKS), (i, j), nodes)
            for i in range(BLOCKS) for j in range(BLOCKS)}


def _read_blocks(grid: dict[tuple[int, int], int], solve: bool) -> list[tuple[int, int]]:
    """The blocks of ``grid`` the factorisation reads: LU all, Cholesky the lower triangle."""
    return [(i, j) for (i, j) in grid if solve or i >= j]


class Runs(list):
    """Seconds of each run (the first, a warm-up, first), with ``cpu``: the machine's busy
    core-seconds during each (``benchmarks/common.py``; empty without ``/proc/stat``)."""

    def __init__(self, seconds=(), cpu=()) -> None:
        super().__init__(seconds)
        self.cpu: list[float] = list(cpu)

    @property
    def median(self) -> float:
        """The median seconds of the timed runs (the warm-up left out)."""
        return statistics.median(self[1:])

    @property
    def mean_cpu(self) -> float | None:
        """The mean core-seconds of the timed runs (``None`` without a count)."""
        return statistics.fmean(self.cpu[1:]) if len(self.cpu) > 1 else None


def _timed(run, repeats: int) -> Runs:
    """The runs' :class:`Runs`; ``run(seed)`` makes its blocks, then returns a function that
    does the timed part and waits for it."""
    times = Runs()
    for seed in range(repeats + 1):
        timed = run(seed)
        with common.machine_cpu(times.cpu):
            started = time.perf_counter()
            timed()
            times.append(time.perf_counter() - started)
    return times


def cholesky_floors(actors, n: int, repeats: int, solve: bool = False) -> dict[str, Runs]:
    """One call on node 0 reading the blocks the factorisation reads (the Cholesky: the
    lower triangle's 10; the solve's LU: all 16, and the right-hand side's 4), laid out as
    ``tc.asarray`` lays them out, and keeping the factor's 10 blocks (a solve: returning
    the solution's 4, small enough for the call's reply). Two ways: Ray fetching the
    blocks from other nodes as the call's arguments (``through Ray``), and the call pulling
    them from the actors of the nodes holding them, which offered them beforehand as
    ``tc.asarray`` has tensorc's node workers offer them (``direct``)."""
    import ray

    from tensorc.runtime.ray.peer_blocks import DIRECT_BYTES, PeerRead

    edge = n // BLOCKS
    grid = _square_grid(len(actors))
    nodes_of = [grid[c] for c in _read_blocks(grid, solve)]
    endpoints = ray.get([actor.endpoint.remote() for actor in actors])

    def run(direct: bool, seed: int):
        blocks = _made_on(actors, nodes_of, (edge, edge), seed)
        if solve:
            blocks += _spread(actors, BLOCKS, (edge, 1), seed + 50)
        holders = nodes_of + [k % len(actors) for k in range(BLOCKS)] if solve else nodes_of
        shapes = [(edge, edge)] * len(nodes_of) + [(edge, 1)] * (len(holders) - len(nodes_of))
        if direct:  # offered off the clock, as tc.asarray offers them: big blocks only
            pulled = [h != 0 and np.prod(shape) * 8 >= DIRECT_BYTES
                      for h, shape in zip(holders, shapes, strict=True)]
            ray.get([actor.offer.remote([b for b, h, p in zip(blocks, holders, pulled,
                                                                strict=True) if h == k and p])
                     for k, actor in enumerate(actors)])
            blocks = [PeerRead(endpoints[h], [b]) if p else b
                      for b, h, p in zip(blocks, holders, pulled, strict=True)]

        def timed():
            method, head, returns = (("small_blocks", (BLOCKS, (edge, 1)), BLOCKS) if solve
                                     else ("leaf", (1,), 1))
            if direct:
                made = actors[0].pulling.options(num_returns=returns).remote(
                    method, head, *blocks)
            else:
                made = getattr(actors[0], method).options(num_returns=returns).remote(
                    *head, *blocks)
            made = list(made) if returns > 1 else [made]
            ray.wait(made, num_returns=len(made), fetch_local=False)
        return timed

    return {"through Ray": _timed(partial(run, False), repeats),
            "direct": _timed(partial(run, True), repeats)}


def tsqr_floors(actors, rows: int, cols: int, repeats: int) -> dict[str, Runs]:
    """The gathered and the tree skeletons of the module docstring."""
    import ray

    nodes = len(actors)
    shape = (-(-rows // TSQR_BLOCKS), cols)

    def gathered(seed: int):
        blocks = _spread(actors, TSQR_BLOCKS, shape, seed)

        def timed():
            ray.wait([actors[0].leaf.remote(cols, *blocks)], fetch_local=False)
        return timed

    def tree(seed: int):
        blocks = _spread(actors, TSQR_BLOCKS, shape, seed)
        own = [blocks[k::nodes] for k in range(nodes)]

        def timed():
            smalls = [actor.leaf.remote(cols, *own[k]) for k, actor in enumerate(actors)]
            back = actors[0].small_blocks.options(num_returns=nodes).remote(
                nodes, (cols, cols), *smalls)
            made = [actor.finish.remote(back[k]) for k, actor in enumerate(actors)]
            ray.wait(made, num_returns=len(made), fetch_local=False)
        return timed

    return {"gathered": _timed(gathered, repeats), "tree": _timed(tree, repeats)}


def _report(label: str, times: Runs) -> str:
    cpu = (f"; the machine's CPU {times.mean_cpu * 1e3:.1f} core-ms a run"
           if times.mean_cpu is not None else "")
    return (f"{label}: median {times.median * 1e3:.1f} ms (min "
            f"{min(times[1:]) * 1e3:.1f}, first {times[0] * 1e3:.1f}){cpu}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="cholesky,solve,tsqr",
                        type=lambda text: [c for c in text.split(",") if c])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1536, 4096])
    parser.add_argument("--solve-sizes", type=int, nargs="+", default=[1536, 4096])
    parser.add_argument("--tsqr-rows", type=int, default=65536)
    parser.add_argument("--tsqr-cols", type=int, default=40)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    tc.init(num_nodes=args.nodes)
    actors = node_actors()
    grid = _square_grid(args.nodes)

    def remote(solve: bool) -> int:  # blocks the call on node 0 reads from other nodes
        return sum(1 for c in _read_blocks(grid, solve) if grid[c] != 0)

    if "cholesky" in args.cases:
        for n in args.sizes:
            label = (f"cholesky n={n}: one call reading the {len(_read_blocks(grid, False))}"
                     f" blocks of {n // BLOCKS}x{n // BLOCKS} of the lower triangle "
                     f"({remote(False)} from other nodes) and keeping 10")
            for way, times in cholesky_floors(actors, n, args.repeats).items():
                print(_report(f"{label}, {way}", times))
    if "solve" in args.cases:
        for n in args.solve_sizes:
            label = (f"solve n={n}: one call reading {len(grid)} blocks "
                     f"({remote(True)} from other nodes) + {BLOCKS} from {args.nodes} "
                     f"nodes and returning {BLOCKS} of {n // BLOCKS}x1")
            for way, times in cholesky_floors(actors, n, args.repeats, solve=True).items():
                print(_report(f"{label}, {way}", times))
    if "tsqr" in args.cases:
        found = tsqr_floors(actors, args.tsqr_rows, args.tsqr_cols, args.repeats)
        label = f"tsqr {args.tsqr_rows}x{args.tsqr_cols} in {TSQR_BLOCKS} row blocks"
        for way, times in found.items():
            print(_report(f"{label}, {way}", times))
        best = min(times.median for times in found.values())
        print(f"{label}: floor (the cheaper way) {best * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
