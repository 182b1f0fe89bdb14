"""Running a block program's DAG in this process, expanded from its ready tasks.

Contract: :func:`run_block_dag_here` runs a :class:`~tensorc.ir.block_program.BlockProgramIR`'s DAG
(:class:`~tensorc.codegen.block_dag.BlockDag`, built for the sizes and block counts: each
dimension of a size ``N`` with a block count ``NB`` cut into ``NB`` near-equal blocks, block
``k`` spanning ``k*N//NB`` to ``(k+1)*N//NB``) on ndarray inputs and returns ``(outputs by
name, stats)``. Output blocks no statement writes are zeros. The same frontier bookkeeping
(:class:`_Frontier`, the children of a finished task, assembling outputs) serves the Ray
run, :mod:`tensorc.runtime.ray.block_program`, which walks the DAG in program order and so
needs no completeness check.

The DAG is never built whole (the BlockDag answers parents and children symbolically): the
ready tasks run on a thread pool (``workers`` threads, BLAS limited so the machine's cores
are not oversubscribed); when a task finishes, its children are found, each new child learns
how many parent tasks it waits for, and a child whose parents are all done becomes ready. A
block version is dropped once every child has read it, unless it is the final version of an
output block.

Statistics (``tc.last_stats()`` after a run): ``tasks``, ``max_node_memory_bytes``,
``run_seconds``, ``backend``, ``peak_frontier`` (the most tasks the driver knew of at once);
on Ray also ``tasks_per_node``, ``inter_node_bytes`` (modelled copies) and ``scheduler``.
"""

from __future__ import annotations

import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import numpy as np

from tensorc.codegen.block_dag import BlockDag
from tensorc.codegen.block_kernels import evaluate_block_expr, result_shapes
from tensorc.codegen.block_layout import block_slices, grid_coords, tensor_bounds
from tensorc.errors import ExecutionError, ShapeError
from tensorc.frontend.tc_check import DTYPES
from tensorc.ir.block_program import BlockProgramIR, block_label
from tensorc.planning.block_counts import placed_flops
from tensorc.runtime.task_pool import _BlasLimit, available_cores


def numpy_dtype(spec_dtype: str) -> np.dtype:
    return np.dtype(DTYPES.get(spec_dtype, spec_dtype))


class _Frontier:
    """The tasks the driver knows of: how many parent tasks each still waits for."""

    def __init__(self, dag: BlockDag) -> None:
        self.dag = dag
        self.waiting: dict = {}
        self.edges: dict = {}
        self.peak = 0

    def start(self) -> list:
        ready = []
        for task in self.dag.roots():
            self.edges[task] = self.dag.parents(task)
            ready.append(task)
        return ready

    def finished(self, children: list) -> list:
        """``children`` (of one task, deduplicated) each lose one parent; returns the ready."""
        ready = []
        for child in children:
            left = self.waiting.get(child)
            if left is None:
                edges = self.dag.parents(child)
                self.edges[child] = edges
                left = len({e.task for e in edges if e.task is not None})
            left -= 1
            if left:
                self.waiting[child] = left
            else:
                self.waiting.pop(child, None)
                ready.append(child)
        self.peak = max(self.peak, len(self.waiting) + len(ready))
        return ready


def _check_complete(dag: BlockDag, frontier: _Frontier, ran: int) -> None:
    """Every task of the program ran. A task whose reads are all of blocks no earlier
    statement writes is nobody's child and no root: counting the iteration space (a walk,
    no analysis) finds that, and the first such read is reported where it is written."""
    total = sum(1 for _ in dag.walk())
    if total == ran and not frontier.waiting:
        return
    for task in dag.walk():
        dag.parents(task)  # raises E-unwritten at the offending read
    raise ExecutionError(f"{total - ran} of the block program's {total} tasks never became "
                         "ready")


def _children(dag: BlockDag, task) -> tuple[list, list]:
    per_result = dag.children(task)
    distinct = []
    for readers, _ in per_result:
        for child in readers:
            if child not in distinct:
                distinct.append(child)
    return per_result, distinct


def _output_arrays(program, bounds, finals, fill) -> dict:
    out = {}
    for name in program.outputs():
        edges = tensor_bounds(program, name, bounds)
        out[name] = fill(name, edges, {c: finals.get((name, c)) for c in grid_coords(edges)})
    return out


def run_block_dag_here(program: BlockProgramIR, dag: BlockDag, arrays: dict[str, np.ndarray],
                       bounds, workers: int | None = None,
                       dtype=None) -> tuple[dict[str, np.ndarray], dict]:
    """Run on this process (see the module docstring)."""
    started = time.perf_counter()
    cores = available_cores()
    workers = max(1, workers or cores)
    edges_of = {name: tensor_bounds(program, name, bounds) for name in program.inputs()}
    frontier = _Frontier(dag)
    versions: dict = {}
    uses: dict = {}
    finals: dict = {}
    tasks = 0

    def run(task, edges):
        values = {}
        for edge in edges:
            if edge.task is None:
                values[edge.read] = arrays[edge.read.tensor][
                    block_slices(edges_of[edge.read.tensor], edge.coords)]
            else:
                values[edge.read] = versions[(edge.task, edge.result)]
        return evaluate_block_expr(dag.sites[task[0]].assign.value, values)

    def complete(task, results) -> list:
        for key in {(e.task, e.result) for e in frontier.edges.pop(task) if e.task is not None}:
            if key in uses:
                uses[key] -= 1
                if not uses[key]:
                    del uses[key]
                    versions.pop(key, None)
        per_result, distinct = _children(dag, task)
        written = dag.written(task)
        for j, ((readers, final), value) in enumerate(zip(per_result, results, strict=True)):
            tensor, coords = written[j]
            if final and program.tensors[tensor].kind == "output":
                finals[(tensor, coords)] = value
            if readers:
                versions[(task, j)] = value
                uses[(task, j)] = len(readers)
        return frontier.finished(distinct)

    ready = deque(frontier.start())
    with _BlasLimit(max(1, cores // workers)):
        if workers == 1:
            while ready:
                task = ready.popleft()
                ready.extend(complete(task, run(task, frontier.edges[task])))
                tasks += 1
        else:
            with ThreadPoolExecutor(workers, thread_name_prefix="tensorc-block") as pool:
                running = {}
                while ready or running:
                    while ready and len(running) < workers * 2:
                        task = ready.popleft()
                        running[pool.submit(run, task, frontier.edges[task])] = task
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in done:
                        task = running.pop(future)
                        ready.extend(complete(task, future.result()))
                        tasks += 1

    _check_complete(dag, frontier, tasks)

    def fill(name, edges, blocks):
        shape = tuple(e[-1] for e in edges)
        out = np.zeros(shape, dtype=_output_dtype(program, name, dtype))
        for coords, value in blocks.items():
            if value is not None:
                _place(out, name, edges, coords, value)
        return out

    outputs = _output_arrays(program, bounds, finals, fill)
    stats = {"backend": "local", "tasks": tasks, "workers": workers,
             "blas_threads": max(1, cores // workers), "peak_frontier": frontier.peak,
             "run_seconds": time.perf_counter() - started, "inter_node_bytes": 0}
    return outputs, stats


def _check_block_shape(name: str, coords, shape, region) -> None:
    want = tuple(s.stop - s.start for s in region)
    if tuple(shape) != want:
        raise ShapeError(f"block {block_label(name, coords)} has shape {tuple(shape)}, but "
                         f"{name}'s block there is {want}")


def _output_dtype(program: BlockProgramIR, name: str, dtype) -> np.dtype:
    return np.dtype(dtype) if dtype is not None else numpy_dtype(program.tensors[name].dtype)


def _place(out: np.ndarray, name: str, edges, coords, value: np.ndarray) -> None:
    region = block_slices(edges, coords)
    _check_block_shape(name, coords, value.shape, region)
    out[region] = value


def _flops_and_shapes(dag: BlockDag, task, shapes_of_edges):
    """A task's result shapes and its flops as the placer prices them (the count choice's
    :func:`~tensorc.planning.block_counts.placed_flops`)."""
    expr = dag.sites[task[0]].assign.value
    return result_shapes(expr, shapes_of_edges), placed_flops(expr, shapes_of_edges)
