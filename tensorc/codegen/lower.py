"""Codegen: partial evaluation of the IR over block coordinates into a TaskGraph.

``lower_to_tasks(program, blocking)`` touches no data. Each IR node becomes a *blocked
value* — its key and a map from block coordinates to the task that produces that block:

- ``Scan`` → one ``load`` task per block (repeated indices read diagonal blocks);
- a stage rooted at ``ReduceByKey``/``Map`` (over a ``Join``, another value, or nothing in
  between) → one ``pair`` task (``apply`` for one input) per tuple of block coordinates over
  all the stage's indices, each computing its partial block; partials of one output block are
  folded by one ``reduce`` task in coordinate order;
- ``Merge`` → one ``pair`` task per block folding the new value into the old one.

Task keys are ``(stage, *coordinates)`` where ``stage`` names the node's role and position
and a content hash of the program and blocking, so equal plans give equal keys.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Sequence

import numpy as np

from tensorc.codegen.blocking import Blocking
from tensorc.codegen.kernels import (
    EinsumBlock,
    ElementwiseBlock,
    LoadBlock,
    ReduceBlocks,
    equation,
)
from tensorc.codegen.taskgraph import APPLY, LOAD, PAIR, REDUCE, Task, TaskGraph
from tensorc.errors import PlanError
from tensorc.ir.contraction import flops_per_element
from tensorc.ir.keys import key_of, unique
from tensorc.ir.nodes import (
    Function,
    Join,
    Map,
    Merge,
    Node,
    Scan,
    is_product_of_args,
    post_order,
)
from tensorc.ir.printer import format_program
from tensorc.ir.stages import folded_maps, stage_join, stage_parts


class _Blocked:
    """A node's key and the producing task of each of its blocks."""

    __slots__ = ("key", "tasks")

    def __init__(self, key: tuple[str, ...], tasks: dict[tuple[int, ...], int]) -> None:
        self.key = key
        self.tasks = tasks


class _Builder:
    def __init__(self, program: Function, blocking: Blocking) -> None:
        self.program = program
        self.blocking = blocking
        self.dtype = np.dtype(program.dtype)
        self.itemsize = self.dtype.itemsize
        self.tasks: list[Task] = []
        self.kernels: list = []
        digest = hashlib.sha1(
            (format_program(program) + blocking.describe()).encode()
        ).hexdigest()[:10]
        self.digest = digest
        self.ranges = {name: blocking.ranges(name) for name, _ in blocking.sizes}
        self.extent = {
            name: [stop - start for start, stop in rs] for name, rs in self.ranges.items()
        }
        self.operand_position = {d.name: k for k, d in enumerate(program.inputs)}
        self.stage_dims: dict[str, tuple[str, ...]] = {}

    def kernel(self, kernel) -> int:
        self.kernels.append(kernel)
        return len(self.kernels) - 1

    def add(self, task: Task) -> int:
        self.tasks.append(task)
        return len(self.tasks) - 1

    def block_shape(self, key: Sequence[str], coords: Sequence[int]) -> tuple[int, ...]:
        return tuple(self.extent[n][c] for n, c in zip(key, coords, strict=True))

    # -- node rules -------------------------------------------------------------------------

    def scan(self, node: Scan, label: str) -> _Blocked:
        key = key_of(node)
        diagonal = None
        if len(key) != len(node.indices):
            diagonal = equation([node.indices], key)
        kernel = self.kernel(LoadBlock(diagonal, self.dtype))
        position = self.operand_position[node.tensor]
        decl = self.program.inputs[position]
        cast_cost = 0 if np.dtype(decl.dtype) == self.dtype else 1
        tasks: dict[tuple[int, ...], int] = {}
        stage = f"{label}-{self.digest}"
        self.stage_dims[stage] = tuple(key)
        for coords in itertools.product(*(range(len(self.ranges[n])) for n in key)):
            where = dict(zip(key, coords, strict=True))
            slices = tuple(slice(*self.ranges[n][where[n]]) for n in node.indices)
            shape = self.block_shape(key, coords)
            size = math.prod(shape)
            tasks[coords] = self.add(
                Task((stage, *coords), LOAD, kernel, (), shape, size * self.itemsize,
                     size * cast_cost, (position, slices))
            )
        return _Blocked(key, tasks)

    def stage(
        self,
        inputs: list[_Blocked],
        fn,
        output: tuple[str, ...],
        monoid: str | None,
        label: str,
        join: Join | None = None,
    ) -> _Blocked:
        all_key = unique([n for b in inputs for n in b.key])
        in_keys = [b.key for b in inputs]
        if is_product_of_args(fn, len(inputs)) and monoid in ("+", None):
            block_sizes = {n: max(1, self.blocking.block_size(n)) for n in all_key}
            kernel_obj = EinsumBlock(in_keys, output, _path_of(join, len(inputs)), block_sizes)
        else:
            kernel_obj = ElementwiseBlock(fn, in_keys, all_key, output, monoid, self.dtype)
        kernel = self.kernel(kernel_obj)
        per_element = flops_per_element(in_keys, output)
        kind = PAIR if len(inputs) > 1 else APPLY
        stage = f"{label}-{self.digest}"
        self.stage_dims[stage] = tuple(all_key)
        position = {n: k for k, n in enumerate(all_key)}
        in_positions = [tuple(position[n] for n in k) for k in in_keys]
        out_positions = tuple(position[n] for n in output)
        partials: dict[tuple[int, ...], list[int]] = {}
        counts = [range(len(self.ranges[n])) for n in all_key]
        for coords in itertools.product(*counts):
            sources = tuple(
                b.tasks[tuple(coords[p] for p in pos)]
                for b, pos in zip(inputs, in_positions, strict=True)
            )
            out_coords = tuple(coords[p] for p in out_positions)
            extents = [self.extent[n][c] for n, c in zip(all_key, coords, strict=True)]
            shape = tuple(extents[p] for p in out_positions)
            task = Task(
                (stage, *coords), kind, kernel, sources, shape,
                math.prod(shape) * self.itemsize,
                math.prod(extents) * per_element,
            )
            partials.setdefault(out_coords, []).append(self.add(task))
        result: dict[tuple[int, ...], int] = {}
        reduce_stage = f"{label}.reduce-{self.digest}"
        self.stage_dims[reduce_stage] = tuple(output)
        reduce_kernel = None
        for out_coords, parts in partials.items():
            if len(parts) == 1:
                result[out_coords] = parts[0]
                continue
            if reduce_kernel is None:
                reduce_kernel = self.kernel(ReduceBlocks(monoid or "+", self.dtype))
            shape = self.tasks[parts[0]].shape
            size = math.prod(shape)
            result[out_coords] = self.add(
                Task((reduce_stage, *out_coords), REDUCE, reduce_kernel, tuple(parts), shape,
                     size * self.itemsize, size * (len(parts) - 1))
            )
        return _Blocked(output, result)

    def merge(self, node: Merge, old: _Blocked, new: _Blocked, label: str) -> _Blocked:
        if old.key != new.key:
            raise PlanError(
                f"merge of a value keyed {new.key} into one keyed {old.key}: keys must agree "
                "in order"
            )
        merge_kernel = self.kernel(ReduceBlocks(node.monoid, self.dtype))
        stage = f"{label}-{self.digest}"
        self.stage_dims[stage] = tuple(old.key)
        result = {}
        for coords, source in old.tasks.items():
            shape = self.tasks[source].shape
            size = math.prod(shape)
            result[coords] = self.add(
                Task((stage, *coords), PAIR, merge_kernel, (source, new.tasks[coords]),
                     shape, size * self.itemsize, size)
            )
        return _Blocked(old.key, result)


def _path_of(join: Join | None, inputs: int) -> list[tuple[int, ...]] | None:
    """The contraction path a product stage runs: the one its join carries."""
    if inputs == 1:
        return None
    if join is None or join.path is None:
        on = "(none)" if join is None else "[" + ",".join(join.on) + "]"
        raise PlanError(
            f"the product join on {on} of {inputs} inputs has no contraction path: the "
            "contraction-path pass decides it (run tensorc.passes.pipeline first)"
        )
    return list(join.path) or None


def _compact_shared_loads(tasks: list[Task], kernels: list) -> None:
    """Mark scans whose blocks feed several tasks: their strided blocks are copied once."""
    uses = [0] * len(tasks)
    for task in tasks:
        for source in task.inputs:
            uses[source] += 1
    for index, task in enumerate(tasks):
        if task.kind == LOAD and uses[index] > 1:
            kernels[task.kernel].compact = True


def _loads_before_first_use(
    tasks: list[Task], outputs: list[tuple[int, tuple[slice, ...]]]
) -> tuple[list[Task], list[tuple[int, tuple[slice, ...]]]]:
    """Renumber tasks so each load sits just before its first consumer.

    Executors take ready tasks in index order, so this keeps a copied (compacted or cast)
    block alive only while its consumers run, instead of loading every block up front.
    """
    order: list[int] = []
    placed = [False] * len(tasks)
    for index, task in enumerate(tasks):
        if task.kind == LOAD:
            continue
        for source in task.inputs:
            if not placed[source] and tasks[source].kind == LOAD:
                placed[source] = True
                order.append(source)
        placed[index] = True
        order.append(index)
    order.extend(i for i, t in enumerate(tasks) if not placed[i])  # loads that are outputs
    renumber = {old: new for new, old in enumerate(order)}
    reordered = []
    for old in order:
        task = tasks[old]
        task.inputs = tuple(renumber[s] for s in task.inputs)
        reordered.append(task)
    return reordered, [(renumber[t], slices) for t, slices in outputs]


def lower_to_tasks(program: Function, blocking: Blocking) -> TaskGraph:
    """Partially evaluate ``program`` over the block coordinates of ``blocking``.

    Every product stage runs exactly the contraction path its join carries
    (``Join.path``, decided by the contraction-path pass); a product join without one is
    refused with a :class:`~tensorc.errors.PlanError`.
    """
    builder = _Builder(program, blocking)
    values: dict[Node, _Blocked] = {}
    folded = folded_maps(program.output)
    for number, node in enumerate(post_order(program.output)):
        label = f"{type(node).__name__.lower()}{number}"
        if isinstance(node, Scan):
            values[node] = builder.scan(node, f"load-{node.tensor}")
        elif isinstance(node, Join):
            continue
        elif isinstance(node, Merge):
            values[node] = builder.merge(node, values[node.old], values[node.new], label)
        elif isinstance(node, Map) and node in folded:
            continue
        else:
            inputs, fn, output, monoid = stage_parts(node)
            blocked = [values[child] for child in inputs]
            values[node] = builder.stage(blocked, fn, output, monoid, label, stage_join(node))
    final = values[program.output]
    outputs = []
    for coords, task in sorted(final.tasks.items()):
        slices = tuple(
            slice(*builder.ranges[n][c]) for n, c in zip(final.key, coords, strict=True)
        )
        outputs.append((task, slices))
    sizes = program.size_of
    _compact_shared_loads(builder.tasks, builder.kernels)
    tasks, outputs = _loads_before_first_use(builder.tasks, outputs)
    graph = TaskGraph(
        name=builder.digest,
        tasks=tasks,
        kernels=builder.kernels,
        outputs=outputs,
        output_shape=tuple(sizes[n] for n in final.key),
        dtype=builder.dtype,
        operand_names=tuple(d.name for d in program.inputs),
        stage_dims=builder.stage_dims,
    )
    return graph
