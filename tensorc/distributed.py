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
from tensorc.runtime.layout import block_cyclic_output_nodes
from tensorc.runtime.ray_executor import DistributedBlocks, RayExecutor, submit
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


def load_bounds(graph, position: int, shape: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """Block boundaries of operand ``position`` as the graph's load tasks cut it."""
    starts: list[set[int]] = [{0} for _ in shape]
    for task in graph.tasks:
        if task.source is not None and task.source[0] == position:
            for d, piece in enumerate(task.source[1]):
                starts[d].add(piece.start)
    return tuple(tuple(sorted(s for s in found if s < n or n == 0)) + (n,)
                 for found, n in zip(starts, shape, strict=True))


def cast(blocks: DistributedBlocks, dtype: np.dtype, cluster) -> DistributedBlocks:
    convert = functools.partial(np.asarray, dtype=dtype)
    nodes = blocks.node_ids()
    out = DistributedBlocks(blocks.shape, dtype, blocks.bounds, {})
    for coords, ref in blocks.refs.items():
        node = cluster.index_of(nodes.get(coords, ""))
        out.refs[coords], out.reported[coords] = submit(cluster, "run", node, convert, ref)
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
    plan, plan_cached = get_plan(options, cluster.total_cpus)
    planned = time.perf_counter()
    result, stats = execute_on_ray(plan, call.operands, call.scheduler, call.result_type)
    stats["plan_cached"] = plan_cached
    stats["plan_seconds"] += planned - started
    if any(isinstance(op, Array) for op in call.operands):
        return result, stats
    return result.numpy(), stats


def execute_on_ray(plan: Plan, operands, scheduler: str, result_type=None) -> tuple[Array, dict]:
    """Run a compiled plan on Ray: numpy operands are distributed as the plan cuts them,
    ``tc.Array`` operands are read where they are; returns the result as a ``tc.Array``."""
    cluster = ray_cluster()
    graph = plan.graph
    inputs = []
    for position, operand in enumerate(operands):
        if isinstance(operand, Array):
            inputs.append(operand.blocks)
        else:
            data = np.asarray(operand)
            inputs.append(distribute(data, load_bounds(graph, position, data.shape)).blocks)
    started = time.perf_counter()  # scheduling counts as planning; distributing does not
    executor = RayExecutor(cluster)
    out_node_grid = factor_over(cluster.nodes, _output_grid(graph))
    output_nodes = block_cyclic_output_nodes(graph, out_node_grid)
    load_nodes, cached_copies = executor.locate_loads(graph, inputs)
    placed = schedule(
        graph, cluster.nodes, scheduler,
        load_nodes=load_nodes, output_nodes=output_nodes, cached_copies=cached_copies,
    )
    planned = time.perf_counter()
    blocks = executor.run(graph, placed, inputs)
    if result_type is not None and np.dtype(blocks.dtype) != np.dtype(result_type):
        blocks = cast(blocks, np.dtype(result_type), cluster)
    run = executor.last_run
    stats = {
        **plan.stats,
        "backend": "ray",
        "nodes": cluster.nodes,
        "scheduler": placed.scheduler,
        "inter_node_bytes": placed.inter_node_bytes,
        "max_node_recv_bytes": placed.max_node_recv_bytes,
        "max_node_memory_bytes": placed.max_node_memory_bytes,
        "node_memory_bytes": list(placed.memory_bytes),
        "node_recv_bytes": list(placed.net_in_bytes),
        "node_send_bytes": list(placed.net_out_bytes),
        "plan_seconds": planned - started,
        "run_seconds": run["run_seconds"],
        "measured_inter_node_bytes": run["measured_inter_node_bytes"],
        "measured_node_recv_bytes": run["measured_node_recv_bytes"],
        "measured_max_node_recv_bytes": max(run["measured_node_recv_bytes"], default=0),
        "remote_calls": run["remote_calls"],
        "ran_on": run["ran_on"],
        "node_of": list(placed.node_of),
    }
    return Array(blocks, out_node_grid), stats


def _output_grid(graph) -> tuple[int, ...]:
    """Blocks per dimension of the graph's output."""
    ndim = len(graph.output_shape)
    return tuple(len({slices[d].start for _, slices in graph.outputs}) for d in range(ndim))
