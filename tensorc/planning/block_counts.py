"""Block counts for a block program, chosen by simulating its DAG with the cost model.

Contract: :func:`choose_counts(program, shapes, nodes=..., cores=..., fixed=..., preferred=...)`
returns a :class:`CountChoice`: a count for every ``blocks`` declaration of the program and
the simulated figures of every candidate it weighed (makespan, tasks, bytes between nodes,
the busiest node's received bytes, the most bytes any node holds at once, and the same
beyond the input blocks it held from the start). With ``memory_cap`` (a node's budget) LSHS
is simulated placing within it, and only the candidates whose simulation keeps it are
chosen from, where one does. Nothing runs: each candidate's DAG is walked in program order
and list-scheduled by
:class:`~tensorc.placement.block_placement.BlockPlacer` on ``nodes`` simulated nodes of
``cores`` cores, with the cost model's constants (:func:`tensorc.planning.cost.machine`:
per-task overhead, per-core BLAS rate, bandwidth between nodes).

The rules the simulation adds:

- a block edge below :data:`MIN_BLOCK` elements is never chosen (BLAS-3 needs room), unless
  the dimension is smaller than that; a count is a power of two, or the count of the input's
  existing blocking (``preferred``), or one the caller fixed;
- a task's compute runs at ``edge / (edge + BLAS_HALF_EDGE)`` of the per-core rate, ``edge``
  the smaller side of its largest input block (small blocks run BLAS further from its
  peak), and the part a LAPACK factorisation does (``chol``, ``lu``, ``inv``:
  :data:`~tensorc.codegen.block_kernels.FACTORISATIONS`) at ``edge / (edge +
  FACTOR_HALF_EDGE)`` (measured on one core here: a 4096² Cholesky at 0.47 of the product
  rate, a 1024² one at 0.2; without it one task on the whole matrix looked as fast as a
  blocked factorisation spread over nodes, and a noisy calibration could choose it), plus
  the per-task overhead (:data:`LOCAL_TASK_SECONDS` on a thread pool, the
  calibrated step cost on Ray, where a block program's tasks are steps of per-node calls),
  and a block read on another node arrives one call's round trip later (the machine's
  ``call_seconds``, or ``small_call_seconds`` for a result Ray carries inside its messages)
  on top of its bytes;
- on several nodes, an input's blocks start where an array made on its own holds them
  (block-cyclic over its default node grid, :func:`~tensorc.placement.layout.node_grid`),
  unless ``input_node(tensor, coords)`` says otherwise; on one node, all on it;
- a block version is freed after its last reader, counted as the run counts them (a task
  that reads a block twice is one reader), and the final versions of output blocks are
  kept: so the candidate's figures (bytes, placement, the peak) are the run's (before, every
  version was kept and a block read twice by one task counted twice, and a solve at
  n = 1536 on 4 Ray nodes was simulated at 23.6 MB between nodes where the run moves
  14.2 MB);
- candidates whose DAG exceeds :func:`task_limit` tasks (:data:`MAX_SIMULATED_TASKS`, or
  :data:`TASKS_PER_NODE` a node on a larger cluster) are not simulated (they are far past the
  point where tasks pay for themselves);
- on nodes of separate machines every count is simulated twice: placed by LSHS, and by
  ScaLAPACK's owner-computes rule (each task on the node owning the block it writes,
  :func:`~tensorc.placement.block_placement.owner_node`); the faster is kept and the run is
  placed the same way (``CountChoice.policy``). LSHS chooses one task at a time, and at
  scale that gathers a factorisation onto one node: a Cholesky of n = 16384 on 64 nodes of
  the default machine, 13.1 s placed by LSHS, the lower triangle crossing one node's link,
  against 4.9 s by owner (``docs/performance.md``). On nodes sharing a machine's cores
  spreading adds no core, so only LSHS is simulated;
- inputs that are already cut into blocks on the cluster (``stored``: their bounds and the
  node of each block) are read as the runtime reads them: a block of the candidate's
  blocking that is not one of theirs is cut from the stored blocks it overlaps by a task
  of its own (no flops) that the placer places, and the stored blocks it reads are copied
  there (:class:`~tensorc.runtime.ray.block_waves.Stitch`); their cut is a candidate
  (``preferred``);
- the smallest simulated makespan wins; ties go to fewer tasks. On nodes that share a
  machine's cores (the calibration found them) a candidate within :data:`SHARED_MARGIN` of
  the smallest makespan is a tie too, and the fewest tasks among those wins: there the
  simulation is least sure of plans that spread more tasks and copies over the nodes
  (copies take the cores the tasks compute on), and a near tie went to the wrong side with
  the calibration's noise (a TSQR in 4 row blocks, simulated 9 % faster than in 2, ran 15 %
  slower).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass

from tensorc.codegen.block_dag import BlockDag
from tensorc.codegen.block_kernels import factorisation_flops, result_flops, result_shapes
from tensorc.codegen.block_layout import environment
from tensorc.ir.block_program import BlockProgramIR
from tensorc.placement.block_placement import BlockPlacer
from tensorc.placement.layout import block_pieces, live_node, own_node
from tensorc.planning.cost import machine

MIN_BLOCK = 256
BLAS_HALF_EDGE = 96
FACTOR_HALF_EDGE = 4096
MAX_SIMULATED_TASKS = 3000
TASKS_PER_NODE = 8
"""On more than ``MAX_SIMULATED_TASKS / TASKS_PER_NODE`` nodes, candidates of up to this
many tasks a node are simulated (:func:`task_limit`)."""
SHARED_MARGIN = 0.1
"""On nodes sharing a machine, makespans within this fraction of the best are a tie that
fewer tasks win (module docstring)."""
LOCAL_TASK_SECONDS = 60e-6


@dataclass(frozen=True)
class CountCandidate:
    counts: dict[str, int]
    makespan: float | None  # simulated seconds; None when not simulated
    tasks: int | None
    moved_bytes: int | None
    busiest_in_bytes: int | None = None  # what the node receiving the most receives
    peak_node_bytes: int | None = None  # the most bytes any node holds at once (the placer's)
    policy: str = "lshs"  # the block placer's policy it was simulated with
    plan_peak_bytes: int | None = None  # the same less the input blocks a node was given


@dataclass(frozen=True)
class CountChoice:
    counts: dict[str, int]
    candidates: tuple[CountCandidate, ...]
    policy: str = "lshs"  # how the run places its tasks: the chosen candidate's policy
    limit: int = MAX_SIMULATED_TASKS  # candidates with more tasks were not simulated

    def headline(self) -> str:
        """The chosen counts and placement: ``NB=16, placed by owner``."""
        return ", ".join([*(f"{k}={v}" for k, v in self.counts.items()),
                          f"placed by {self.policy}"])

    def chosen(self) -> CountCandidate:
        """The candidate of the chosen counts and placement."""
        return next(c for c in self.candidates
                    if c.counts == self.counts and c.policy == self.policy)

    def describe(self) -> str:
        lines = []
        chosen = self.chosen()
        for c in self.candidates:
            shown = ", ".join(f"{k}={v}" for k, v in c.counts.items()) or "(no blocks)"
            if c.policy != "lshs":
                shown += f", placed by {c.policy}"
            mark = "  <- chosen" if c is chosen else ""
            if c.makespan is None:
                lines.append(f"  {shown}: more than {self.limit} tasks, not simulated")
            else:
                lines.append(f"  {shown}: {c.tasks} tasks, simulated {c.makespan * 1e3:.1f} ms, "
                             f"{c.moved_bytes / 1e6:.1f} MB between nodes{mark}")
        return "\n".join(lines)


def task_limit(nodes: int) -> int:
    """The most tasks a simulated candidate may have on ``nodes`` nodes."""
    return max(MAX_SIMULATED_TASKS, TASKS_PER_NODE * nodes)


def _options(extent: int, preferred: int | None) -> list[int]:
    top = max(1, extent // MIN_BLOCK)
    found = {1 << e for e in range(top.bit_length()) if 1 << e <= top}
    if preferred and 1 <= preferred <= extent:
        found.add(preferred)
    return sorted(found)


@dataclass(frozen=True)
class Walk:
    """A candidate's DAG in program order, as the simulation reads it: each task with its
    edges and the blocks it writes, each version's readers (one a task, as the run counts
    them) and the final write of each block."""

    dag: BlockDag
    tasks: tuple
    reads: Counter
    finals: frozenset


def walk(program: BlockProgramIR, env: dict[str, int],
         limit: int = MAX_SIMULATED_TASKS) -> Walk | None:
    """The :class:`Walk` of one choice of counts; ``None`` when it has more than ``limit``
    tasks (counted first: walking the DAG costs little beside asking it for edges)."""
    dag = BlockDag(program, env)
    if sum(1 for _ in itertools.islice(dag.walk(), limit + 1)) > limit:
        return None
    tasks, reads, last = [], Counter(), {}
    for task in dag.walk():
        edges, written = dag.parents(task), dag.written(task)
        tasks.append((task, edges, written))
        reads.update({_version(e) for e in edges})
        last.update((block, (task, j)) for j, block in enumerate(written))
    return Walk(dag, tuple(tasks), reads, frozenset(last.values()))


def simulate(program: BlockProgramIR, env: dict[str, int], bounds: dict, *, nodes: int, cores: int,
             limit: int = MAX_SIMULATED_TASKS, input_node=None,
             stored: dict | None = None, policy: str = "lshs",
             walked: Walk | None = None, memory_cap: int | None = None
             ) -> CountCandidate | None:
    """Simulated makespan, task count and bytes of one choice of counts (``None`` when the
    DAG has more than ``limit`` tasks) placed by ``policy`` (``lshs`` or ``owner``);
    ``stored`` maps an input already cut on the cluster to ``(its bounds, {block: node})``
    (module docstring); ``walked``: its :func:`walk`, when the caller has it;
    ``memory_cap``: a node's budget, which LSHS places within where a node has room."""
    walked = walked or walk(program, env, limit)
    if walked is None:
        return None
    dag, reads, finals = walked.dag, walked.reads, walked.finals
    figures = machine()
    overhead = figures.task_seconds if nodes > 1 else LOCAL_TASK_SECONDS
    placer = BlockPlacer(nodes, cores, policy, flops_per_core=figures.blas_flops_per_core,
                         bytes_per_second=figures.network_bytes_per_second,
                         task_seconds=overhead,
                         hop_seconds=figures.call_seconds if nodes > 1 else 0.0,
                         small_hop_seconds=figures.small_call_seconds if nodes > 1 else 0.0,
                         inline_bytes=figures.inline_bytes,
                         hosts=figures.hosts(nodes),
                         memory_cap=memory_cap if policy == "lshs" else None)
    versions: dict = {}
    shapes: dict = {}
    for task, edges, written in walked.tasks:
        inputs, edge_shapes = [], {}
        for e in edges:
            key = _version(e)
            if key not in versions:
                dims = program.tensors[e.read.tensor].dims
                shape = tuple(bounds[d][c + 1] - bounds[d][c] for d, c in zip(dims, e.coords,
                                                                             strict=True))
                kept = stored.get(e.read.tensor) if stored else None
                uses = reads[key]
                if kept is not None and tuple(tuple(bounds[d]) for d in dims) != kept[0]:
                    region = tuple(slice(bounds[d][c], bounds[d][c + 1])
                                   for d, c in zip(dims, e.coords, strict=True))
                    versions[key] = _stitched(placer, e.read.tensor, kept, region, versions,
                                              uses)
                else:
                    node = (_home(kept, e.coords, nodes) if kept is not None
                            else input_node(e.read.tensor, e.coords) if input_node
                            else _default_node(dims, e.coords, bounds, nodes))
                    versions[key] = placer.add_version(8 * math.prod(shape), uses, node=node,
                                                       retained=True)
                shapes[key] = shape
            inputs.append(versions[key])
            edge_shapes[e.read] = shapes[key]
        inputs = list(dict.fromkeys(inputs))  # a block read twice is one input, one use
        expr = dag.sites[task[0]].assign.value
        outs = result_shapes(expr, edge_shapes)
        flops = placed_flops(expr, edge_shapes)
        ids = []
        for j, shape in enumerate(outs):
            kept = (task, j) in finals and program.tensors[written[j][0]].kind == "output"
            ids.append(placer.add_version(8 * math.prod(shape), reads[(task, j)],
                                          retained=kept))
            versions[(task, j)] = ids[-1]
            shapes[(task, j)] = shape
        node = placer.place(inputs, sum(placer.state.size[i] for i in ids), flops,
                            placer.home(dag, written[0]))
        placer.run(ids, inputs, node, flops)
    makespan = max(max(c) for c in placer.cores)
    return CountCandidate({c: env[c] for c in program.blocks}, makespan, len(walked.tasks),
                          placer.moved_bytes(), max(placer.state.net_in),
                          placer.state.max_peak, policy, max(placer.plan_peak))


def placed_flops(expr, edge_shapes: dict) -> float:
    """A task's flops as the placer prices them (module docstring): its BLAS part scaled by
    ``(edge + BLAS_HALF_EDGE) / edge``, its factorisation part by ``(edge +
    FACTOR_HALF_EDGE) / edge``; the count choice and the run on Ray price a task alike, so
    the run places it where the choice simulated."""
    edge = max((min(shape) for shape in edge_shapes.values() if shape), default=1)
    factoring = factorisation_flops(expr, edge_shapes)
    return ((result_flops(expr, edge_shapes) - factoring) * (edge + BLAS_HALF_EDGE)
            + factoring * (edge + FACTOR_HALF_EDGE)) / max(edge, 1)


def _version(edge) -> tuple:
    """The block version an edge reads: an input block, or a task's result."""
    return (edge.read.tensor, edge.coords) if edge.task is None else (edge.task, edge.result)


def _stitched(placer: BlockPlacer, tensor: str, stored, region: tuple, versions: dict,
              uses: int) -> int:
    """The version of an input block cut from the stored blocks overlapping ``region``
    (:meth:`~tensorc.placement.block_placement.BlockPlacer.stitch`, each whole stored block
    read on its node)."""
    edges, _ = stored
    pieces = []
    for coords, _, _ in block_pieces(edges, region):
        key = ("stored", tensor, coords)
        if key not in versions:
            extent = math.prod(e[c + 1] - e[c] for e, c in zip(edges, coords, strict=True))
            versions[key] = placer.add_version(8 * extent, 1 << 30,  # kept, as the run
                                               node=_home(stored, coords, placer.nodes),
                                               retained=True)
        pieces.append(versions[key])
    _, made = placer.stitch(pieces, 8 * math.prod(s.stop - s.start for s in region), uses)
    return made


def _home(stored, coords: tuple, nodes: int) -> int:
    """The node stored block ``coords`` is read from, as the runtime reads it
    (:func:`~tensorc.placement.layout.live_node`)."""
    return live_node(stored[1].get(coords), nodes)


def _default_node(dims, coords, bounds: dict, nodes: int) -> int:
    """The node holding block ``coords`` of an input made on its own (module docstring)."""
    return own_node(tuple(len(bounds[d]) - 1 for d in dims), coords, nodes) if nodes > 1 else 0


def choose_counts(program: BlockProgramIR, shapes: dict[str, tuple[int, ...]], *, nodes: int,
                  cores: int, fixed: dict[str, int] | None = None,
                  preferred: dict[str, int] | None = None, input_node=None,
                  stored: dict | None = None, memory_cap: int | None = None) -> CountChoice:
    """The block counts with the smallest simulated makespan (module docstring); ``stored``
    as :func:`simulate` takes it, ``{input: (bounds, ((block, node), ...))}``;
    ``memory_cap``: a node's budget, simulated as LSHS places within it; the candidates
    that keep it (their :attr:`CountCandidate.plan_peak_bytes`) are the only ones chosen
    from, where one does."""
    stored = {name: (tuple(tuple(e) for e in edges), dict(homes))
              for name, (edges, homes) in (stored or {}).items()} if nodes > 1 else None
    fixed = dict(fixed or {})
    preferred = dict(preferred or {})
    base, _ = environment(program, shapes, {c: 1 for c in program.blocks})
    per_count = []
    for count, size in program.blocks.items():
        if count in fixed:
            per_count.append([int(fixed[count])])
        else:
            per_count.append(_options(base[size], preferred.get(count)))
    names = list(program.blocks)
    shared = nodes > 1 and machine().hosts(nodes) is not None
    policies = ("lshs", "owner") if nodes > 1 and not shared else ("lshs",)
    limit = task_limit(nodes)
    candidates = []
    for combo in itertools.product(*per_count):
        counts = dict(zip(names, combo, strict=True))
        env, bounds = environment(program, shapes, counts)
        walked = walk(program, env, limit)  # one walk, placed each way
        if walked is None:  # too many tasks whatever the placement
            candidates.append(CountCandidate(counts, None, None, None))
            continue
        candidates.extend(simulate(program, env, bounds, nodes=nodes, cores=cores,
                                   input_node=input_node, stored=stored, policy=policy,
                                   walked=walked, memory_cap=memory_cap)
                          for policy in policies)
    simulated = [c for c in candidates if c.makespan is not None]
    if memory_cap is not None:  # within the budget where a candidate is (owner's included)
        simulated = [c for c in simulated if c.plan_peak_bytes <= memory_cap] or simulated
    if simulated:
        best = min(simulated, key=lambda c: (c.makespan, c.tasks))
        if shared:
            near = best.makespan * (1 + SHARED_MARGIN)
            best = min((c for c in simulated if c.makespan <= near),
                       key=lambda c: (c.tasks, c.makespan))
    else:
        best = min(candidates, key=lambda c: sum(c.counts.values()))
    return CountChoice(best.counts, tuple(candidates), best.policy, limit)
