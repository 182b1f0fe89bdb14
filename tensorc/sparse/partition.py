"""A sparse einsum's task graph split over nodes: which output blocks each node computes,
the tasks that make them, and the operand blocks it must be sent.

Contract: :func:`partition` takes the graph of a :class:`~tensorc.sparse.plan.SparsePlan`,
the operands its loads read (a cut sparse operand, or a dense ndarray) and a node count, and
returns one :class:`NodePart` per node that has work (at most ``nodes``):

- the unit of work is one output block and its *cone* (every task its value depends on,
  found by one backward pass over the topologically ordered graph); cones are given to
  nodes largest first, each to the node with the least work so far (LPT), a cone's work
  being its tasks' flops plus the non-zeros its loads read, so nodes get about equal
  non-zeros, not equal block counts. An intermediate block two cones share is computed on
  both nodes (``duplicated_tasks`` counts such repeats; plain SpMV/SpMM/SpGEMM/MTTKRP plans
  have none);
- a part's :attr:`NodePart.graph` is the sub-graph of its cones (tasks renumbered, order
  and kernels kept, outputs with their global slices), runnable by the local task pool;
- its :attr:`NodePart.operands` are, per operand position: for a sparse operand only the
  blocks its loads read (:func:`~tensorc.sparse.compact.piece`, compact arrays; for an
  operand given as a ``SparseTensor``, its kept piece, a
  :class:`~tensorc.runtime.kept.Kept`, made once per cut); a dense
  operand whole (it is put in Ray once and read by every node); ``None`` for an operand
  it never reads.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from tensorc.codegen.taskgraph import LOAD, Task, TaskGraph
from tensorc.sparse.blocks import CutOperand
from tensorc.sparse.compact import piece


@dataclass
class NodePart:
    """The work of one node: its sub-graph and what it reads (module docstring)."""

    node: int
    graph: TaskGraph
    operands: list
    tasks: int = 0
    nonzeros: int = 0
    """Non-zeros of the sparse operand blocks the node reads."""
    work: int = 0
    outputs: list = field(default_factory=list)


def _cone_of(graph: TaskGraph, root: int) -> list[int]:
    """The tasks ``root`` depends on, itself included, in graph order."""
    seen = {root}
    stack = [root]
    while stack:
        for source in graph.tasks[stack.pop()].inputs:
            if source not in seen:
                seen.add(source)
                stack.append(source)
    return sorted(seen)


def _load_nnz(task: Task, inputs: list) -> int:
    operand = inputs[task.source[0]]
    if not isinstance(operand, CutOperand):
        return 0
    key = operand.block_of(task.source[1])
    span = operand.ranges.get(key)
    return 0 if span is None else span[1] - span[0]


def partition(graph: TaskGraph, inputs: list, nodes: int,
              kept: dict | None = None) -> list[NodePart]:
    """The graph's output blocks and their cones spread over ``nodes`` (module docstring);
    ``kept`` maps an operand position to the ``SparseTensor`` it came from, whose pieces
    are made once and kept."""
    cones = [(_cone_of(graph, task), task, slices) for task, slices in graph.outputs]
    nnz = {}
    for cone, _, _ in cones:
        for index in cone:
            task = graph.tasks[index]
            if task.kind == LOAD and index not in nnz:
                nnz[index] = _load_nnz(task, inputs)
    costs = [sum(graph.tasks[i].flops for i in cone) + sum(nnz.get(i, 0) for i in cone)
             for cone, _, _ in cones]
    heap = [(0, node) for node in range(max(1, nodes))]
    owned: dict[int, list[int]] = {}
    for k in sorted(range(len(cones)), key=lambda k: -costs[k]):
        load, node = heapq.heappop(heap)
        owned.setdefault(node, []).append(k)
        heapq.heappush(heap, (load + costs[k], node))
    parts = []
    for node in sorted(owned):
        chosen = sorted(owned[node])
        tasks = sorted(set().union(*(cones[k][0] for k in chosen)))
        part = _part(graph, inputs, node, tasks, [cones[k][1:] for k in chosen], kept or {})
        part.nonzeros = sum(nnz.get(i, 0) for i in tasks)
        part.work = sum(costs[k] for k in chosen)
        parts.append(part)
    return parts


def _part(graph: TaskGraph, inputs: list, node: int, tasks: list[int],
          outputs: list[tuple[int, tuple]], kept: dict) -> NodePart:
    renumber = {old: new for new, old in enumerate(tasks)}
    keys: dict[int, list[tuple]] = {}
    used: set[int] = set()
    sub = []
    for old in tasks:
        task = graph.tasks[old]
        if task.kind == LOAD:
            position, slices = task.source
            used.add(position)
            operand = inputs[position]
            if isinstance(operand, CutOperand):
                keys.setdefault(position, []).append(operand.block_of(slices))
        sub.append(Task(task.key, task.kind, task.kernel,
                        tuple(renumber[s] for s in task.inputs), task.shape, task.nbytes,
                        task.flops, task.source))
    operands = []
    for position, operand in enumerate(inputs):
        if position not in used:
            operands.append(None)
        elif position in kept and position in keys:
            operands.append(kept[position].kept_piece(operand, keys[position]))
        elif position in keys:
            operands.append(piece(operand, keys[position]))
        else:
            operands.append(np.asarray(operand))
    sub_graph = TaskGraph(name=f"{graph.name}-node{node}", tasks=sub, kernels=graph.kernels,
                          outputs=[(renumber[t], s) for t, s in outputs],
                          output_shape=graph.output_shape, dtype=graph.dtype,
                          operand_names=graph.operand_names, stage_dims=graph.stage_dims)
    return NodePart(node, sub_graph, operands, tasks=len(sub),
                    outputs=[s for _, s in outputs])


def duplicated_tasks(parts: list[NodePart], graph: TaskGraph) -> int:
    """Compute tasks run on more than one node (loads excluded: those read, not compute)."""
    computed = sum(sum(1 for t in p.graph.tasks if t.kind != LOAD) for p in parts)
    return computed - sum(1 for t in graph.tasks if t.kind != LOAD)
