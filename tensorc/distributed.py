"""Einsum on Ray: plan around the operands' blocking, schedule, run, keep the result there.

``run_on_ray(call)`` is what ``tc.einsum``/``tc.tensordot`` do when an operand is a
``tc.Array`` or the backend is Ray. Contract:

- the blocking follows the distributed operands: each index takes its block size from the
  first ``tc.Array`` operand that has it (``grid=``/``block_shape=`` plan options override),
  so loads are the stored blocks themselves; an Array cut differently along an index is
  re-cut by load tasks that stitch the overlapping blocks;
- numpy operands are distributed with the plan's blocking (block-cyclic over the nodes);
- the task graph is placed by the session's scheduler or the call's ``scheduler=``; the
  result's blocks stay on the nodes that computed them, its layout node grid factors the
  node count over the output's block grid;
- any ``tc.Array`` operand gives a ``tc.Array`` result; numpy operands only give numpy
  (gathered), like ``numpy.einsum``;
- ``tc.last_stats()`` gets the modelled loads from the schedule and the bytes Ray actually
  moved, measured from object locations.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import numpy as np

from tensorc.array import Array, distribute, factor_over
from tensorc.codegen.kernels import LoadBlock
from tensorc.errors import PlanError
from tensorc.frontend.subscripts import EinsumSpec
from tensorc.passes.distribution import Source, layout
from tensorc.passes.lower_bound import communication_lower_bound
from tensorc.plan import Plan
from tensorc.runtime.layout import block_cyclic_output_nodes, load_bounds, load_layout
from tensorc.runtime.ray_executor import (
    DistributedBlocks,
    RayExecutor,
    measure_copies,
    object_copies,
    submit,
)
from tensorc.runtime.schedule import schedule
from tensorc.session import ray_cluster


@dataclass
class RayCall:
    """One einsum call on Ray, after the front end checked it."""

    subscripts: str
    spec: EinsumSpec
    operands: list  # tc.Array or np.ndarray
    result_type: np.dtype
    scheduler: str
    plan_options: dict


def forced_block_shape(spec: EinsumSpec, operands) -> dict[str, int] | None:
    """Block size per index taken from the distributed operands (first one wins)."""
    chosen: dict[str, int] = {}
    for labels, operand in zip(spec.inputs, operands, strict=True):
        if not isinstance(operand, Array):
            continue
        for label, size in zip(labels, operand.block_shape, strict=True):
            chosen.setdefault(label, max(1, size))
    return chosen or None


def cast(blocks: DistributedBlocks, dtype: np.dtype, cluster) -> DistributedBlocks:
    convert = functools.partial(np.asarray, dtype=dtype)
    nodes = blocks.node_ids()
    out = DistributedBlocks(blocks.shape, dtype, blocks.bounds, {})
    for coords, ref in blocks.refs.items():
        node = cluster.index_of(nodes.get(coords, ""))
        out.refs[coords], out.reported[coords] = submit(cluster, "run", node, convert, ref)
    return out


def uses_planner(plan_options: dict, scheduler: str) -> bool:
    """Whether a Ray call is planned by the distribution planner: always under LSHS (the
    scheduler the planner's model simulates), and under the baseline schedulers only when
    ``nodes=`` or ``planner=`` asks for it."""
    return scheduler == "lshs" or bool(plan_options.get("nodes") or plan_options.get("planner"))


def sources(operands, cluster) -> dict[int, Source]:
    """Where each ``tc.Array`` operand lives, for the planner."""
    out = {}
    for position, operand in enumerate(operands):
        if isinstance(operand, Array):
            nodes = {
                coords: cluster.index_of(node) or 0
                for coords, node in operand.blocks.node_ids().items()
            }
            out[position] = Source(operand.blocks.bounds, nodes)
    return out


def run_on_ray(call: RayCall, get_plan) -> tuple[object, dict]:
    """Plan, schedule and run ``call``; returns the result and the call's statistics.

    ``get_plan(plan_options, workers, placed)`` returns ``(plan, cached)`` for the call's
    operands (``placed``: where its ``tc.Array`` operands live).
    """
    started = time.perf_counter()
    cluster = ray_cluster()
    cluster.refresh()
    options = dict(call.plan_options)
    placed = None
    if uses_planner(options, call.scheduler):
        nodes = options.get("nodes") or cluster.nodes
        if nodes != cluster.nodes:
            raise PlanError(
                f"nodes={nodes} but the Ray session has {cluster.nodes} node(s); plan for "
                f"{cluster.nodes} or use tc.plan(..., nodes={nodes}) to plan without running"
            )
        options["nodes"] = nodes
        placed = sources(call.operands, cluster) or None
    elif options.get("grid") is None and options.get("block_shape") is None:
        forced = forced_block_shape(call.spec, call.operands)
        if forced is not None:
            options["block_shape"] = forced
    plan, plan_cached = get_plan(options, cluster.total_cpus, placed)
    planned = time.perf_counter()
    result, stats = execute_on_ray(plan, call.operands, call.scheduler, call.result_type)
    stats["plan_cached"] = plan_cached
    stats["plan_seconds"] += planned - started
    if any(isinstance(op, Array) for op in call.operands):
        return result, stats
    return result.numpy(), stats


def execute_on_ray(plan: Plan, operands, scheduler: str, result_type=None,
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
            made = distribute(data, bounds, planned_nodes.get(position))
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


def repartition(blocks: DistributedBlocks, bounds, node_of, cluster,
                crossing: dict | None = None) -> DistributedBlocks:
    """``blocks`` cut at ``bounds``, each new block stitched on ``node_of[coords]`` from the
    stored pieces it overlaps. A piece held on another node is first cut out of its block
    on that node, so only the elements the new block needs cross the network (a whole
    stored block crosses only when the new block needs all of it). ``crossing`` receives
    every ref a stitch reads from another node, with its producer (for measuring)."""
    out = DistributedBlocks(blocks.shape, blocks.dtype, bounds, {})
    identity = LoadBlock(None, np.dtype(blocks.dtype))
    cut = LoadBlock(None, np.dtype(blocks.dtype), compact=True)
    holders = blocks.node_ids()
    for coords in np.ndindex(*out.grid):
        node = node_of.get(coords, 0)
        slices = out.block_slices(coords)
        shape = tuple(s.stop - s.start for s in slices)
        full = tuple(slice(0, n) for n in shape)
        refs, piece_layout = [], []
        for source, dst, src in blocks.pieces(slices):
            ref = blocks.refs[source]
            holder = cluster.index_of(holders.get(source, ""))
            if holder is not None and holder != node:
                whole = tuple(slice(0, s.stop - s.start) for s in blocks.block_slices(source))
                if tuple(src) == whole:
                    producer = holders[source]
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
