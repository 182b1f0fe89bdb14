"""Distributed plans as data: the problem, a candidate plan, its checker and its model.

Contract:

- a :class:`Problem` is one contraction after the algebraic passes (its final IR), the
  number of nodes ``P``, the per-node memory budget and, for operands already on the
  cluster, the node of each of their blocks;
- a :class:`Candidate` is a plan's free choices: the *index grid* ``p`` (nodes along each
  index; ``∏ p_i`` is one of :meth:`Problem.grid_sizes`: ``P``, or fewer with the rest
  idle) and the *block counts* ``c`` (blocks along each index, a multiple
  of ``p_i``). Every array the plan lays out — inputs given as shapes or numpy,
  intermediates, the output — is placed by the grid
  (:func:`tensorc.placement.layout.grid_nodes`); operands already on the cluster stay where
  they are unless the plan repartitions them. Every compute task runs on its iteration
  block's grid node unless a node already holds all its inputs, and output blocks are
  offered their grid node (the LSHS hint rule, :mod:`tensorc.placement.schedule`).
  Replication of a small operand is what the grid does when it splits an index the
  operand lacks: each node along that axis receives it;
- :func:`check` refuses an illegal candidate with the reason (a :class:`PlanError`),
  including the memory rule: no array's block over ``1 / BLOCK_MEMORY_SHARE`` of a node's
  budget (:func:`oversized_block`);
- :func:`model` is the task-level cost model (:mod:`tensorc.planning.cost`): it lowers the
  candidate's task graph (cached per block counts with the blocks' coordinates,
  :class:`Lowered`, least recently used dropped beyond :data:`GRAPH_CACHE_TASKS` tasks),
  lays the blocks out, runs the LSHS simulation with the grid's hints, and prices the
  result (:func:`tensorc.planning.cost.distributed_cost`). It touches coordinates only, never
  data, and its result does not depend on what is cached;
- :func:`price` is what every search prices with: the same figures in closed form
  (:mod:`tensorc.planning.symbolic_cost`, no task graph) where the closed form applies,
  else :func:`model`; it returns a :class:`Priced`. :func:`lowered_plan` lowers and
  simulates the chosen one;
- :func:`estimate` and :func:`predicted_cost` are the closed-form counterparts
  (owner-computes traffic on the grid, tasks, average compute; computed for many
  candidates at once by :mod:`tensorc.planning.prediction`) the searches rank candidates
  with; the model, not the prediction, decides between candidates.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from tensorc.codegen.blocking import Blocking
from tensorc.codegen.lower import lower_to_tasks
from tensorc.codegen.reduce_scatter import Scatter
from tensorc.codegen.taskgraph import KIND_CODE, LOAD, TaskGraph, task_source
from tensorc.errors import PlanError
from tensorc.ir.keys import key_of
from tensorc.ir.nodes import Function, Scan, post_order
from tensorc.ir.stages import stage_parts, stage_roots
from tensorc.placement.blocks import Blocks
from tensorc.placement.layout import NodeMap, grid_nodes, output_block_coords, prime_factors
from tensorc.placement.schedule import Schedule, schedule
from tensorc.planning import prediction, symbolic_cost
from tensorc.planning.cost import CostReport, distributed_cost
from tensorc.planning.lower_bound import communication_lower_bound
from tensorc.planning.reduce_scatter import scatter_for

DEFAULT_NODE_MEMORY = 8 << 30  # bytes per node when the caller gives no budget
BLOCK_MEMORY_SHARE = 4  # an array's largest block may take at most 1/4 of a node's budget
GRAPH_CACHE_TASKS = 400_000  # lowered tasks a problem keeps cached (least recent go first)

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
class PlannedArray:
    """An array of the planned contraction: its index names and its elements."""

    name: str
    dims: tuple[str, ...]
    elements: int


@dataclass
class Problem:
    """One contraction to distribute over ``nodes`` nodes (see the module contract)."""

    name: str
    program: Function
    nodes: int
    memory_bytes: int = DEFAULT_NODE_MEMORY
    placed: Mapping[int, Blocks] | None = None
    """Operand position → where it lives, for operands already on the cluster."""
    placed_counts: Mapping[str, int] | None = None
    """Blocks along an index fixed in advance (an operand computed in its layout, or a
    forced blocking)."""
    placed_blocks: Mapping[str, int] | None = None
    """Block sizes of the indices in ``placed_counts`` (their blocks are the operand's)."""
    repartition: frozenset[int] = frozenset()
    """Positions in ``placed`` that the plan re-lays out: their blocks are cut and placed
    as the grid says, paying for the pieces that are elsewhere."""
    idle_nodes: bool = False
    """Whether the grids span :func:`near_smooth` ``(P)`` nodes instead of ``P``, up to
    ``P / 32`` of them idle: set on the copy :meth:`with_idle_nodes` makes, which a search
    plans when no grid over all ``P`` nodes keeps the busiest receiver within the
    communication budget."""
    _graphs: OrderedDict = field(default_factory=OrderedDict, repr=False)
    _memo: dict = field(default_factory=dict, repr=False)

    @property
    def sizes(self) -> dict[str, int]:
        return self.program.size_of

    @property
    def indices(self) -> tuple[str, ...]:
        return tuple(sorted(self.sizes))

    @property
    def itemsize(self) -> int:
        return np.dtype(self.program.dtype).itemsize

    def stage_arrays(self) -> list[tuple[list[PlannedArray], PlannedArray]]:
        """Per stage (children first): its input arrays and its output array."""
        return self.memo("stage_arrays", self._stage_arrays)

    def _stage_arrays(self) -> list[tuple[list[PlannedArray], PlannedArray]]:
        sizes = self.sizes
        stages = []
        for root in stage_roots(self.program.output):
            inputs, _, output, _ = stage_parts(root)
            arrays = [_array(node, sizes) for node in inputs]
            stages.append((arrays, PlannedArray("out", tuple(output), _elements(output, sizes))))
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
        """Whether some grid (over one of :meth:`grid_sizes`) splits every index into a
        multiple of its nodes (else the problem is too small for ``nodes`` and some nodes
        get no blocks along an index)."""
        return self.memo("even_split", lambda: any(
            self._even_split(size) for size in self.grid_sizes()))

    def _even_split(self, nodes: int) -> bool:
        return self.memo(("even_split", nodes), lambda: self._splits_evenly(nodes))

    def _splits_evenly(self, nodes: int) -> bool:
        fixed = self.placed_counts or {}
        reachable = {1}
        for index in self.indices:
            size = max(self.sizes[index], 1)
            usable = [
                p for p in range(1, nodes + 1)
                if nodes % p == 0 and (index in fixed or any(
                    achievable(self.sizes[index], p * m) for m in range(1, size // p + 1)))
            ]
            reachable = {r * p for r in reachable for p in usable if nodes % (r * p) == 0}
        return nodes in reachable

    def grid_sizes(self) -> tuple[int, ...]:
        """The node counts a candidate's grid may span: ``P``, and the largest count below
        ``P`` without a prime factor above 5 (the other nodes stay idle) when ``P`` has
        such a factor (:func:`smooth_below`), if grids over it split every index evenly and
        the closed form prices them. A node count such as 4,095 or a prime then also gets
        grids that cut every index evenly (a prime gets only those when no grid over all its
        nodes splits evenly). With :attr:`idle_nodes`, only :func:`near_smooth` ``(P)``:
        on 1,024 nodes, 1,000, whose sides (50 x 20) fit an 8,192 x 8,192 face nearer the
        square a node's box wants than any split of 1,024 does."""
        return self.memo("grid sizes", self._grid_sizes)

    def _grid_sizes(self) -> tuple[int, ...]:
        if self.idle_nodes:
            return (near_smooth(self.nodes) or self.nodes,)
        spare = smooth_below(self.nodes)
        if spare is None or not symbolic_cost.unforced(self) or not self._even_split(spare):
            return (self.nodes,)
        return (self.nodes, spare)

    def with_idle_nodes(self) -> Problem | None:
        """This problem's grids over :func:`near_smooth` ``(P)`` nodes alone (the others
        idle), as a problem of its own with :attr:`idle_nodes` set: the space a search adds
        when no grid over all ``P`` nodes keeps within the communication budget (the
        grids over ``P`` are searched already). None when ``P`` has no such count, has a
        prime factor above 5 (:func:`smooth_below` gives its spare count already), or the
        closed form does not price the problem or cannot cut it evenly over that count: so
        the copy is in the closed form's domain, and the smt search goes over it grid by
        grid (its z3 phase, which writes the grid's product as ``P``, never runs)."""
        spare = near_smooth(self.nodes)
        if (self.idle_nodes or spare is None or smooth_below(self.nodes) is not None
                or not symbolic_cost.unforced(self) or not self._even_split(spare)):
            return None
        return replace(self, idle_nodes=True, _graphs=OrderedDict(), _memo={})

    def lower_bound_bytes(self) -> int:
        """The communication lower bound of the contraction as planned (bytes)."""
        return self.memo("lower_bound", self._lower_bound)

    def _lower_bound(self) -> int:
        operands, output = self.contraction()
        return communication_lower_bound(operands, output, self.sizes, self.nodes, self.itemsize)

    def memo(self, key, compute):
        """``compute()`` once per problem under ``key`` (derived facts the searches share)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def graph(self, counts: Grid, scatter: Scatter | None = None) -> TaskGraph:
        """The task graph for block counts ``counts`` (lowered once per counts)."""
        return self.lowered(counts, scatter).graph

    def graph_of(self, candidate: Candidate) -> TaskGraph:
        """The task graph ``candidate`` runs: its counts, and the reduce-scatter its grid
        ends with (:func:`~tensorc.planning.reduce_scatter.scatter_for`) if any."""
        return self.graph(candidate.counts, scatter_for(self, candidate))

    def lowered(self, counts: Grid, scatter: Scatter | None = None) -> Lowered:
        """The task graph for ``counts`` (its last reduce ended by ``scatter``, when given)
        with its block coordinates grouped per stage, cached (up to
        :data:`GRAPH_CACHE_TASKS` tasks, least recently used dropped first)."""
        cache: OrderedDict = self._graphs  # type: ignore[assignment]
        key = (counts, scatter)
        found = cache.get(key)
        if found is not None:
            cache.move_to_end(key)
            return found
        sizes = self.sizes
        fixed = self.placed_blocks or {}
        block = tuple(
            (i, fixed.get(i) or max(1, math.ceil(sizes[i] / c))) for i, c in counts
        )
        blocking = Blocking(sizes=tuple(sorted(sizes.items())), block=block)
        graph = lower_to_tasks(self.program, blocking, scatter)
        found = Lowered.of(graph, tuple(key_of(self.program.output)))
        cache[key] = found
        total = sum(len(entry.graph.tasks) for entry in cache.values())
        while total > GRAPH_CACHE_TASKS and len(cache) > 1:
            _, dropped = cache.popitem(last=False)
            total -= len(dropped.graph.tasks)
        return found


@dataclass
class Lowered:
    """A lowered task graph with the block coordinates the layout needs, per stage.

    ``stages`` holds ``(is_load, dims, task indices, coordinates)`` per stage of the graph
    (coordinates an integer array, one row per task); ``outputs`` the output blocks'
    coordinates in the final array's dims.
    """

    graph: TaskGraph
    stages: list[tuple[bool, tuple[str, ...], np.ndarray, np.ndarray]]
    output_dims: tuple[str, ...]
    outputs: np.ndarray
    compute_tasks: int
    compute_flops: int

    @classmethod
    def of(cls, graph: TaskGraph, output_dims: tuple[str, ...]) -> Lowered:
        columns = graph.columns()
        if not columns.stages:
            return cls._walked(graph, output_dims)
        compute = columns.kind != KIND_CODE[LOAD]
        stages = [(columns.kind[indices[0]] == KIND_CODE[LOAD], graph.stage_dims[stage],
                   indices, coords)
                  for stage, (indices, coords) in columns.stages.items() if len(indices)]
        return cls(graph, stages, output_dims, cls._outputs(graph, output_dims),
                   int(compute.sum()), int(columns.flops[compute].sum()))

    @staticmethod
    def _outputs(graph: TaskGraph, output_dims: tuple[str, ...]) -> np.ndarray:
        out = output_block_coords(graph)
        return np.asarray(out, dtype=np.int64).reshape(len(out), len(output_dims))

    @classmethod
    def _walked(cls, graph: TaskGraph, output_dims: tuple[str, ...]) -> Lowered:
        """:meth:`of` for a graph whose columns carry no stage coordinates."""
        rows: dict[str, tuple[list[int], list[tuple]]] = {}
        flops = 0
        compute = 0
        for index, task in enumerate(graph.tasks):
            key = task.key
            entry = rows.get(key[0])
            if entry is None:
                entry = rows[key[0]] = ([], [])
            entry[0].append(index)
            entry[1].append(key[1:])
            if task.kind != LOAD:
                compute += 1
                flops += task.flops
        stages = []
        for stage, (indices, coords) in rows.items():
            dims = graph.stage_dims[stage]
            is_load = graph.tasks[indices[0]].kind == LOAD
            array = np.asarray(coords, dtype=np.int64).reshape(len(indices), len(dims))
            stages.append((is_load, dims, np.asarray(indices, dtype=np.int64), array))
        return cls(graph, stages, output_dims, cls._outputs(graph, output_dims), compute, flops)


def _elements(dims, sizes) -> int:
    return math.prod(sizes[i] for i in dims)


def _array(node, sizes) -> PlannedArray:
    dims = tuple(key_of(node))
    name = node.tensor if isinstance(node, Scan) else "tmp"
    return PlannedArray(name, dims, _elements(dims, sizes))


SMOOTH_FACTORS = 5
"""The largest prime factor a grid's node count needs no idle nodes for."""


def smooth_below(nodes: int) -> int | None:
    """The largest node count below ``nodes`` whose prime factors are all at most
    :data:`SMOOTH_FACTORS`, when ``nodes`` has a larger one; else None."""
    if max(prime_factors(nodes), default=1) <= SMOOTH_FACTORS:
        return None
    spare = nodes - 1
    while max(prime_factors(spare), default=1) > SMOOTH_FACTORS:
        spare -= 1
    return spare


NEAR_SPARE = 32
"""A grid may leave up to ``P / NEAR_SPARE`` nodes idle when that lets its sides fit the
extents better (:func:`near_smooth`)."""


def near_smooth(nodes: int) -> int | None:
    """The largest node count below ``nodes`` by at most ``nodes / NEAR_SPARE`` whose prime
    factors are all at most :data:`SMOOTH_FACTORS`, or None: a grid over it leaves a few
    nodes idle but may cut the indices into sides nearer the shape a node's box wants (on
    1,024 nodes, 50 x 20 against 32 x 32 or 64 x 16 for an 8,192 x 8,192 face)."""
    for size in range(nodes - 1, nodes - nodes // NEAR_SPARE - 1, -1):
        if max(prime_factors(size)) <= SMOOTH_FACTORS:
            return size
    return None


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
            a count that differs from the blocking of an operand already on the cluster;
            counts that leave an array's block over ``1 / BLOCK_MEMORY_SHARE`` of a node's
            memory budget. (A problem too small for an even split,
            :meth:`Problem.even_split`, may leave counts that are not multiples of the grid.)
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
    if product not in problem.grid_sizes():
        spans = " or ".join(str(size) for size in problem.grid_sizes())
        raise PlanError(
            f"{candidate.describe()}: the grid spans {product} nodes, not {spans}"
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
    too_big = oversized_block(problem, dict(candidate.counts))
    if too_big is not None:
        raise PlanError(too_big)
    for index, count in fixed.items():
        if dict(candidate.counts)[index] != count:
            raise PlanError(
                f"index '{index}': an operand on the cluster has {count} blocks along it, "
                f"the candidate {dict(candidate.counts)[index]} (repartition it first)"
            )


def oversized_block(problem: Problem, counts: Mapping[str, int]) -> str | None:
    """Why ``counts`` break the memory rule (an array's largest block over
    ``1 / BLOCK_MEMORY_SHARE`` of a node's budget), or None when they keep it."""
    sizes = problem.sizes
    limit = problem.memory_bytes // BLOCK_MEMORY_SHARE
    for arrays, output in problem.stage_arrays():
        for array in [*arrays, output]:
            block = math.prod(math.ceil(sizes[i] / counts[i]) for i in set(array.dims))
            nbytes = block * problem.itemsize
            if nbytes > limit:
                return (
                    f"a block of {array.name}[{''.join(array.dims)}] takes {nbytes} bytes, "
                    f"over 1/{BLOCK_MEMORY_SHARE} of the node's {problem.memory_bytes}-byte "
                    "memory budget"
                )
    return None


@dataclass
class Modelled:
    """A candidate, its task graph, its simulated schedule and its price."""

    candidate: Candidate
    graph: TaskGraph
    schedule: Schedule
    report: CostReport
    load_nodes: Mapping[int, int]
    """Load task index → node (a :class:`~tensorc.placement.layout.NodeMap`)."""
    output_nodes: list[int]
    scatter: Scatter | None = None
    """How the last stage's reduce ends when it is a reduce-scatter
    (:mod:`tensorc.planning.reduce_scatter`), else None."""


def layout(problem: Problem, candidate: Candidate, graph: TaskGraph | None = None):
    """Load nodes, output nodes and compute-task hints of the candidate's task graph under
    its grid (``graph`` defaults to the candidate's; :func:`tensorc.placement.layout.grid_nodes`
    places every block), and the bytes each node receives to repartition operands
    (``problem.repartition``).

    Loads of an operand computed in its layout sit where its data is (the node of the
    block holding the load's first element, as the Ray executor stitches there); every
    other load sits on its grid node."""
    scatter = scatter_for(problem, candidate)
    lowered = problem.lowered(candidate.counts, scatter)
    if graph is not None and graph is not lowered.graph:
        lowered = Lowered.of(graph, tuple(key_of(problem.program.output)))
    graph = lowered.graph
    grid = candidate.grid
    counts = dict(candidate.counts)
    load_nodes = NodeMap(len(graph.tasks))
    hints = NodeMap(len(graph.tasks))
    for is_load, dims, indices, coords in lowered.stages:
        (load_nodes if is_load else hints).fill(indices, grid_nodes(dims, coords, grid, counts))
    moved = [0] * problem.nodes
    placed = problem.placed or {}
    for index in _loads_of(graph) if placed else ():
        position, slices = task_source(graph.tasks, index)
        if position not in placed:
            continue
        source = placed[position]
        if position not in problem.repartition:
            load_nodes[index] = source.first_node(slices)
            continue
        node = load_nodes[index]
        moved[node] += sum(n for holder, n in source.node_elements(slices) if holder != node)
    if scatter is None:
        output_nodes = grid_nodes(lowered.output_dims, lowered.outputs, grid, counts).tolist()
    else:  # a piece stays on the node of the group that summed it
        output_nodes = [hints[task] for task, _ in graph.outputs]
    itemsize = problem.itemsize
    return load_nodes, output_nodes, hints, [m * itemsize for m in moved]


def _loads_of(graph: TaskGraph) -> list[int]:
    """Indices of the load tasks of ``graph``."""
    return np.flatnonzero(graph.columns().kind == KIND_CODE[LOAD]).tolist()


def relayout_copies(problem: Problem, graph: TaskGraph,
                    load_nodes: Mapping[int, int]) -> list[int]:
    """Bytes each node copies to re-lay operands out (``problem.repartition``): every load
    of such an operand that is not one stored block as it is."""
    copied = [0] * problem.nodes
    placed = problem.placed or {}
    nbytes = graph.columns().nbytes
    for index in _loads_of(graph) if problem.repartition else ():
        position, slices = task_source(graph.tasks, index)
        if position not in problem.repartition:
            continue
        pieces = placed[position].pieces(slices)
        if len(pieces) > 1 or placed[position].block_slices(pieces[0][0]) != tuple(slices):
            copied[load_nodes[index]] += int(nbytes[index])
    return copied


def model(problem: Problem, candidate: Candidate, strict: bool = False) -> Modelled:
    """Price ``candidate`` by simulating LSHS on its task graph (module contract);
    ``strict`` runs every task on its grid node (owner computes,
    :func:`tensorc.placement.schedule.schedule`'s ``strict_hints``)."""
    check(problem, candidate)
    scatter = scatter_for(problem, candidate)
    graph = problem.graph(candidate.counts, scatter)
    load_nodes, output_nodes, hints, moved = layout(problem, candidate)
    if graph.outputs and graph.columns().kind[graph.outputs[0][0]] == KIND_CODE[LOAD]:
        output_nodes = [load_nodes[t] for t, _ in graph.outputs]  # ints
    placed = schedule(
        graph, problem.nodes, "lshs",
        load_nodes=load_nodes, output_nodes=output_nodes, task_hints=hints,
        strict_hints=strict,
    )
    bound = problem.lower_bound_bytes()
    report = distributed_cost(graph, placed, problem.memory_bytes, moved, bound,
                              relayout_copies(problem, graph, load_nodes))
    return Modelled(candidate, graph, placed, report, load_nodes, output_nodes, scatter)


@dataclass
class Priced:
    """A candidate and its price under the model every search shares: the closed form
    (:mod:`tensorc.planning.symbolic_cost`, ``figures``) where it applies, else the
    task-level model (``modelled``)."""

    candidate: Candidate
    cost: float
    figures: symbolic_cost.Figures | None = None
    modelled: Modelled | None = None

    @property
    def symbolic(self) -> bool:
        return self.figures is not None


def price(problem: Problem, candidate: Candidate, checked: bool = False) -> Priced:
    """Price ``candidate`` without lowering it when the closed form applies
    (:func:`tensorc.planning.symbolic_cost.supported`), else by :func:`model`; ``checked``
    skips :func:`check` for a candidate drawn from the legal space."""
    if not checked:
        check(problem, candidate)
    if symbolic_cost.supported(problem, candidate) is None:
        found = symbolic_cost.figures(problem, candidate)
        return Priced(candidate, symbolic_cost.cost_of(problem, found), figures=found)
    modelled = model(problem, candidate)
    return Priced(candidate, modelled.report.cost, modelled=modelled)


def lowered_plan(problem: Problem, priced: Priced) -> Modelled:
    """The task-level model of a priced candidate (lowered and simulated once: what a plan
    keeps and the runtime runs)."""
    return priced.modelled if priced.modelled is not None else model(problem, priced.candidate)


def estimate(problem: Problem, candidate: Candidate) -> float:
    """Closed-form elements the busiest node receives if every stage ran on its grid box.

    Per stage: each input array ``A`` costs ``|A| / ∏_{i∈A} p_i`` (what one node's box
    needs) minus ``|A| / P`` when ``A`` has at least as many blocks per grid cell as the
    grid has nodes along the axes it lacks (so each node owns its share), else minus
    nothing; an array with exactly the stage's indices costs nothing (the grid lays its
    blocks out where the stage's tasks run). The stage's output costs the reduction of its
    partial blocks: with ``R > 1`` nodes along its summed indices, each output block's
    reducer receives ``R - 1`` partials, and a cell's ``m`` output blocks are reduced by
    ``min(m, R)`` of those nodes
    (``(R - 1) |O| / (∏_{i∈O} p_i · min(m, R))``; a reduce-scatter when ``m ≥ R``).
    Computed by :func:`tensorc.planning.prediction.estimates` on one candidate.
    """
    p, c = candidate_arrays(problem, [candidate])
    return float(prediction.estimates(problem, p, c)[0])


def predicted_cost(problem: Problem, candidate: Candidate) -> float:
    """The model's cost predicted in closed form, without lowering or simulating: the
    :func:`estimate` over the network, the average node's compute and the driver's
    submission of every task (:func:`tensorc.planning.prediction.predicted_costs`)."""
    p, c = candidate_arrays(problem, [candidate])
    return float(prediction.predicted_costs(problem, p, c)[0])


def candidate_arrays(problem: Problem, candidates) -> tuple[np.ndarray, np.ndarray]:
    """Grid sizes and block counts of ``candidates`` as ``(candidates, indices)`` arrays,
    columns in ``problem.indices`` order."""
    indices = problem.indices
    p = np.array([[dict(c.grid)[i] for i in indices] for c in candidates], dtype=np.int64)
    c = np.array([[dict(c.counts)[i] for i in indices] for c in candidates], dtype=np.int64)
    return p.reshape(len(candidates), len(indices)), c.reshape(len(candidates), len(indices))
