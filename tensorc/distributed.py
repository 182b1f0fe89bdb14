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
from tensorc.frontend.subscripts import EinsumSpec
from tensorc.plan import Plan
from tensorc.runtime import ray_tasks
from tensorc.runtime.layout import block_cyclic_output_nodes
from tensorc.runtime.ray_executor import DistributedBlocks, RayExecutor, _strategy
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


def operand_bounds(plan: Plan, labels: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
    bounds = []
    for label in labels:
        ranges = plan.blocking.ranges(label)
        bounds.append(tuple(start for start, _ in ranges) + (ranges[-1][1],))
    return tuple(bounds)


def _cast(blocks: DistributedBlocks, dtype: np.dtype, cluster) -> DistributedBlocks:
    cast = functools.partial(np.asarray, dtype=dtype)
    run = ray_tasks.remote("run")
    nodes = blocks.node_ids()
    out = DistributedBlocks(blocks.shape, dtype, blocks.bounds, {})
    for coords, ref in blocks.refs.items():
        node = cluster.index_of(nodes.get(coords, ""))
        out.refs[coords], out.reported[coords] = run.options(
            scheduling_strategy=_strategy(cluster, node)
        ).remote(cast, ref)
    return out


def run_on_ray(call: RayCall, get_plan) -> tuple[object, dict]:
    """Plan, schedule and run ``call``; returns the result and the call's statistics.

    ``get_plan(plan_options, workers)`` returns ``(plan, cached)`` for the call's operands.
    """
    started = time.perf_counter()
    cluster = ray_cluster()
    cluster.refresh()
    options = dict(call.plan_options)
    if options.get("grid") is None and options.get("block_shape") is None:
        forced = forced_block_shape(call.spec, call.operands)
        if forced is not None:
            options["block_shape"] = forced
    plan, cached = get_plan(options, cluster.total_cpus)
    inputs = []
    for labels, operand in zip(call.spec.inputs, call.operands, strict=True):
        if isinstance(operand, Array):
            inputs.append(operand.blocks)
        else:
            inputs.append(distribute(np.asarray(operand), operand_bounds(plan, labels)).blocks)
    executor = RayExecutor(cluster)
    graph = plan.graph
    out_grid = _output_grid(graph)
    out_node_grid = factor_over(cluster.nodes, out_grid)
    output_nodes = block_cyclic_output_nodes(graph, out_node_grid)
    load_nodes, cached = executor.locate_loads(graph, inputs)
    placed = schedule(
        graph, cluster.nodes, call.scheduler,
        load_nodes=load_nodes, output_nodes=output_nodes, cached_copies=cached,
    )
    planned = time.perf_counter()
    blocks = executor.run(graph, placed, inputs)
    if np.dtype(blocks.dtype) != call.result_type:
        blocks = _cast(blocks, call.result_type, cluster)
    run = executor.last_run
    stats = {
        **plan.stats,
        "scheduler": placed.scheduler,
        "inter_node_bytes": placed.inter_node_bytes,
        "max_node_recv_bytes": placed.max_node_recv_bytes,
        "max_node_memory_bytes": placed.max_node_memory_bytes,
        "node_memory_bytes": list(placed.memory_bytes),
        "node_recv_bytes": list(placed.net_in_bytes),
        "node_send_bytes": list(placed.net_out_bytes),
        "backend": "ray",
        "nodes": cluster.nodes,
        "plan_cached": cached,
        "plan_seconds": planned - started,
        "run_seconds": run["run_seconds"],
        "measured_inter_node_bytes": run["measured_inter_node_bytes"],
        "measured_node_recv_bytes": run["measured_node_recv_bytes"],
        "measured_max_node_recv_bytes": max(run["measured_node_recv_bytes"], default=0),
        "remote_calls": run["remote_calls"],
        "ran_on": run["ran_on"],
        "node_of": list(placed.node_of),
    }
    result = Array(blocks, out_node_grid)
    if any(isinstance(op, Array) for op in call.operands):
        return result, stats
    return result.numpy(), stats


def _output_grid(graph) -> tuple[int, ...]:
    """Blocks per dimension of the graph's output."""
    ndim = len(graph.output_shape)
    return tuple(len({slices[d].start for _, slices in graph.outputs}) for d in range(ndim))
