"""Running plans on Ray: a planned einsum staged into node calls, and whole-array operations.

Contract:

- :func:`run_on_ray` runs a plan on the connected cluster: numpy operands are distributed
  as the plan cuts them, ``DistributedArray`` operands are read where they live, or re-laid
  out first when the plan says so; the result stays distributed (a ``DistributedArray``) and its
  blocks stay on the nodes that computed them;
- :func:`run_whole` runs a whole-array operation (a reshape, a small solve, …) as one task on
  the node holding most of its operands; :func:`run_blockwise` runs the ones that can go
  block by block where the blocks are; :func:`cast` and :func:`relayout` convert and re-cut
  a distributed array on its nodes;
- :func:`prepare_ray_call` says how an einsum on Ray is planned: under LSHS (or with
  ``nodes=``/``planner=``) by the distribution planner for the cluster's nodes, with the
  operands' layouts (:class:`~tensorc.placement.blocks.Blocks`); otherwise with the blocking
  of the distributed operands (the first ``DistributedArray`` with an index gives its block
  size).

Ray runs report the schedule's modelled loads, the bytes the calls carry, and (``measure``)
the bytes Ray actually moved, measured from object locations. The Ray executor
(:mod:`tensorc.runtime.ray.executor`) and the Ray statement runner call these.
"""

from __future__ import annotations

import functools
import math
import time
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from tensorc.codegen.taskgraph import LOAD
from tensorc.codegen.whole_array import apply_whole, decode_index
from tensorc.errors import PlanError
from tensorc.frontend.subscripts import EinsumSpec
from tensorc.placement.blocks import Blocks
from tensorc.placement.layout import (
    block_cyclic_node,
    block_cyclic_output_nodes,
    load_bounds,
    load_layout,
)
from tensorc.placement.schedule import pins, schedule
from tensorc.planning.distribution import layout
from tensorc.planning.lower_bound import communication_lower_bound
from tensorc.planning.plan import Plan
from tensorc.runtime.ray.arrays import (
    DistributedArray,
    block_bounds,
    default_blocking,
    factor_over,
    inline,
    node_grid_for,
    place,
)
from tensorc.runtime.ray.blockwise import blockwise_calls
from tensorc.runtime.ray.calls import CallRunner, WorkerLost, submit, wait_for_calls
from tensorc.runtime.ray.cluster import connected as ray_cluster
from tensorc.runtime.ray.slicing import slice_blocks
from tensorc.runtime.ray.stages import relayout_calls, relayout_moves, stage

INLINE_BYTES = 64 * 1024
"""A numpy operand this small travels inside the messages of batched calls."""


def forced_block_shape(spec: EinsumSpec, operands) -> dict[str, int] | None:
    """Block size per index taken from the distributed operands (first one wins)."""
    chosen: dict[str, int] = {}
    for labels, operand in zip(spec.inputs, operands, strict=True):
        if not isinstance(operand, DistributedArray):
            continue
        for label, size in zip(labels, operand.block_shape, strict=True):
            chosen.setdefault(label, max(1, size))
    return chosen or None


def cast(blocks: Blocks, dtype: np.dtype, *, batch=None, pending: list | None = None,
         ) -> Blocks:
    """``blocks`` converted to ``dtype``, each block on the node holding it: a step of that
    node's call (:func:`run_blockwise`), merged into ``batch`` when given. Without a
    ``pending`` list the conversion is submitted and not waited for (reading the result
    waits)."""
    return _blockwise(("astype",), blocks, blocks.shape, dtype, batch=batch,
                      pending=[] if pending is None else pending)[0]


def relayout(value: DistributedArray, bounds, node_grid: tuple[int, ...]) -> DistributedArray:
    """``value`` re-cut at block ``bounds`` onto the block-cyclic layout over ``node_grid``,
    on the nodes (:func:`~tensorc.runtime.ray.stages.relayout_calls`'s calls: only the
    elements a new block needs travel, nothing passes through the driver; a block that is
    unchanged is reused). Submitted, not waited for (reading the result waits)."""
    cluster = ray_cluster()
    stored = value.blocks.resolve(cluster.locate, cluster.epoch)
    target = Blocks.layout(bounds, {}).grid
    nodes = {c: block_cyclic_node(c, node_grid) for c in np.ndindex(*target)}
    program = relayout_calls(stored, bounds, nodes)
    result, _ = CallRunner(cluster).run(program, [stored], pending=[])
    return DistributedArray(result, node_grid)


def run_whole(op: tuple, operands: Sequence[object], shape: tuple[int, ...],
              dtype: np.dtype) -> tuple[DistributedArray, dict]:
    """A whole-array operation (:mod:`tensorc.codegen.whole_array`) on the Ray session:
    ``(result, {"tasks": count, ...})``. What :func:`run_blockwise` takes runs block by
    block where the blocks are; anything else is one task, on the node holding most of the
    operands' bytes, that stitches each operand from its blocks, applies ``op`` and cuts
    the result (``shape``, ``dtype``) into the default blocking; every result block stays
    on that node. It reads real refs: flush any batch its operands came from first."""
    found = run_blockwise(op, operands, shape, dtype)
    if found is not None:
        return found
    cluster = ray_cluster()
    held = [0] * cluster.nodes
    described, refs = [], []
    for operand in operands:
        if not isinstance(operand, DistributedArray):
            operand = place(np.asarray(operand), tuple((0, n) for n in np.shape(operand)))
        blocks = operand.blocks.resolve(cluster.locate, cluster.epoch)
        whole = tuple(slice(0, n) for n in blocks.shape)
        pieces = blocks.pieces(whole)
        described.append((tuple(blocks.shape),
                          tuple((into, out_of) for _, into, out_of in pieces), len(pieces)))
        for coords, _, _ in pieces:
            refs.append(blocks.refs[coords])
            node = blocks.nodes.get(coords)
            if node is not None and 0 <= node < cluster.nodes:
                held[node] += math.prod(b.stop - b.start for b in blocks.block_slices(coords))
    node = max(range(cluster.nodes), key=lambda n: (held[n], -n))
    bounds = block_bounds(shape, default_blocking(shape, None, None, cluster.total_cpus))
    out = Blocks(shape, dtype, bounds, epoch=cluster.epoch)
    coords = list(np.ndindex(*out.grid))
    results = submit(cluster, "whole", node, _apply_whole, op, tuple(described),
                     tuple(out.block_slices(c) for c in coords), *refs,
                     returns=len(coords) + 1)
    for k, c in enumerate(coords):
        out.refs[c], out.reported[c], out.nodes[c] = results[k], results[-1], node
    return DistributedArray(out, node_grid_for(out.grid, cluster.nodes)), {"tasks": 1}


def run_blockwise(op: tuple, operands: Sequence[object], shape: tuple[int, ...],
                  dtype: np.dtype, *, batch=None,
                  pending: list | None = None) -> tuple[DistributedArray, dict] | None:
    """``op`` block by block on the nodes holding the blocks, or ``None`` when it cannot be:

    - a basic index (``getitem``; :mod:`tensorc.runtime.ray.slicing`): each result block
      is cut out of its one stored block, or is that block when the index keeps it whole;
    - an operation along one axis (:data:`ALONG_AXIS`) whose blocks do not split that axis:
      each block is one result block (the axis keeps its length, changes it, or goes);
    - ``("astype",)``: each block converted to ``dtype`` (a result computed in a wider
      dtype than its statement's, such as a comparison).

    The per-block steps form staged calls (:mod:`tensorc.runtime.ray.blockwise`, cached by
    the operation and the layout) run by the Ray executor: one call per node, merged into
    ``batch`` when given."""
    if len(operands) != 1 or not isinstance(operands[0], DistributedArray):
        return None
    found = _blockwise(op, operands[0].blocks, shape, dtype, batch=batch, pending=pending)
    if found is None:
        return None
    result, stats = found
    return DistributedArray(result, node_grid_for(result.grid, ray_cluster().nodes)), stats


def _blockwise(op: tuple, blocks: Blocks, shape, dtype, *, batch,
               pending) -> tuple[Blocks, dict] | None:
    """:func:`run_blockwise` on one operand's ``blocks``: the result's blocks and stats."""
    cluster = ray_cluster()
    blocks = blocks.resolve(cluster.locate, cluster.epoch)
    key = (op, blocks.key(), np.dtype(dtype).str, tuple(shape))
    program = _BLOCKWISE.get(key)
    if program is None:
        if op[0] == "astype":
            kernel = functools.partial(np.asarray, dtype=np.dtype(dtype))
            found = blocks.bounds, {c: (c, kernel) for c in np.ndindex(*blocks.grid)}
        elif op[0] == "getitem":
            found = _getitem_pieces(op[1], blocks, np.dtype(dtype))
        elif op[0] in ALONG_AXIS:
            found = _along_axis_pieces(op, blocks, tuple(shape), np.dtype(dtype))
        else:
            found = None
        if found is None:
            return None
        program = blockwise_calls(blocks, found[1], found[0], np.dtype(dtype))
        _BLOCKWISE[key] = program
        if len(_BLOCKWISE) > BLOCKWISE_KEPT:
            _BLOCKWISE.popitem(last=False)
    else:
        _BLOCKWISE.move_to_end(key)
    executor = CallRunner(cluster)
    result, _ = executor.run(program, [blocks], measure=cluster.measure, pending=pending,
                             batch=batch)
    tasks = sum(len(call.steps) for call in program.calls)
    return result, {"tasks": tasks, "blockwise": True, "remote_calls": len(program.calls)}


BLOCKWISE_KEPT = 64
"""Block-by-block programs kept (by operation and layout), least recently used dropped."""

_BLOCKWISE: OrderedDict = OrderedDict()

ALONG_AXIS = frozenset({"argmax", "argmin", "sort", "argsort", "cumulative_sum",
                        "cumulative_prod"})
"""Whole-array operations along one axis (``op[1]``, normalised; ``None``: all axes)."""


def _getitem_pieces(key: tuple, blocks: Blocks, dtype: np.dtype):
    sliced = slice_blocks(blocks.bounds, decode_index(key))
    if sliced is None:
        return None
    bounds, mapping = sliced
    same = np.dtype(blocks.dtype) == dtype
    return bounds, {
        coords: (piece.source, None if piece.whole and same
                 else functools.partial(_cut, piece.key, dtype))
        for coords, piece in mapping.items()}


def _cut(key: tuple, dtype: np.dtype, block: np.ndarray) -> np.ndarray:
    return np.array(block[key], dtype=dtype, order="C")


def _along_axis_pieces(op: tuple, blocks: Blocks, shape: tuple[int, ...], dtype: np.dtype):
    axis = op[1]
    if axis is None or len(blocks.bounds[axis]) != 2 or math.prod(blocks.grid) == 1:
        return None  # every axis, split along the axis, or one block: the whole-array task
    kept = len(shape) == len(blocks.bounds)
    bounds = tuple((0, shape[axis]) if d == axis else edges
                   for d, edges in enumerate(blocks.bounds) if kept or d != axis)
    kernel = functools.partial(_along_axis, op, dtype)
    return bounds, {(coords if kept else coords[:axis] + coords[axis + 1:]): (coords, kernel)
                    for coords in np.ndindex(*blocks.grid)}


def _along_axis(op: tuple, dtype: np.dtype, block: np.ndarray) -> np.ndarray:
    return np.asarray(apply_whole(op, block), dtype=dtype)


def _apply_whole(op: tuple, *values: np.ndarray) -> np.ndarray:
    return apply_whole(op, *values)


def layouts_of(operands: Sequence[object]) -> dict[int, Blocks]:
    """The layout (no data) of every ``DistributedArray`` operand, by position, for the planner."""
    cluster = ray_cluster()
    return {
        position: operand.blocks.resolve(cluster.locate, cluster.epoch).without_data()
        for position, operand in enumerate(operands) if isinstance(operand, DistributedArray)
    }


def prepare_ray_call(spec: EinsumSpec, operands: Sequence[object], plan_options: dict,
                     scheduler: str) -> tuple[dict, dict | None, int]:
    """How an einsum on the Ray session is planned: ``(plan options, placed, workers)``.

    Under LSHS (the scheduler the planner's model simulates), or when ``nodes=`` or
    ``planner=`` asks for it, the distribution planner plans for the session's nodes and
    ``placed`` gives the layout of every ``DistributedArray`` operand; otherwise the blocking
    follows the distributed operands (each index takes its block size from the first
    ``DistributedArray`` with it; ``grid=``/``block_shape=`` override), so loads are the
    stored blocks. Nothing
    here asks Ray anything: the session knows its nodes and every array where its blocks
    are."""
    cluster = ray_cluster()
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


RUN_CACHE_SIZE = 8
"""Staged calls a plan keeps, one per input layout it met (least recently used go)."""


def _staged(plan: Plan, inputs: list[Blocks], relayouts: dict, scheduler: str, cluster):
    """``(schedule, staged calls, modelled repartition bytes per node)`` of ``plan`` on
    these input layouts, from the plan's cache when it met them before."""
    key = (scheduler, cluster.nodes, cluster.epoch, tuple(sorted(relayouts)),
           tuple((b.key(), b.copies_key()) for b in inputs))
    runs = plan.runs
    found = runs.get(key)
    if found is not None:
        runs.move_to_end(key)
        return found
    graph = plan.graph
    dist = plan.distribution
    layouts = list(inputs)
    for position, (bounds, target) in relayouts.items():
        layouts[position] = Blocks.layout(bounds, target, inputs[position].dtype)
    load_nodes: dict[int, int] = {}
    copies: dict[int, list[int]] = {}
    for index, task in enumerate(graph.tasks):
        if task.kind != LOAD:
            continue
        position, slices = task.source
        first = layouts[position].pieces(slices)[0][0]
        load_nodes[index] = layouts[position].nodes.get(first, 0)
        if position not in relayouts and inputs[position].copies.get(first):
            copies[index] = sorted(inputs[position].copies[first])
    relaid = [0] * cluster.nodes
    hints = None
    if dist is not None:
        output_nodes = dist.modelled.output_nodes
        _, _, hints, relaid = layout(plan.problem, dist.candidate, graph)
    else:
        output_nodes = block_cyclic_output_nodes(
            graph, factor_over(cluster.nodes, _output_grid(graph)))
    placed = schedule(graph, cluster.nodes, scheduler, load_nodes=load_nodes,
                      output_nodes=output_nodes, cached_copies=copies, task_hints=hints)
    found = (placed, stage(graph, placed, inputs, relayouts), relaid)
    runs[key] = found
    if len(runs) > RUN_CACHE_SIZE:
        runs.popitem(last=False)
    return found


def finished(pending: list) -> bool:
    """Wait for the calls of plans run with ``pending=`` (:func:`run_on_ray`); ``False``
    when a node worker died meanwhile (the caller runs the work again, waiting each call),
    an :class:`~tensorc.errors.ExecutionError` for any other failure."""
    try:
        wait_for_calls(ray_cluster(), pending)
    except WorkerLost:
        return False
    return True


def lost_worker(err: BaseException) -> bool:
    """Whether ``err`` is Ray saying a node worker, or a block it held, is gone (a node
    died): a pipelined program then runs again, each statement waited for."""
    import ray

    return isinstance(err, (WorkerLost, ray.exceptions.RayActorError,
                            ray.exceptions.ObjectLostError))


def run_on_ray(plan: Plan, operands, scheduler: str, result_type=None,
               inputs_used: dict | None = None, measure: bool | None = None,
               pending: list | None = None, batch=None) -> tuple[DistributedArray, dict]:
    """Run a compiled plan on Ray: numpy operands are distributed as the plan cuts them,
    ``DistributedArray`` operands are read where they are, or re-laid out first when the plan says
    so (a copy the array kept from an earlier call is reused); returns the result as a
    ``DistributedArray``. ``inputs_used`` receives the arrays made of operands (distributed or
    re-laid out), by position. ``measure`` (default: the session's) reads Ray's object
    directory for the bytes it moved. With a ``pending`` list the call returns once its
    work is submitted (see :meth:`CallRunner.run`); ``run_seconds`` is then the time to
    submit, and ``ran_on`` the nodes asked for. With a ``batch``
    (:class:`~tensorc.runtime.ray.call_batch.CallBatch`) the calls join it and run when it is
    flushed; a numpy operand of at most :data:`INLINE_BYTES` then travels inside the call
    messages (it is not distributed, nor reported in ``inputs_used``)."""
    cluster = ray_cluster()
    if measure is None:
        measure = cluster.measure
    graph = plan.graph
    dist = plan.distribution
    if dist is not None and dist.modelled.schedule.nodes != cluster.nodes:
        raise PlanError(f"the plan is for {dist.modelled.schedule.nodes} nodes but the Ray "
                        f"session has {cluster.nodes}")
    planned_nodes = {}  # operand position -> node of each block under the plan's grid
    if dist is not None:
        for position in range(len(operands)):
            planned_nodes[position] = load_layout(graph, dist.modelled.load_nodes, position)
    inputs: list[Blocks] = []
    relayouts: dict[int, tuple] = {}
    moved = plan.problem.repartition if plan.problem is not None else frozenset()
    reused, local = [], []  # re-layouts kept from earlier calls; those left to the loads
    for position, operand in enumerate(operands):
        if not isinstance(operand, DistributedArray):
            data = np.asarray(operand)
            bounds = load_bounds(graph, position, data.shape)
            batched = batch is not None and not measure and pins(scheduler)
            if batched and data.nbytes <= INLINE_BYTES:
                inputs.append(inline(data, bounds, planned_nodes.get(position)))
                continue
            made = place(data, bounds, planned_nodes.get(position))
            inputs.append(made.blocks)
            if inputs_used is not None:
                inputs_used[position] = made
            continue
        blocks = operand.blocks.resolve(cluster.locate, cluster.epoch)
        if position in moved:
            bounds = load_bounds(graph, position, operand.shape)
            target = planned_nodes[position]
            kept = operand.relaid(Blocks.layout(bounds, target).key())
            if kept is not None and kept.epoch == cluster.epoch:
                blocks = kept
                reused.append(position)
                if inputs_used is not None:
                    inputs_used[position] = DistributedArray(kept, operand.node_grid)
            elif relayout_moves(blocks, bounds, target):
                relayouts[position] = (bounds, target)
            else:
                local.append(position)
        inputs.append(blocks)
    started = time.perf_counter()  # scheduling counts as planning; distributing does not
    placed, program, relaid = _staged(plan, inputs, relayouts, scheduler, cluster)
    planned = time.perf_counter()
    executor = CallRunner(cluster)
    result, new_layouts = executor.run(program, inputs, pinned=placed.pinned, measure=measure,
                                       pending=pending, batch=batch)
    for position, blocks in new_layouts.items():
        operands[position].keep_relaid(blocks, cluster.store_bytes)
        if inputs_used is not None:
            inputs_used[position] = DistributedArray(blocks, operands[position].node_grid)
    if result_type is not None and np.dtype(result.dtype) != np.dtype(result_type):
        result = cast(result, np.dtype(result_type), batch=batch, pending=pending)
    run = executor.last_run
    nodes = placed.nodes  # the cluster may have lost a node during the run
    if not relayouts:
        relaid = [0] * nodes
    recv = [a + b for a, b in zip(placed.net_in_bytes, relaid, strict=True)]
    sent = program.recv_bytes(nodes)
    stats = {
        **plan.stats,
        "backend": "ray",
        "nodes": nodes,
        "scheduler": placed.scheduler,
        "inter_node_bytes": placed.inter_node_bytes + sum(relaid),
        "max_node_recv_bytes": max(recv),
        "max_node_memory_bytes": placed.max_node_memory_bytes,
        "traded_tasks": placed.traded_tasks,
        "traded_bytes": placed.traded_bytes,
        "node_memory_bytes": list(placed.memory_bytes),
        "node_recv_bytes": recv,
        "node_send_bytes": list(placed.net_out_bytes),
        "repartitioned": sorted(moved),
        "relayout_reused": reused,
        "relayout_in_loads": local,
        "repartition_bytes": sum(relaid),
        "node_repartition_bytes": list(relaid),
        "transfer_bytes": sum(sent),
        "node_transfer_bytes": sent,
        "node_repartition_transfer_bytes": program.recv_bytes(nodes, repartition=True),
        "plan_seconds": planned - started,
        "run_seconds": run["run_seconds"],
        "measure_seconds": run["measure_seconds"],
        "remote_calls": run["remote_calls"],
        "stages": run["stages"],
        "ran_on": run["ran_on"],
        "node_of": list(placed.node_of),
        "measured": bool(measure),
    }
    stats.update(_measured(run["measured_node_recv_bytes"],
                           run["measured_node_repartition_bytes"]))
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
    return DistributedArray(result, factor_over(cluster.nodes, _output_grid(graph))), stats


def _measured(per_node: list[int] | None, relaid: list[int] | None) -> dict:
    """The measured-bytes statistics when Ray's object directory was read, else ``None``
    (never 0 for bytes nobody looked at)."""
    if per_node is None:
        return {"measured_inter_node_bytes": None, "measured_node_recv_bytes": None,
                "measured_max_node_recv_bytes": None, "measured_repartition_bytes": None,
                "measured_node_repartition_bytes": None}
    return {
        "measured_inter_node_bytes": sum(per_node),
        "measured_node_recv_bytes": list(per_node),
        "measured_max_node_recv_bytes": max(per_node, default=0),
        "measured_repartition_bytes": sum(relaid),
        "measured_node_repartition_bytes": relaid,
    }


def _output_grid(graph) -> tuple[int, ...]:
    """Blocks per dimension of the graph's output."""
    ndim = len(graph.output_shape)
    return tuple(len({slices[d].start for _, slices in graph.outputs}) for d in range(ndim))
