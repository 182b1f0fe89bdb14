"""Distributed plans as data: the problem, a candidate plan, its checker and its model.

Contract:

- a :class:`Problem` is one contraction after the algebraic passes (its final IR), the
  number of nodes ``P``, the per-node memory budget and, for operands already on the
  cluster, the node of each of their blocks;
- a :class:`Candidate` is a plan's free choices: the *index grid* ``p`` (nodes along each
  index; ``∏ p_i = P``) and the *block counts* ``c`` (blocks along each index, a multiple
  of ``p_i``). The operands the plan lays out are placed by the grid
  (:func:`tensorc.runtime.layout.grid_node`); every compute task and every output block is
  *offered* its grid node as a placement option, and LSHS decides (it may keep a block
  where its inputs are). Replication of a small operand is what the grid does when it
  splits an index the operand lacks: each node along that axis receives it;
- :func:`check` refuses an illegal candidate with the reason (a :class:`PlanError`);
- :func:`model` is the one cost model every search uses (:mod:`tensorc.passes.cost`): it
  lowers the candidate's task graph (cached per block counts), lays the loads out, runs
  the LSHS simulation with the grid's hints, and prices the result
  (:func:`tensorc.passes.cost.distributed_cost`). It touches coordinates only, never data;
- :func:`estimate` is the closed-form counterpart (owner-computes traffic on the grid) the
  SMT search encodes; the model, not the estimate, decides between candidates.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from tensorc.codegen.lower import lower
from tensorc.codegen.taskgraph import LOAD, TaskGraph
from tensorc.errors import PlanError
from tensorc.ir.keys import key_of
from tensorc.ir.nodes import Program, Scan, post_order
from tensorc.ir.stages import stage_parts, stage_roots
from tensorc.passes.blocking import Blocking
from tensorc.passes.cost import CostReport, distributed_cost
from tensorc.passes.lower_bound import communication_lower_bound
from tensorc.runtime.layout import block_pieces, grid_node, output_block_coords
from tensorc.runtime.schedule import Schedule, schedule

DEFAULT_NODE_MEMORY = 8 << 30  # bytes per node when the caller gives no budget

Grid = tuple[tuple[str, int], ...]


@dataclass(frozen=True, order=True)
class Candidate:
    """A plan's free choices: nodes along each index and blocks along each index.

    Both are ``((index, value), ...)`` sorted by index; ``grid`` names every index the
    problem has (1 where not split), so equal plans are equal values.
    """

    grid: Grid
    counts: Grid

    def grid_of(self, index: str) -> int:
        return dict(self.grid)[index]

    def count_of(self, index: str) -> int:
        return dict(self.counts)[index]

    def describe(self) -> str:
        grid = " x ".join(f"{i}:{p}" for i, p in self.grid if p > 1) or "(one node)"
        counts = ", ".join(f"{i}:{c}" for i, c in self.counts)
        return f"grid {grid}; blocks {counts}"


@dataclass(frozen=True)
class Array:
    """An array of the planned contraction: its index names and its elements."""

    name: str
    dims: tuple[str, ...]
    elements: int


@dataclass(frozen=True)
class Source:
    """Where an operand already on the cluster lives: its block boundaries per dimension
    (``(0, …, n)``) and the node of each block."""

    bounds: tuple[tuple[int, ...], ...]
    nodes: Mapping[tuple[int, ...], int]

    def node_at(self, starts: tuple[int, ...]) -> int:
        """The node of the block holding the element at ``starts``."""
        coords = tuple(
            max(0, bisect.bisect_right(b, s) - 1) if len(b) > 1 else 0
            for b, s in zip(self.bounds, starts, strict=True)
        )
        return self.nodes[coords]

    def pieces(self, slices: tuple[slice, ...]) -> list[tuple[int, int]]:
        """``(node, elements)`` of every stored block overlapping ``slices``."""
        return [
            (self.nodes[coords], math.prod(s.stop - s.start for s in part))
            for coords, part, _ in block_pieces(self.bounds, slices)
        ]

    def block_sizes(self, dims: tuple[str, ...]) -> dict[str, int]:
        """Block size per index, when every block but the last is the same size."""
        out = {}
        for index, b in zip(dims, self.bounds, strict=True):
            steps = {b[k + 1] - b[k] for k in range(len(b) - 2)}
            if len(b) > 1 and len(steps) <= 1:
                out[index] = steps.pop() if steps else max(b[-1] - b[0], 1)
        return out


@dataclass
class Problem:
    """One contraction to distribute over ``nodes`` nodes (see the module contract)."""

    name: str
    program: Program
    paths: dict
    optimize: object
    nodes: int
    memory_bytes: int = DEFAULT_NODE_MEMORY
    placed: Mapping[int, Source] | None = None
    """Operand position → where it lives, for operands already on the cluster."""
    placed_counts: Mapping[str, int] | None = None
    """Blocks along an index fixed in advance (an operand computed in its layout, or a
    forced blocking)."""
    placed_blocks: Mapping[str, int] | None = None
    """Block sizes of the indices in ``placed_counts`` (their blocks are the operand's)."""
    repartition: frozenset[int] = frozenset()
    """Positions in ``placed`` that the plan re-lays out: their blocks are cut and placed
    as the grid says, paying for the pieces that are elsewhere."""
    _graphs: dict = field(default_factory=dict, repr=False)

    @property
    def sizes(self) -> dict[str, int]:
        return self.program.size_of

    @property
    def indices(self) -> tuple[str, ...]:
        return tuple(sorted(self.sizes))

    @property
    def itemsize(self) -> int:
        return np.dtype(self.program.dtype).itemsize

    def stage_arrays(self) -> list[tuple[list[Array], Array]]:
        """Per stage (children first): its input arrays and its output array."""
        sizes = self.sizes
        stages = []
        for root in stage_roots(self.program.output):
            inputs, _, output, _ = stage_parts(root)
            arrays = [_array(node, sizes) for node in inputs]
            stages.append((arrays, Array("out", tuple(output), _elements(output, sizes))))
        return stages

    def contraction(self) -> tuple[list[tuple[str, ...]], tuple[str, ...]]:
        """The contraction as planned: the operands of its last stage (after reductions
        pushed into operands) and its output, as index tuples."""
        stages = self.stage_arrays()
        if not stages:
            scans = [n for n in post_order(self.program.output) if isinstance(n, Scan)]
            dims = tuple(key_of(scans[0])) if scans else ()
            return [dims], dims
        inputs, output = stages[-1]
        return [a.dims for a in inputs], output.dims

    def even_split(self) -> bool:
        """Whether some grid splits every index into a multiple of its nodes (else the
        problem is too small for ``nodes`` and some nodes get no blocks along an index)."""
        if "_even" not in self.__dict__:
            fixed = self.placed_counts or {}
            reachable = {1}
            for index in self.indices:
                size = max(self.sizes[index], 1)
                usable = [
                    p for p in range(1, self.nodes + 1)
                    if self.nodes % p == 0 and (index in fixed or any(
                        achievable(self.sizes[index], p * m) for m in range(1, size // p + 1)))
                ]
                reachable = {r * p for r in reachable for p in usable if self.nodes % (r * p) == 0}
            self.__dict__["_even"] = self.nodes in reachable
        return self.__dict__["_even"]

    def lower_bound_bytes(self) -> int:
        """The communication lower bound of the contraction as planned (bytes)."""
        operands, output = self.contraction()
        return communication_lower_bound(operands, output, self.sizes, self.nodes, self.itemsize)

    def graph(self, counts: Grid) -> TaskGraph:
        """The task graph for block counts ``counts`` (lowered once per counts)."""
        graph = self._graphs.get(counts)
        if graph is None:
            sizes = self.sizes
            fixed = self.placed_blocks or {}
            block = tuple(
                (i, fixed.get(i) or max(1, math.ceil(sizes[i] / c))) for i, c in counts
            )
            blocking = Blocking(sizes=tuple(sorted(sizes.items())), block=block)
            graph = lower(self.program, blocking, self.optimize, self.paths)
            self._graphs[counts] = graph
        return graph


def _elements(dims, sizes) -> int:
    return math.prod(sizes[i] for i in dims)


def _array(node, sizes) -> Array:
    dims = tuple(key_of(node))
    name = node.tensor if isinstance(node, Scan) else "tmp"
    return Array(name, dims, _elements(dims, sizes))


def achievable(size: int, count: int) -> bool:
    """Whether cutting ``size`` into blocks of ``ceil(size / count)`` gives ``count``
    blocks (so every node along the index gets the same number of blocks)."""
    if count < 1 or size < 1:
        return count == 1
    return math.ceil(size / math.ceil(size / count)) == count


def check(problem: Problem, candidate: Candidate) -> None:
    """Refuse an illegal candidate with the reason.

    Raises:
        PlanError: an index the problem lacks or misses; a grid whose product is not the
            node count; a count that is not a positive multiple of the grid along its
            index, that exceeds the extent or that the extent cannot be cut into evenly;
            a count that differs from the blocking of an operand already on the cluster.
            (A problem too small for an even split, :meth:`Problem.even_split`, may leave
            counts that are not multiples of the grid.)
    """
    sizes = problem.sizes
    for what, items in (("grid", candidate.grid), ("counts", candidate.counts)):
        names = [i for i, _ in items]
        if sorted(names) != sorted(sizes) or len(set(names)) != len(names):
            raise PlanError(
                f"{what} names indices {', '.join(names) or 'none'} but the contraction has "
                f"{', '.join(sorted(sizes)) or 'none'}"
            )
    product = math.prod(p for _, p in candidate.grid)
    if product != problem.nodes:
        raise PlanError(
            f"{candidate.describe()}: the grid spans {product} nodes, not {problem.nodes}"
        )
    grid = dict(candidate.grid)
    fixed = problem.placed_counts or {}
    for index, count in candidate.counts:
        p = grid[index]
        if p < 1 or count < 1:
            raise PlanError(f"index '{index}': grid {p} and count {count} must be positive")
        if index in fixed:
            continue  # checked below: the operand's own blocking, whatever the grid
        if count % p and problem.even_split():
            raise PlanError(
                f"index '{index}': {count} blocks do not divide over {p} nodes along it"
            )
        if count > max(sizes[index], 1):
            raise PlanError(
                f"index '{index}': {count} blocks but the extent is {sizes[index]}"
            )
        if index not in (problem.placed_blocks or {}) and not achievable(sizes[index], count):
            raise PlanError(
                f"index '{index}': extent {sizes[index]} cannot be cut into {count} "
                "blocks of one size"
            )
    for index, count in fixed.items():
        if dict(candidate.counts)[index] != count:
            raise PlanError(
                f"index '{index}': an operand on the cluster has {count} blocks along it, "
                f"the candidate {dict(candidate.counts)[index]} (repartition it first)"
            )


@dataclass
class Modelled:
    """A candidate, its task graph, its simulated schedule and its price."""

    candidate: Candidate
    graph: TaskGraph
    schedule: Schedule
    report: CostReport
    load_nodes: dict[int, int]
    output_nodes: list[int]


def layout(problem: Problem, candidate: Candidate, graph: TaskGraph):
    """Load nodes, output nodes and compute-task hints of ``graph`` under the grid, and the
    bytes each node receives to repartition operands (``problem.repartition``).

    Loads of an operand computed in its layout sit where its data is (the node of the
    block holding the load's first element, as the Ray executor stitches there); every
    other load sits on its grid node."""
    grid = candidate.grid
    placed = problem.placed or {}
    load_nodes = {}
    moved = [0] * problem.nodes
    for index, task in enumerate(graph.tasks):
        if task.kind != LOAD:
            continue
        position, slices = task.source
        source = placed.get(position)
        if source is not None and position not in problem.repartition:
            load_nodes[index] = source.node_at(tuple(s.start for s in slices))
            continue
        node = grid_node(*graph.task_dims(index), grid)
        load_nodes[index] = node
        if source is not None:
            moved[node] += sum(n for holder, n in source.pieces(slices) if holder != node)
    final_dims = tuple(key_of(problem.program.output))
    output_nodes = [grid_node(final_dims, c, grid) for c in output_block_coords(graph)]
    hints = {
        index: grid_node(*graph.task_dims(index), grid)
        for index, task in enumerate(graph.tasks)
        if task.kind != LOAD
    }
    itemsize = problem.itemsize
    return load_nodes, output_nodes, hints, [m * itemsize for m in moved]


def model(problem: Problem, candidate: Candidate) -> Modelled:
    """Price ``candidate`` by simulating LSHS on its task graph (module contract)."""
    check(problem, candidate)
    graph = problem.graph(candidate.counts)
    load_nodes, output_nodes, hints, moved = layout(problem, candidate, graph)
    if graph.outputs and graph.tasks[graph.outputs[0][0]].kind == LOAD:
        output_nodes = [load_nodes[t] for t, _ in graph.outputs]
    placed = schedule(
        graph, problem.nodes, "lshs",
        load_nodes=load_nodes, output_nodes=output_nodes, task_hints=hints,
    )
    report = distributed_cost(graph, placed, problem.memory_bytes, moved)
    return Modelled(candidate, graph, placed, report, load_nodes, output_nodes)


def estimate(problem: Problem, candidate: Candidate) -> float:
    """Closed-form elements the busiest node receives if every stage ran on its grid box:
    per array of every stage, ``|A| / ∏_{i∈A} p_i`` (what one node's box needs) minus
    ``|A| / P`` when the array has at least as many blocks per grid cell as the grid has
    nodes along the axes it lacks (so each node owns its share), else minus nothing."""
    grid = dict(candidate.grid)
    counts = dict(candidate.counts)
    total = 0.0
    for arrays, output in problem.stage_arrays():
        for array in [*arrays, output]:
            total += array_estimate(array, grid, counts, problem.nodes)
    return total


def array_estimate(array: Array, grid, counts, nodes: int) -> float:
    """One array's term of :func:`estimate`."""
    across = math.prod(grid[i] for i in set(array.dims))
    per_cell = math.prod(counts[i] / grid[i] for i in set(array.dims))
    owned = array.elements / nodes if per_cell * across >= nodes else 0.0
    return max(0.0, array.elements / across - owned)
