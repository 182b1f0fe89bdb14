"""The Ray executor: every planned unit run on the node workers of a Ray cluster.

Contract: :class:`RayExecutor` implements :class:`~tensorc.runtime.executor.Executor` on a
connected :class:`~tensorc.runtime.ray.cluster.RayCluster`: a planned einsum is scheduled and
staged into one call per node and stage (:func:`~tensorc.runtime.ray.plans.run_on_ray`); a
statement program is pipelined with its calls merged
(:class:`~tensorc.runtime.ray.statements.RayStatementRun`); a block program's DAG is expanded
and placed on the driver a wave at a time, each wave submitted as one call per node and
level (:mod:`tensorc.runtime.ray.block_program`, :mod:`tensorc.runtime.ray.block_waves`).
Results stay on the nodes as :class:`~tensorc.runtime.ray.arrays.DistributedArray`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from tensorc.placement.blocks import block_bounds, default_blocking
from tensorc.runtime import data_dependent as kernels
from tensorc.runtime.executor import Executor, StatementPlanner
from tensorc.runtime.local import DEFAULT_MEMORY_FRACTION, available_memory
from tensorc.runtime.ray import arrays, data_dependent, plans, whole_array
from tensorc.runtime.ray.block_program import run_block_dag_on_ray
from tensorc.runtime.ray.node_calls import run_node_calls
from tensorc.runtime.ray.statements import DRIVER_BYTES, RayStatementRun
from tensorc.runtime.ray.streamed_results import write_result


def node_memory_budget(nodes: int) -> int:
    """The default budget of one node: a fraction of the smaller of Ray's ``memory``
    resource of a node and this machine's available memory shared by the nodes on it."""
    import ray

    per_host: dict[str, list[float]] = {}
    for node in ray.nodes():
        if node.get("Alive"):
            per_host.setdefault(node.get("NodeManagerAddress", ""), []).append(
                float(node.get("Resources", {}).get("memory", 0.0)))
    shares = []
    local = available_memory()
    for memories in per_host.values():
        for memory in memories:
            share = local / len(memories)
            shares.append(min(memory, share) if memory else share)
    return int(DEFAULT_MEMORY_FRACTION * min(shares or [local / max(nodes, 1)]))


class RayExecutor(Executor):
    """Runs planned units on a Ray cluster; see the module docstring."""

    backend = "ray"
    in_process = False

    def __init__(self, cluster, scheduler: str = "lshs") -> None:
        self.cluster = cluster
        self.scheduler = scheduler
        """The session's placement, for units that do not name their own."""
        self._default_memory: int | None = None

    @property
    def nodes(self) -> int:
        return self.cluster.nodes

    @property
    def cpus(self) -> int:
        return self.cluster.total_cpus

    def default_memory_limit(self) -> tuple[int, str]:
        if self._default_memory is None:
            self._default_memory = node_memory_budget(self.cluster.nodes)
        return self._default_memory, (
            f"the default: {DEFAULT_MEMORY_FRACTION:.0%} of each node's memory (Ray's "
            "'memory' resource, shared among the nodes on one machine)")

    def plan_inputs(self, spec, operands: Sequence[object], plan_options: dict,
                    scheduler: str) -> tuple[dict, dict | None, int, tuple[str, ...]]:
        options, placed, cpus = plans.prepare_ray_call(spec, operands, plan_options, scheduler)
        return options, placed, cpus, ("C",) * len(operands)

    def layouts_of(self, operands: Sequence[object]) -> dict:
        return plans.layouts_of(operands)

    def run_plan(self, plan, operands: Sequence[object], *, out: np.ndarray | None = None,
                 result_type=None, scheduler: str = "lshs", measure: bool | None = None,
                 workers: int | None = None, cached: bool = False,
                 plan_seconds: float = 0.0) -> tuple[object, dict]:
        started = time.perf_counter()
        result, stats = plans.run_on_ray(plan, list(operands), scheduler, result_type,
                                         measure=measure)
        stats["plan_cached"] = cached
        stats["plan_seconds"] += plan_seconds
        stats["call_seconds"] = plan_seconds + time.perf_counter() - started
        return result, stats

    def run_statements(self, planner: StatementPlanner, unrolled, arrays: dict,
                       sinks: dict) -> tuple[dict, list, int | None]:
        run = RayStatementRun(planner, self.cluster, self.scheduler)
        values, ran = run.run(arrays, unrolled, sinks=sinks)
        for label, sink in sinks.items():  # not written by the nodes as they computed it
            if label not in run.writers:
                write_result(sink, values[label] if label in values else arrays[label])
                values[label] = None
        return values, ran, run.node_calls

    def run_block_program(self, program, dag, inputs: dict, bounds, *, scheduler: str,
                          workers: int | None, dtype, memory_limit: int | None = None
                          ) -> tuple[dict, dict]:
        return run_block_dag_on_ray(program, dag, inputs, bounds, self.cluster, scheduler,
                                    dtype=dtype, memory_limit=memory_limit)

    def run_node_calls(self, calls: Sequence[tuple[int, object, Sequence]]
                       ) -> tuple[list, dict]:
        return run_node_calls(self.cluster, calls)

    def join_columns(self, values: Sequence[object]) -> object | None:
        return arrays.join_columns(values)

    def place(self, value: np.ndarray, block_shape=None, grid=None) -> object:
        small = value.nbytes <= DRIVER_BYTES and block_shape is None and grid is None
        if small:  # stays on the driver; the calls that read it carry it
            return value
        return arrays.asarray(value, block_shape=block_shape, grid=grid)

    def full(self, shape: tuple[int, ...], fill_value, dtype: np.dtype, block_shape=None,
             grid=None) -> object:
        return arrays.full(shape, fill_value, block_shape=block_shape, grid=grid, dtype=dtype)

    def random(self, shape: tuple[int, ...], dtype: np.dtype, seed: int, block_shape=None,
               grid=None) -> object:
        return arrays.random(shape, block_shape=block_shape, grid=grid, seed=seed, dtype=dtype)

    def reblock(self, value, block_shape=None, grid=None) -> object:
        """A distributed value re-cut where it is (only the elements a new block needs
        travel, nothing through the driver); a driver value placed on the nodes."""
        if not isinstance(value, arrays.DistributedArray):
            return arrays.asarray(np.asarray(value), block_shape=block_shape, grid=grid)
        cluster = self.cluster
        cluster.refresh()
        shape = tuple(value.shape)
        if 0 in shape:
            return arrays.asarray(np.empty(shape, value.dtype), block_shape=block_shape,
                                  grid=grid)
        bounds = block_bounds(shape, default_blocking(shape, block_shape, grid,
                                                      cluster.total_cpus))
        if tuple(tuple(b) for b in bounds) == tuple(tuple(b) for b in value.layout.bounds):
            return value
        grid_of = tuple(len(edges) - 1 for edges in bounds)
        return whole_array.relayout(value, bounds, arrays.node_grid_for(grid_of, cluster.nodes))

    def select(self, value, mask) -> object:
        """Block by block where ``value``'s blocks are, the result distributed in blocks of
        uneven size (:func:`~tensorc.runtime.ray.data_dependent.select`); a driver value
        (small) is selected here."""
        if not isinstance(value, arrays.DistributedArray) or value.size == 0:
            return np.asarray(value)[np.asarray(mask)]
        return data_dependent.select(value, mask)

    def unique(self, value, kind: str) -> tuple:
        """Per block on its node, merged on the driver when small, else on one node
        (:func:`~tensorc.runtime.ray.data_dependent.unique`)."""
        if not isinstance(value, arrays.DistributedArray) or value.size == 0:
            return kernels.unique_of(np.asarray(value), kind)
        return data_dependent.unique(value, kind, self.reblock)

    def nonzero(self, value) -> tuple:
        """Per block on its node, block offsets added, each result cut along the blocks
        (:func:`~tensorc.runtime.ray.data_dependent.nonzero`)."""
        if not isinstance(value, arrays.DistributedArray) or value.size == 0:
            return tuple(i.astype(kernels.INDEX) for i in np.nonzero(np.asarray(value)))
        return data_dependent.nonzero(value)
