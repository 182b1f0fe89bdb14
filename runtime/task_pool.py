"""The task pool: runs one TaskGraph on a thread pool inside this process.

Contract: ``TaskPool().run(graph, schedule, inputs, out=None)`` returns the graph's result
as an ndarray, written into ``out`` when given (an ndarray of the graph's output shape and
dtype, or a :class:`~tensorc.stored.BlockSink`: each final block is written there as it
completes and dropped). ``schedule`` is ``None`` here: one
process is one node, and the order below is the schedule. Statistics of the run are in
``pool.last_run``. The local executor (:mod:`tensorc.runtime.local`) runs every
planned einsum and statement through it.

Policy:

- tasks run in graph order (topological) as soon as their inputs exist, on the calling
  thread plus helper threads from one process-wide pool (started once, reused by every run);
- each intermediate block is dropped as soon as its last consumer has run, so peak memory
  is the live frontier, not the whole graph;
- a block of a stored operand (:class:`~tensorc.stored.StoredArray`: zarr, ``.npy``) is read
  by the task that loads it, in its worker thread, never the whole operand;
- with a ``budget`` (bytes), ready compute tasks run first and a read starts only when the
  bytes alive plus its block fit the budget (or nothing else runs): the policy
  :mod:`tensorc.planning.memory_fit` models when it chooses the blocking;
- a final block is computed straight into its slice of ``out`` (kernels take ``out=``);
- BLAS threads are set deliberately: when the graph has at least two compute tasks that can
  run at once, ``workers`` threads run tasks and each BLAS call gets
  ``max(1, cores // workers)`` threads; otherwise tasks run in the calling thread and BLAS
  keeps every core. The previous BLAS setting is restored afterwards;
- a kernel that raises stops the run and surfaces as :class:`~tensorc.errors.ExecutionError`
  naming the task.
"""

from __future__ import annotations

import heapq
import math
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tensorc.codegen.taskgraph import LOAD, TaskGraph
from tensorc.errors import ExecutionError, StorageError
from tensorc.planning.memory_fit import allocations, transients
from tensorc.runtime.block_buffers import BlockBuffers
from tensorc.runtime.resident import PeakResident
from tensorc.stored import BlockSink, StoredArray

_CONTROLLER = None
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def helper_pool(size: int) -> ThreadPoolExecutor:
    """A process-wide pool of at least ``size`` helper threads, started once and reused by
    every run (the local task pool's helpers, a node worker's threaded calls). Reused
    threads keep their C allocator arenas: glibc gives a new thread an arena of its own
    (up to 8 per core), and each arena keeps its own freed memory, so a pool started per
    call spread a worker's kept memory over all of them (a node worker held 0.9-1.0 GB of
    freed heap after ten Cholesky calls at n = 4096, against 0.19 GB with this pool)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL._max_workers < size:  # noqa: SLF001 - grow only
            _POOL = ThreadPoolExecutor(max_workers=size, thread_name_prefix="tensorc-helper")
        return _POOL


def blas_controller():
    """This process's BLAS libraries, found once: threadpoolctl's ``threadpool_limits``
    walks every loaded library each time it is entered (0.5-2.7 ms in a process that has
    imported Ray and tensorc), a kept controller's ``limit`` only sets them (0.02 ms)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER


class _BlasLimit:
    """Process-wide BLAS thread limit for overlapping parallel runs.

    The first run to enter saves the BLAS setting and lowers it; the last to leave restores
    it, so concurrent calls from several threads never restore each other's lowered value.
    """

    _lock = threading.Lock()
    _active = 0
    _saved = None

    def __init__(self, threads: int) -> None:
        self.threads = threads

    def __enter__(self) -> None:
        with _BlasLimit._lock:
            if _BlasLimit._active == 0:
                _BlasLimit._saved = blas_controller().limit(limits=self.threads, user_api="blas")
            _BlasLimit._active += 1

    def __exit__(self, *exc) -> None:
        with _BlasLimit._lock:
            _BlasLimit._active -= 1
            if _BlasLimit._active == 0 and _BlasLimit._saved is not None:
                _BlasLimit._saved.restore_original_limits()
                _BlasLimit._saved = None


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


class _Run:
    """The mutable state of one execution of one graph."""

    def __init__(self, graph: TaskGraph, operands: Sequence[np.ndarray], out: np.ndarray):
        self.graph = graph
        stored = {k for k, op in enumerate(operands) if isinstance(op, StoredArray)}
        self.sink = out if isinstance(out, BlockSink) else None
        self.alloc = allocations(graph, stored, self.sink is not None)
        self.extra = transients(graph, self.alloc)
        self.live = 0
        self.operands = operands
        self.out = out
        self.values: list[np.ndarray | None] = [None] * len(graph.tasks)
        self.remaining_inputs = [len(t.inputs) for t in graph.tasks]
        self.remaining_uses = [len(c) for c in graph.consumers()]
        self.destination: dict[int, tuple[slice, ...]] = dict(graph.outputs)
        self.buffers = BlockBuffers()
        self.pooled: set[int] = set()  # tasks whose value is a pool buffer

    def execute(self, index: int) -> None:
        graph = self.graph
        task = graph.tasks[index]
        kernel = graph.kernels[task.kernel]
        target = self.destination.get(index)
        out = None
        if target is not None and self.sink is None:
            out = self.out[target] if target else self.out  # a 0-d result is the array itself
        try:
            if task.kind == LOAD:
                position, slices = task.source
                operand = self.operands[position]
                if isinstance(operand, StoredArray):  # read here, into a recycled buffer
                    extent = tuple(s.stop - s.start for s in slices)
                    buffer = self.buffers.take(extent, operand.dtype)
                    operand = operand.read(slices, out=buffer)
                    if operand is buffer:
                        self.pooled.add(index)
                    slices = (slice(None),) * operand.ndim
                elif out is None and kernel.copies(operand, slices):
                    out = self.buffers.take(task.shape, graph.dtype)
                    self.pooled.add(index)
                value = kernel(operand, slices, out=out)
            else:
                value = kernel(*(self.values[s] for s in task.inputs), out=out)
        except StorageError:
            raise  # names the file and chunk already
        except Exception as err:  # noqa: BLE001 - re-raised with the task named
            raise ExecutionError(
                f"task {task.key} ({task.kind}) failed: {type(err).__name__}: {err}"
            ) from err
        if target is None:
            self.values[index] = value
        elif self.sink is not None:
            dense = getattr(self.sink, "dense", True)  # a sparse result's sink keeps blocks
            self.sink.write(target or (), np.asarray(value) if dense else value)

    def release_inputs(self, index: int) -> None:
        """Drop every input whose last consumer was ``index`` (pool buffers go back)."""
        for source in self.graph.tasks[index].inputs:
            self.remaining_uses[source] -= 1
            if self.remaining_uses[source] == 0:
                self.live -= self.alloc[source]
                if source in self.pooled:
                    self.buffers.give(self.values[source])
                self.values[source] = None


MEASURED_BYTES = 16 << 20
"""Runs that move at least this many bytes have their peak resident memory measured (the
measure costs two small /proc reads, ~0.1 ms: noise there, overhead on tiny runs)."""


def measured(graph: TaskGraph, alloc: list[int]) -> bool:
    """Whether a run of ``graph`` is large enough to measure its peak resident memory."""
    return sum(alloc) >= MEASURED_BYTES or (
        math.prod(graph.output_shape) * graph.dtype.itemsize >= MEASURED_BYTES)


def admission_budget(plan) -> int | None:
    """The budget a plan's reads are admitted against (``None``: no budget)."""
    memory = plan.memory
    if memory is None:
        return None
    return memory.budget if memory.admit is None else memory.admit


class TaskPool:
    """Runs task graphs on threads; see the module docstring for the policy."""

    def __init__(self, workers: int | None = None, budget: int | None = None) -> None:
        self.workers = workers or available_cores()
        self.budget = budget
        self.last_run: dict = {}

    def run(
        self,
        graph: TaskGraph,
        schedule: object,
        inputs: Sequence[np.ndarray],
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        started = time.perf_counter()
        if schedule is not None:
            raise TypeError("the local executor runs one node; it takes schedule=None")
        if out is None:
            out = np.empty(graph.output_shape, dtype=graph.dtype)
        state = _Run(graph, inputs, out)
        workers = max(1, min(self.workers, graph.max_width()))
        blas_threads = None
        with PeakResident(measured(graph, state.alloc)) as resident:
            if workers == 1:
                self._run_serial(state)
            else:
                blas_threads = max(1, available_cores() // workers)
                with _BlasLimit(blas_threads):
                    self._run_parallel(state, workers, self.budget)
        self.last_run = {
            "run_seconds": time.perf_counter() - started,
            "workers": workers,
            "blas_threads": blas_threads,
            **resident.stats(),
        }
        return out

    @staticmethod
    def _run_serial(state: _Run) -> None:
        for index in range(len(state.graph.tasks)):
            state.execute(index)
            state.release_inputs(index)

    @staticmethod
    def _run_parallel(state: _Run, workers: int, budget: int | None) -> None:
        graph = state.graph
        tasks = graph.tasks
        consumers = graph.consumers()
        alloc, extra = state.alloc, state.extra
        lock = threading.Condition()
        computes: list[int] = []
        reads: list[int] = []
        for index, task in enumerate(tasks):
            if not task.inputs:
                (reads if task.kind == LOAD else computes).append(index)
        heapq.heapify(computes)
        heapq.heapify(reads)
        pending = [len(tasks)]
        running = [0]
        failure: list[BaseException] = []

        def take() -> int | None:
            # called with the lock held: compute first; a read when it fits the budget
            if computes and (not reads or computes[0] < reads[0]):
                return heapq.heappop(computes)
            if reads and (budget is None or (not running[0] and not computes)
                          or state.live + alloc[reads[0]] + extra[reads[0]] <= budget):
                return heapq.heappop(reads)
            if computes:
                return heapq.heappop(computes)
            return None

        def finish(index: int) -> None:
            # called with the lock held
            state.release_inputs(index)
            for consumer in consumers[index]:
                state.remaining_inputs[consumer] -= 1
                if state.remaining_inputs[consumer] == 0:
                    heapq.heappush(reads if tasks[consumer].kind == LOAD else computes,
                                   consumer)
            pending[0] -= 1
            running[0] -= 1
            state.live -= extra[index]
            if not consumers[index]:  # a final block, written to the sink (or the result)
                state.live -= alloc[index]
            lock.notify_all()

        def worker() -> None:
            while True:
                with lock:
                    index = None
                    while pending[0] and not failure:
                        index = take()
                        if index is not None:
                            break
                        lock.wait()
                    if failure or index is None:
                        return
                    running[0] += 1
                    state.live += alloc[index] + extra[index]
                try:
                    state.execute(index)
                except BaseException as err:  # noqa: BLE001 - handed to the caller
                    with lock:
                        failure.append(err)
                        lock.notify_all()
                    return
                with lock:
                    finish(index)

        pool = helper_pool(workers - 1)
        helpers = [pool.submit(worker) for _ in range(workers - 1)]
        worker()
        for helper in helpers:
            helper.result()
        if failure:
            raise failure[0]
