"""The local executor: every planned unit run in this process, on threads.

Contract: :class:`LocalExecutor` implements :class:`~tensorc.runtime.executor.Executor` for
one process, the embedded default when no Ray cluster is connected: a planned einsum's task
graph runs on the :class:`~tensorc.runtime.task_pool.TaskPool`, writing into the result array
the driver allocated; a statement program runs statement by statement
(:mod:`tensorc.runtime.statements`); a block program's DAG is expanded from its ready tasks
on a thread pool (:mod:`tensorc.runtime.block_frontier`). Results are numpy arrays.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from tensorc.errors import TypeCheckError
from tensorc.placement.blocks import RANDOM_DTYPES, block_bounds, default_blocking
from tensorc.runtime import block_frontier, data_dependent, statements
from tensorc.runtime.executor import Executor, StatementPlanner
from tensorc.runtime.task_pool import TaskPool, admission_budget, available_cores
from tensorc.stored import StoredArray


class LocalExecutor(Executor):
    """Runs planned units in this process; see the module docstring."""

    backend = "local"
    in_process = True

    def __init__(self) -> None:
        self._default_memory: int | None = None

    @property
    def nodes(self) -> int:
        return 1

    @property
    def cpus(self) -> int:
        return available_cores()

    def default_memory_limit(self) -> tuple[int, str]:
        if self._default_memory is None:
            available = available_memory()
            self._default_memory = int(DEFAULT_MEMORY_FRACTION * available)
        return self._default_memory, (
            f"the default: {DEFAULT_MEMORY_FRACTION:.0%} of the memory available when the "
            "session started")

    def plan_inputs(self, spec, operands: Sequence[object], plan_options: dict,
                    scheduler: str) -> tuple[dict, dict | None, int, tuple[str, ...]]:
        orders = tuple(a.order if isinstance(a, StoredArray) else memory_order(np.asarray(a))
                       for a in operands)
        return plan_options, None, available_cores(), orders

    def layouts_of(self, operands: Sequence[object]) -> dict:
        return {}

    def run_plan(self, plan, operands: Sequence[object], *, out: np.ndarray | None = None,
                 result_type=None, scheduler: str = "lshs", measure: bool | None = None,
                 workers: int | None = None, cached: bool = False,
                 plan_seconds: float = 0.0) -> tuple[object, dict]:
        if out is None:
            out = np.empty(plan.graph.output_shape, dtype=plan.graph.dtype)
        pool = TaskPool(workers, admission_budget(plan))
        pool.run(plan.graph, None, operands, out)
        seconds = plan_seconds if cached else plan.stats["plan_seconds"]
        return out, statements.local_stats(plan, pool.last_run, cached=cached,
                                           plan_seconds=seconds)

    def run_statements(self, planner: StatementPlanner, unrolled, arrays: dict,
                       sinks: dict) -> tuple[dict, list, int | None]:
        values, ran = statements.run_statements_here(planner, unrolled, arrays, sinks)
        return values, ran, None

    def run_block_program(self, program, dag, inputs: dict, bounds, *, scheduler: str,
                          workers: int | None, dtype, memory_limit: int | None = None
                          ) -> tuple[dict, dict]:
        arrays = {name: np.asarray(value) for name, value in inputs.items()}
        return block_frontier.run_block_dag_here(program, dag, arrays, bounds, workers, dtype)


    def place(self, value: np.ndarray, block_shape=None, grid=None) -> np.ndarray:
        return value

    def full(self, shape: tuple[int, ...], fill_value, dtype: np.dtype, block_shape=None,
             grid=None) -> np.ndarray:
        return np.full(shape, fill_value, dtype=dtype)

    def random(self, shape: tuple[int, ...], dtype: np.dtype, seed: int, block_shape=None,
               grid=None) -> np.ndarray:
        if dtype.name not in RANDOM_DTYPES:
            raise TypeCheckError(f"tc.random makes {' or '.join(RANDOM_DTYPES)}, not {dtype}")
        bounds = block_bounds(shape, default_blocking(shape, block_shape, grid,
                                                      available_cores()))
        out = np.empty(shape, dtype)
        for coords in np.ndindex(*(len(b) - 1 for b in bounds)):
            where = tuple(slice(b[c], b[c + 1]) for b, c in zip(bounds, coords, strict=True))
            extent = tuple(s.stop - s.start for s in where)
            rng = np.random.default_rng([int(seed), *coords])
            out[where] = rng.random(extent, dtype=dtype)
        return out

    def reblock(self, value, block_shape=None, grid=None) -> np.ndarray:
        return np.array(value, copy=True)

    def select(self, value, mask) -> np.ndarray:
        return np.asarray(value)[np.asarray(mask)]

    def unique(self, value, kind: str) -> tuple:
        return data_dependent.unique_of(value, kind)

    def nonzero(self, value) -> tuple:
        return tuple(i.astype(data_dependent.INDEX) for i in np.nonzero(np.asarray(value)))


DEFAULT_MEMORY_FRACTION = 0.6
"""Of the memory available at the first planned call: the default budget of a local run
(Dask's workers spill at 60 % of their limit)."""


def available_memory() -> int:
    """Bytes of memory available to new allocations (Linux's MemAvailable; elsewhere the
    physical memory)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:  # pragma: no cover - not Linux
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def memory_order(array: np.ndarray) -> str:
    """``"C"``, ``"F"`` or ``"other"``: the memory order the local plan keys on."""
    if array.flags.c_contiguous:
        return "C"
    return "F" if array.flags.f_contiguous else "other"
