"""Running plans: the one place a compiled plan meets an executor and statistics are kept.

Contract:

- :func:`run_local` runs a plan's task graph on numpy arrays with the in-process executor,
  writing the result into ``out``; :func:`run_on_ray` runs it on the Ray session: numpy
  operands are distributed as the plan cuts them, ``tc.Array`` operands are read where they
  live, or repartitioned first when the plan says so (:func:`repartition`); the result stays
  distributed (a ``tc.Array``) and its blocks stay on the nodes that computed them;
- :func:`prepare_ray_call` says how an einsum on Ray is planned: under LSHS (or with
  ``nodes=``/``planner=``) by the distribution planner for the session's nodes, with the
  operands' layouts (:class:`~tensorc.runtime.blocks.Blocks`); otherwise with the blocking of
  the distributed operands (the first ``tc.Array`` with an index gives its block size);
- every run's statistics go through :func:`record` and come back from :func:`last_stats`
  (per thread): an einsum records its call; a ``.tc`` program records its whole run
  (:func:`program_stats`), whichever the backend. Ray runs report the schedule's modelled
  loads and the bytes Ray actually moved, measured from object locations.

``tc.einsum``, ``tc.tensordot`` and ``Program.run`` all run through here.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Sequence

import numpy as np

from tensorc.array import Array, factor_over, place
from tensorc.codegen.kernels import LoadBlock
from tensorc.errors import PlanError
from tensorc.frontend.subscripts import EinsumSpec
from tensorc.passes.distribution import layout
from tensorc.passes.lower_bound import communication_lower_bound
from tensorc.planning.plan import Plan
from tensorc.runtime.blocks import Blocks
from tensorc.runtime.layout import block_cyclic_output_nodes, load_bounds, load_layout
from tensorc.runtime.local import LocalExecutor
from tensorc.runtime.ray_executor import RayExecutor, measure_copies, object_copies, submit
from tensorc.runtime.schedule import schedule
from tensorc.session import ray_cluster

_state = threading.local()


def record(stats: dict) -> None:
    """Keep ``stats`` as this thread's last run (what :func:`last_stats` returns)."""
    _state.stats = stats


def last_stats() -> dict:
    """Statistics of the last run in this thread (``{}`` before any)."""
    return dict(getattr(_state, "stats", {}))


def run_local(plan: Plan, arrays: Sequence[np.ndarray], out: np.ndarray, *,
              workers: int | None = None) -> dict:
    """Run ``plan``'s task graph on ``arrays`` in this process, writing the result into
    ``out``; returns the executor's run statistics."""
    executor = LocalExecutor(workers)
    executor.run(plan.graph, None, arrays, out)
    return executor.last_run


def local_stats(plan: Plan, run: dict, *, cached: bool, plan_seconds: float) -> dict:
    """The statistics of one local run of ``plan``."""
    return {
        **plan.stats,
        "backend": "local",
        "scheduler": None,
        "plan_cached": cached,
        "plan_seconds": plan_seconds,
        "run_seconds": run["run_seconds"],
        "workers": run["workers"],
        "blas_threads": run["blas_threads"],
        "measured_inter_node_bytes": None,
    }


def forced_block_shape(spec: EinsumSpec, operands) -> dict[str, int] | None:
    """Block size per index taken from the distributed operands (first one wins)."""
    chosen: dict[str, int] = {}
    for labels, operand in zip(spec.inputs, operands, strict=True):
        if not isinstance(operand, Array):
            continue
        for label, size in zip(labels, operand.block_shape, strict=True):
            chosen.setdefault(label, max(1, size))
    return chosen or None


def cast(blocks: Blocks, dtype: np.dtype, cluster) -> Blocks:
    """``blocks`` converted to ``dtype``, each block on the node holding it."""
    convert = functools.partial(np.asarray, dtype=dtype)
    blocks.resolve(cluster.index_of)
    out = Blocks(blocks.shape, dtype, blocks.bounds, dict(blocks.nodes))
    for coords, ref in blocks.refs.items():
        node = blocks.nodes.get(coords)
        out.refs[coords], out.reported[coords] = submit(cluster, "run", node, convert, ref)
    return out


def layouts_of(operands: Sequence[object]) -> dict[int, Blocks]:
    """The layout (no data) of every ``tc.Array`` operand, by position, for the planner."""
    cluster = ray_cluster()
    return {
        position: operand.blocks.resolve(cluster.index_of).without_data()
        for position, operand in enumerate(operands) if isinstance(operand, Array)
    }


def prepare_ray_call(spec: EinsumSpec, operands: Sequence[object], plan_options: dict,
                     scheduler: str) -> tuple[dict, dict | None, int]:
    """How an einsum on the Ray session is planned: ``(plan options, placed, workers)``.

    Under LSHS (the scheduler the planner's model simulates), or when ``nodes=`` or
    ``planner=`` asks for it, the distribution planner plans for the session's nodes and
    ``placed`` gives the layout of every ``tc.Array`` operand; otherwise the blocking follows
    the distributed operands (each index takes its block size from the first ``tc.Array``
    with it; ``grid=``/``block_shape=`` override), so loads are the stored blocks."""
    cluster = ray_cluster()
    cluster.refresh()
    options = dict(plan_options)
    placed = None
    if scheduler == "lshs" or options.get("nodes") or options.get("planner"):
        nodes = options.get("nodes") or cluster.nodes
        if nodes != cluster.nodes:
            raise PlanError(
                f"nodes={nodes} but the Ray session has {cluster.nodes} node(s); plan for "
                f"{cluster.nodes} or use tc.plan(..., nodes={nodes}) to plan without running"
            )
        options["nodes"] = nodes
        placed = layouts_of(operands) or None
    elif options.get("grid") is None and options.get("block_shape") is None:
        forced = forced_block_shape(spec, operands)
        if forced is not None:
            options["block_shape"] = forced
    return options, placed, cluster.total_cpus


def run_on_ray(plan: Plan, operands, scheduler: str, result_type=None,
               inputs_used: dict | None = None) -> tuple[Array, dict]:
    """Run a compiled plan on Ray: numpy operands are distributed as the plan cuts them,
    ``tc.Array`` operands are read where they are, or repartitioned first when the plan
    says so; returns the result as a ``tc.Array``. ``inputs_used`` receives the Arrays
    made of operands (distributed or repartitioned), by position."""
    cluster = ray_cluster()
    graph = plan.graph
    dist = plan.distribution
    if dist is not None and dist.modelled.schedule.nodes != cluster.nodes:
        raise PlanError(f"the plan is for {dist.modelled.schedule.nodes} nodes but the Ray "
                        f"session has {cluster.nodes}")
    planned_nodes = {}  # operand position -> node of each block under the plan's grid
    if dist is not None:
        for position in range(len(operands)):
            planned_nodes[position] = load_layout(graph, dist.modelled.load_nodes, position)
    inputs = []
    moved = plan.problem.repartition if plan.problem is not None else frozenset()
    crossing: dict = {}  # refs a repartition stitch reads from another node -> producer
    before: dict = {}  # copies of repartitioned operands' blocks before the call
    for position, operand in enumerate(operands):
        if not isinstance(operand, Array):
            data = np.asarray(operand)
            bounds = load_bounds(graph, position, data.shape)
            made = place(data, bounds, planned_nodes.get(position))
            inputs.append(made.blocks)
            if inputs_used is not None:
                inputs_used[position] = made
        elif position in moved:
            bounds = load_bounds(graph, position, operand.shape)
            before.update(object_copies(cluster, list(operand.blocks.refs.values())))
            blocks = repartition(operand.blocks, bounds, planned_nodes[position], cluster,
                                 crossing)
            inputs.append(blocks)
            if inputs_used is not None:
                inputs_used[position] = Array(blocks, operand.node_grid)
        else:
            inputs.append(operand.blocks)
    started = time.perf_counter()  # scheduling counts as planning; distributing does not
    executor = RayExecutor(cluster)
    out_node_grid = factor_over(cluster.nodes, _output_grid(graph))
    hints = None
    relaid = [0] * cluster.nodes  # modelled bytes each node receives to repartition
    if dist is not None:
        output_nodes = dist.modelled.output_nodes
        _, _, hints, relaid = layout(plan.problem, dist.candidate, graph)
    else:
        output_nodes = block_cyclic_output_nodes(graph, out_node_grid)
    load_nodes, cached_copies = executor.locate_loads(graph, inputs)
    placed = schedule(
        graph, cluster.nodes, scheduler,
        load_nodes=load_nodes, output_nodes=output_nodes, cached_copies=cached_copies,
        task_hints=hints,
    )
    planned = time.perf_counter()
    blocks = executor.run(graph, placed, inputs)
    if result_type is not None and np.dtype(blocks.dtype) != np.dtype(result_type):
        blocks = cast(blocks, np.dtype(result_type), cluster)
    run = executor.last_run
    measured_relaid, measured_relaid_nodes = (
        measure_copies(cluster, list(crossing), crossing, before) if crossing
        else (0, [0] * cluster.nodes))
    recv = [a + b for a, b in zip(placed.net_in_bytes, relaid, strict=True)]
    measured_recv = [a + b for a, b in zip(run["measured_node_recv_bytes"],
                                           measured_relaid_nodes, strict=False)]
    stats = {
        **plan.stats,
        "backend": "ray",
        "nodes": cluster.nodes,
        "scheduler": placed.scheduler,
        "inter_node_bytes": placed.inter_node_bytes + sum(relaid),
        "max_node_recv_bytes": max(recv),
        "max_node_memory_bytes": placed.max_node_memory_bytes,
        "node_memory_bytes": list(placed.memory_bytes),
        "node_recv_bytes": recv,
        "node_send_bytes": list(placed.net_out_bytes),
        "repartitioned": sorted(moved),
        "repartition_bytes": sum(relaid),
        "node_repartition_bytes": list(relaid),
        "measured_repartition_bytes": measured_relaid,
        "measured_node_repartition_bytes": list(measured_relaid_nodes),
        "plan_seconds": planned - started,
        "run_seconds": run["run_seconds"],
        "measured_inter_node_bytes": run["measured_inter_node_bytes"] + measured_relaid,
        "measured_node_recv_bytes": measured_recv,
        "measured_max_node_recv_bytes": max(measured_recv, default=0),
        "remote_calls": run["remote_calls"],
        "ran_on": run["ran_on"],
        "node_of": list(placed.node_of),
    }
    if dist is not None:
        bound = dist.lower_bound_bytes
        stats["lower_bound_ratio"] = stats["max_node_recv_bytes"] / bound if bound else None
    elif plan.spec is not None:  # not planned for the cluster: the einsum as written
        spec = plan.spec
        stats["lower_bound_bytes"] = communication_lower_bound(
            spec.inputs, spec.output, spec.size_of, cluster.nodes, np.dtype(graph.dtype).itemsize
        )
    else:
        stats["lower_bound_bytes"] = None
    return Array(blocks, out_node_grid), stats


def repartition(blocks: Blocks, bounds, node_of, cluster,
                crossing: dict | None = None) -> Blocks:
    """``blocks`` cut at ``bounds``, each new block stitched on ``node_of[coords]`` from the
    stored pieces it overlaps. A piece held on another node is first cut out of its block
    on that node, so only the elements the new block needs cross the network (a whole
    stored block crosses only when the new block needs all of it). ``crossing`` receives
    every ref a stitch reads from another node, with its producer (for measuring)."""
    out = Blocks(blocks.shape, blocks.dtype, bounds)
    identity = LoadBlock(None, np.dtype(blocks.dtype))
    cut = LoadBlock(None, np.dtype(blocks.dtype), compact=True)
    holders = blocks.resolve(cluster.index_of).nodes
    live = cluster.node_ids
    for coords in np.ndindex(*out.grid):
        node = node_of.get(coords, 0)
        out.nodes[coords] = node
        slices = out.block_slices(coords)
        shape = tuple(s.stop - s.start for s in slices)
        full = tuple(slice(0, n) for n in shape)
        refs, piece_layout = [], []
        for source, dst, src in blocks.pieces(slices):
            ref = blocks.refs[source]
            holder = holders.get(source)
            if holder is not None and holder != node and holder < len(live):
                whole = tuple(slice(0, s.stop - s.start) for s in blocks.block_slices(source))
                if tuple(src) == whole:
                    producer = live[holder]
                else:
                    extent = tuple(s.stop - s.start for s in src)
                    piece = tuple(slice(0, n) for n in extent)
                    ref, producer = submit(cluster, "load", holder, cut, piece, extent,
                                           ((piece, src),), ref)
                    src = piece
                if crossing is not None:
                    crossing[ref] = producer
            refs.append(ref)
            piece_layout.append((dst, src))
        out.refs[coords], out.reported[coords] = submit(
            cluster, "load", node, identity, full, shape, tuple(piece_layout), *refs,
        )
    return out


def _output_grid(graph) -> tuple[int, ...]:
    """Blocks per dimension of the graph's output."""
    ndim = len(graph.output_shape)
    return tuple(len({slices[d].start for _, slices in graph.outputs}) for d in range(ndim))


SUMMED = ("tasks", "flops", "plan_seconds", "run_seconds", "inter_node_bytes",
          "repartition_bytes", "remote_calls")
PER_NODE_SUMMED = ("node_recv_bytes", "node_send_bytes", "measured_node_recv_bytes",
                   "node_repartition_bytes")


def program_stats(statements: Sequence[tuple[str, dict]], *, backend: str,
                  seconds: float) -> dict:
    """One ``.tc`` program run's statistics from its statements' (label, stats): counts,
    bytes and seconds summed over the statements (per node too), the busiest node of
    those sums, the peak memory of any statement, and each statement's own stats under
    ``statements``. ``seconds`` is the whole run, wall clock."""
    total: dict = {"backend": backend, "program_seconds": seconds,
                   "statements": [{"label": label, **stats} for label, stats in statements]}
    runs = [stats for _, stats in statements]
    for key in SUMMED:
        values = [s[key] for s in runs if s.get(key) is not None]
        total[key] = sum(values) if values else None
    for key in PER_NODE_SUMMED:
        rows = [s[key] for s in runs if s.get(key)]
        if rows:
            total[key] = [sum(column) for column in zip(*rows, strict=True)]
    measured = [s.get("measured_inter_node_bytes") for s in runs]
    total["measured_inter_node_bytes"] = (
        None if not runs or any(m is None for m in measured) else sum(measured))
    if "node_recv_bytes" in total:
        total["max_node_recv_bytes"] = max(total["node_recv_bytes"])
    if "measured_node_recv_bytes" in total:
        total["measured_max_node_recv_bytes"] = max(total["measured_node_recv_bytes"])
    peaks = [s["max_node_memory_bytes"] for s in runs if s.get("max_node_memory_bytes")]
    total["max_node_memory_bytes"] = max(peaks) if peaks else None
    for key in ("scheduler", "nodes"):
        values = {s.get(key) for s in runs}
        total[key] = values.pop() if len(values) == 1 else None
    return total
