"""Running a planned einsum on Ray: operands bound, the graph scheduled and staged into node
calls, the calls run, the statistics of the run.

Contract:

- :func:`run_on_ray` runs a plan on the connected cluster: numpy operands are distributed
  as the plan cuts them, an array not made yet (a
  :class:`~tensorc.placement.recipes.Recipe`) is made on the nodes its loads are planned
  on, ``DistributedArray`` operands are read where they live, or re-laid
  out first when the plan says so (a repartition is the first units of the staged calls);
  operands read from storage (:class:`~tensorc.stored.StoredArray`: ``tc.from_zarr``,
  ``tc.load``, a numpy memmap) are never materialised: each block is read from the store
  by the node call that uses it (:mod:`tensorc.runtime.ray.stages`), never through the
  driver or Ray's object store, within the node's memory budget;
  the result stays distributed and its blocks stay on the nodes that computed them. The
  schedule and staged calls of a plan are cached per input layout (``Plan.runs``);
- :func:`prepare_ray_call` says how an einsum on Ray is planned: under LSHS (or with
  ``nodes=``/``planner=``) by the distribution planner for the cluster's nodes, with the
  operands' layouts (:class:`~tensorc.placement.blocks.Blocks`, :func:`layouts_of`);
  otherwise with the blocking of the distributed operands (the first ``DistributedArray``
  with an index gives its block size). The memory budget of a node (``memory_limit``) is
  the distribution planner's per-node memory (``node_memory``) unless the call gives one;
- :func:`finished` and :func:`lost_worker` tell a pipelined statement program whether its
  calls completed or a node worker died.

Ray runs report the schedule's modelled loads, the bytes the calls carry, and (``measure``)
the bytes Ray actually moved, measured from object locations; the bytes each node read from
storage (``node_read_bytes``) and the operand bytes put into the object store
(``put_bytes``); the node budget (``memory_limit_bytes``) and the peak RSS each node's
worker measured during its calls (``node_peak_rss_bytes``, the highest ``peak_rss_bytes``).
Whole-array operations are :mod:`tensorc.runtime.ray.whole_array`'s.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tensorc.codegen.taskgraph import LOAD
from tensorc.errors import PlanError
from tensorc.frontend.subscripts import EinsumSpec
from tensorc.placement.blocks import Blocks
from tensorc.placement.layout import (
    block_cyclic_output_nodes,
    load_bounds,
    load_layout,
)
from tensorc.placement.recipes import Recipe
from tensorc.placement.schedule import pins, schedule
from tensorc.planning.distribution import layout
from tensorc.planning.lower_bound import communication_lower_bound
from tensorc.planning.plan import Plan
from tensorc.runtime.ray.arrays import (
    DistributedArray,
    factor_over,
    generate,
    inline,
    place,
    stored_layout,
)
from tensorc.runtime.ray.calls import (
    CallRunner,
    WorkerLost,
    wait_for_calls,
    worker_lost_errors,
)
from tensorc.runtime.ray.cluster import connected as ray_cluster
from tensorc.runtime.ray.inline import INLINE_BYTES
from tensorc.runtime.ray.stages import SINK, relayout_moves, stage
from tensorc.runtime.ray.whole_array import cast
from tensorc.stored import StoredArray


class NodesChanged(PlanError):
    """The cluster's node count is not the one the plan was made for (a node died or
    joined since): plan again."""




def forced_block_shape(spec: EinsumSpec, operands) -> dict[str, int] | None:
    """Block size per index taken from the distributed operands (first one wins)."""
    chosen: dict[str, int] = {}
    for labels, operand in zip(spec.inputs, operands, strict=True):
        if not isinstance(operand, DistributedArray):
            continue
        for label, size in zip(labels, operand.block_shape, strict=True):
            chosen.setdefault(label, max(1, size))
    return chosen or None


def layouts_of(operands: Sequence[object]) -> dict[int, Blocks]:
    """The layout (no data) of every ``DistributedArray`` operand, by position, for the planner."""
    cluster = ray_cluster()
    return {
        position: operand.layout.resolve(cluster.locate, cluster.epoch).without_data()
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
    if options.get("node_memory") is None and options.get("memory_limit") is not None:
        options["node_memory"] = options["memory_limit"]  # the node's budget, as planned
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


def node_budget(plan: Plan) -> int | None:
    """The memory budget of one node a plan was made for (bytes; ``None``: none)."""
    if plan.memory is not None:
        return plan.memory.budget
    return plan.problem.memory_bytes if plan.problem is not None else None


def _staged(plan: Plan, inputs: list[Blocks], relayouts: dict, scheduler: str, cluster,
            stored: frozenset = frozenset(), sink: bool = False):
    """``(schedule, staged calls, modelled repartition bytes per node)`` of ``plan`` on
    these input layouts (``stored``: the positions read from storage; ``sink``: the result
    written by the nodes), from the plan's cache when it met them before."""
    key = (scheduler, cluster.nodes, cluster.epoch, tuple(sorted(relayouts)),
           tuple((b.key(), b.copies_key()) for b in inputs), tuple(sorted(stored)), sink)
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
    found = (placed, stage(graph, placed, inputs, relayouts, stored, node_budget(plan), sink),
             relaid)
    runs[key] = found
    if len(runs) > RUN_CACHE_SIZE:
        runs.popitem(last=False)
    return found


def finished(pending: list, peaks: list | None = None) -> bool:
    """Wait for the calls of plans run with ``pending=`` (:func:`run_on_ray`); ``False``
    when a node worker died meanwhile (the caller runs the work again, waiting each call),
    a call's :class:`~tensorc.errors.StorageError` as it is, an
    :class:`~tensorc.errors.ExecutionError` for any other failure. ``peaks`` (a list)
    receives the peak RSS measured on each node during the calls."""
    try:
        measured = wait_for_calls(ray_cluster(), pending)
    except WorkerLost:
        return False
    if peaks is not None:
        peaks[:] = measured
    return True


def lost_worker(err: BaseException) -> bool:
    """Whether ``err`` says a node died: Ray saying a node worker, or a block it held, is
    gone, or a plan meeting fewer nodes than it was made for. A pipelined program then runs
    again, each statement waited for."""
    return isinstance(err, (WorkerLost, NodesChanged, *worker_lost_errors()))


def run_on_ray(plan: Plan, operands, scheduler: str, result_type=None,
               inputs_used: dict | None = None, measure: bool | None = None,
               pending: list | None = None, batch=None,
               sink=None) -> tuple[DistributedArray, dict]:
    """Run a compiled plan on Ray: numpy operands are distributed as the plan cuts them,
    ``DistributedArray`` operands are read where they are, or re-laid out first when the
    plan says so (a copy the array kept from an earlier call is reused); returns the result
    as a ``DistributedArray``. ``inputs_used`` receives the arrays made of operands
    (distributed or re-laid out), by position. ``measure`` (default: the session's) reads
    Ray's object directory for the bytes it moved. With a ``pending`` list the call returns
    once its work is submitted (see :meth:`CallRunner.run`); ``run_seconds`` is then the time
    to submit, and ``ran_on`` the nodes asked for. With a ``batch``
    (:class:`~tensorc.runtime.ray.call_batch.CallBatch`) the calls join it and run when it
    is flushed; a numpy operand of at most
    :data:`~tensorc.runtime.ray.inline.INLINE_BYTES` then travels inside the call messages
    (it is not distributed, nor reported in ``inputs_used``). With a ``sink`` (a
    :class:`~tensorc.stored.BlockSink`'s node writer, the sink opened) each result block is
    written by the call that computed it and the returned array's blocks are the bytes
    written (:mod:`tensorc.runtime.ray.streamed_results`)."""
    cluster = ray_cluster()
    if measure is None:
        measure = cluster.measure
    dist = plan.distribution
    if dist is not None and dist.modelled.schedule.nodes != cluster.nodes:
        raise NodesChanged(f"the plan is for {dist.modelled.schedule.nodes} nodes but the Ray "
                           f"session has {cluster.nodes}")
    inlined = batch is not None and not measure and pins(scheduler)
    bound = _bind_inputs(plan, operands, cluster, inlined, inputs_used)
    started = time.perf_counter()  # scheduling counts as planning; distributing does not
    placed, staged, relaid = _staged(plan, bound.inputs, bound.relayouts, scheduler, cluster,
                                     frozenset(bound.stored), sink is not None)
    planned = time.perf_counter()
    runner = CallRunner(cluster)
    stored = bound.stored if sink is None else {**bound.stored, SINK: sink}
    result, new_layouts = runner.run(staged, bound.inputs, pinned=placed.pinned,
                                     measure=measure, pending=pending, batch=batch,
                                     stored=stored)
    for position, blocks in new_layouts.items():
        operands[position].keep_relaid(blocks, cluster.store_bytes)
        if inputs_used is not None:
            inputs_used[position] = DistributedArray(blocks, operands[position].node_grid)
    if (sink is None and result_type is not None
            and np.dtype(result.dtype) != np.dtype(result_type)):
        result = cast(result, np.dtype(result_type), batch=batch, pending=pending)
    stats = _run_stats(plan, placed, staged, runner.last_run, bound,
                       relaid if bound.relayouts else [0] * placed.nodes, measure, cluster)
    stats["plan_seconds"] = planned - started
    return DistributedArray(result, factor_over(cluster.nodes, _output_grid(plan.graph))), stats


@dataclass
class _BoundInputs:
    """A plan's operands as the staged calls read them: one ``Blocks`` each, the
    re-layouts still to make (position -> (bounds, nodes)), and which operands the plan
    repartitions, reuses a kept copy of, or leaves to the loads to stitch."""

    inputs: list[Blocks] = field(default_factory=list)
    relayouts: dict[int, tuple] = field(default_factory=dict)
    moved: frozenset = frozenset()
    reused: list[int] = field(default_factory=list)
    local: list[int] = field(default_factory=list)
    stored: dict[int, StoredArray] = field(default_factory=dict)
    """Operands read from storage by the calls, by position (their layout only says where
    the schedule expects each block read)."""
    put_bytes: int = 0
    """Bytes of numpy operands this binding put into Ray's object store."""


def _bind_inputs(plan: Plan, operands, cluster, inlined: bool,
                 inputs_used: dict | None) -> _BoundInputs:
    """Each operand as ``Blocks``: a numpy operand distributed as the plan cuts it (or, when
    ``inlined`` and small, carried inside the call messages); one read from storage as the
    layout of the blocks its loads read, nothing made (the calls read them); a distributed
    one where it is (its held blocks as they are, each read in place by a call on its
    holder's node: :attr:`~tensorc.runtime.ray.arrays.DistributedArray.blocks_in_place`), or
    its kept re-laid-out copy, or marked for re-layout when the plan repartitions it."""
    graph = plan.graph
    dist = plan.distribution
    planned_nodes = {}  # operand position -> node of each block under the plan's grid
    if dist is not None:
        for position in range(len(operands)):
            planned_nodes[position] = load_layout(graph, dist.modelled.load_nodes, position)
    bound = _BoundInputs(
        moved=plan.problem.repartition if plan.problem is not None else frozenset())
    for position, operand in enumerate(operands):
        if isinstance(operand, StoredArray):
            bounds = load_bounds(graph, position, operand.shape)
            bound.inputs.append(stored_layout(operand.shape, operand.dtype, bounds,
                                              planned_nodes.get(position)))
            bound.stored[position] = operand
            continue
        if isinstance(operand, Recipe):  # not made yet: made where the plan reads it
            made = generate(operand, load_bounds(graph, position, operand.shape),
                            planned_nodes.get(position))
            bound.inputs.append(made.blocks_in_place)  # held ones read where they are
            if inputs_used is not None:
                inputs_used[position] = made
            continue
        if not isinstance(operand, DistributedArray):
            data = np.asarray(operand)
            bounds = load_bounds(graph, position, data.shape)
            if inlined and data.nbytes <= INLINE_BYTES:
                bound.inputs.append(inline(data, bounds, planned_nodes.get(position)))
                continue
            made = place(data, bounds, planned_nodes.get(position))
            bound.put_bytes += data.nbytes
            bound.inputs.append(made.blocks)
            if inputs_used is not None:
                inputs_used[position] = made
            continue
        blocks = operand.blocks_in_place.resolve(cluster.locate, cluster.epoch)
        if position in bound.moved:
            bounds = load_bounds(graph, position, operand.shape)
            target = planned_nodes[position]
            kept = operand.relaid(Blocks.layout(bounds, target).key())
            if kept is not None and kept.epoch == cluster.epoch:
                blocks = kept
                bound.reused.append(position)
                if inputs_used is not None:
                    inputs_used[position] = DistributedArray(kept, operand.node_grid)
            elif relayout_moves(blocks, bounds, target):
                bound.relayouts[position] = (bounds, target)
            else:
                bound.local.append(position)
        bound.inputs.append(blocks)
    return bound


def _run_stats(plan: Plan, placed, staged, run: dict, bound: _BoundInputs,
               relaid: list[int], measure: bool, cluster) -> dict:
    """The statistics of one run: the schedule's modelled loads (plus the repartition's
    bytes), the bytes the calls carried, what the run measured, the lower bound."""
    nodes = placed.nodes  # the cluster may have lost a node during the run
    recv = [a + b for a, b in zip(placed.net_in_bytes, relaid, strict=True)]
    sent = staged.recv_bytes(nodes)
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
        "repartitioned": sorted(bound.moved),
        "relayout_reused": bound.reused,
        "relayout_in_loads": bound.local,
        "repartition_bytes": sum(relaid),
        "node_repartition_bytes": list(relaid),
        "transfer_bytes": sum(sent),
        "node_transfer_bytes": sent,
        "node_repartition_transfer_bytes": staged.recv_bytes(nodes, repartition=True),
        "stored_operands": sorted(bound.stored),
        "node_read_bytes": staged.read_bytes(
            nodes, {p: op.dtype.itemsize for p, op in bound.stored.items()}),
        "put_bytes": bound.put_bytes,
        "memory_limit_bytes": node_budget(plan),
        "node_peak_rss_bytes": run.get("node_peak_rss_bytes"),
        "peak_rss_bytes": _highest(run.get("node_peak_rss_bytes")),
        "run_seconds": run["run_seconds"],
        "measure_seconds": run["measure_seconds"],
        "remote_calls": run["remote_calls"],
        "driver_folds": run.get("driver_folds", 0),
        "folded_tasks": run.get("folded_tasks", []),
        "stages": run["stages"],
        "ran_on": run["ran_on"],
        "node_of": list(placed.node_of),
        "measured": bool(measure),
    }
    stats.update(_measured(run["measured_node_recv_bytes"],
                           run["measured_node_repartition_bytes"]))
    dist = plan.distribution
    if dist is not None:
        bound_bytes = dist.lower_bound_bytes
        stats["lower_bound_ratio"] = (stats["max_node_recv_bytes"] / bound_bytes
                                      if bound_bytes else None)
    elif plan.spec is not None:  # not planned for the cluster: the einsum as written
        spec = plan.spec
        stats["lower_bound_bytes"] = communication_lower_bound(
            spec.inputs, spec.output, spec.size_of, cluster.nodes,
            np.dtype(plan.graph.dtype).itemsize)
    else:
        stats["lower_bound_bytes"] = None
    return stats


def _highest(per_node: list | None) -> int | None:
    values = [v for v in per_node or () if v is not None]
    return max(values) if values else None


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
