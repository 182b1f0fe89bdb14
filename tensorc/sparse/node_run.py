"""What one node runs of a distributed sparse einsum: its part of the task graph on the
local task pool, its result blocks returned in compact form.

Contract: ``NodeRun(graph, threads)`` is a picklable callable (a node worker's ``RUN``
step kernel, :mod:`tensorc.runtime.ray.node_calls`); ``NodeRun(...)(*operands)`` runs
``graph`` (a :class:`~tensorc.sparse.partition.NodePart`'s sub-graph) with the same kernels
as a local run, on ``threads`` threads of :class:`~tensorc.runtime.task_pool.TaskPool`,
over the operands the part was sent (compact pieces of sparse operands, dense arrays), and
returns ``(starts, packed)``: each output block's global start per dimension (an ``int64``
array, one row per block) and the block itself packed by
:func:`~tensorc.sparse.compact.pack` (sparse blocks stay sparse, dense ones dense).
``NodeRuns(runs, counts)`` runs several in one call, each on its own operands in turn.
"""

from __future__ import annotations

import numpy as np

from tensorc.codegen.taskgraph import TaskGraph
from tensorc.runtime.task_pool import TaskPool
from tensorc.sparse.compact import pack
from tensorc.sparse.results import BlockCollector


class NodeRun:
    """One node's sub-graph as a step kernel (see the module docstring)."""

    def __init__(self, graph: TaskGraph, threads: int = 1) -> None:
        self.graph = graph
        self.threads = max(1, int(threads))

    def __call__(self, *operands) -> tuple[np.ndarray, list[tuple]]:
        graph = self.graph
        sink = BlockCollector(graph.output_shape, graph.dtype)
        TaskPool(self.threads).run(graph, None, list(operands), sink)
        ndim = len(graph.output_shape)
        starts = np.asarray([[s.start for s in slices] for slices, _ in sink.blocks],
                            dtype=np.int64).reshape(len(sink.blocks), ndim)
        return starts, [pack(block) for _, block in sink.blocks]


class NodeRuns:
    """Several :class:`NodeRun` as one step kernel: ``NodeRuns(runs, counts)(*operands)``
    gives each run its ``counts[k]`` operands in turn and returns their results in order
    (one call per node for the parts of several plans)."""

    def __init__(self, runs: tuple[NodeRun, ...], counts: tuple[int, ...]) -> None:
        self.runs = runs
        self.counts = counts

    def __call__(self, *operands) -> list[tuple[np.ndarray, list[tuple]]]:
        results, first = [], 0
        for run, count in zip(self.runs, self.counts, strict=True):
            results.append(run(*operands[first:first + count]))
            first += count
        return results
