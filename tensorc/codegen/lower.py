"""Codegen: partial evaluation of the IR over block coordinates into a TaskGraph.

``lower_to_tasks(program, blocking)`` touches no data. Each IR node becomes a *blocked
value* — its key and a map from block coordinates to the task that produces that block:

- ``Scan`` → one ``load`` task per block (repeated indices read diagonal blocks);
- a stage rooted at ``ReduceByKey``/``Map`` (over a ``Join``, another value, or nothing in
  between) → one ``pair`` task (``apply`` for one input) per tuple of block coordinates over
  all the stage's indices, each computing its partial block; partials of one output block are
  folded by one ``reduce`` task in coordinate order (or, for the last stage given a
  :class:`~tensorc.codegen.reduce_scatter.Scatter`, reduce-scattered over the nodes of a
  group: :mod:`tensorc.codegen.reduce_scatter`);
- ``Merge`` → one ``pair`` task per block folding the new value into the old one.

Task keys are ``(stage, *coordinates)`` where ``stage`` names the node's role and position
and a content hash of the program and blocking, so equal plans give equal keys.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tensorc.codegen.blocking import Blocking
from tensorc.codegen.kernels import (
    EinsumBlock,
    ElementwiseBlock,
    LoadBlock,
    ReduceBlocks,
    equation,
)
from tensorc.codegen.reduce_scatter import Scatter, lower_scatter
from tensorc.codegen.taskgraph import (
    APPLY,
    KIND_CODE,
    LOAD,
    PAIR,
    REDUCE,
    Task,
    TaskColumns,
    TaskGraph,
    TaskList,
)
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
    """A node's key and the producing task of each of its blocks: ``ids`` holds the task
    index over the key's block grid, ``order`` the blocks' flat positions in the order
    they were produced."""

    __slots__ = ("key", "ids", "order")

    def __init__(self, key: tuple[str, ...], ids: np.ndarray, order: np.ndarray) -> None:
        self.key = key
        self.ids = ids
        self.order = order


@dataclass(slots=True)
class _Chunk:
    """The tasks of one stage (or of its reduce), as arrays: one row per task, numbered
    ``first`` on in creation order."""

    stage: str
    kind: str
    kernel: int
    first: int
    coords: np.ndarray
    inputs: np.ndarray
    shapes: np.ndarray
    nbytes: np.ndarray
    flops: np.ndarray
    sources: Callable[[], list] | None = None
    """Load tasks: makes the (operand position, block slices) of every task."""

    def __len__(self) -> int:
        return len(self.nbytes)


def _grid_coords(counts: Sequence[int]) -> np.ndarray:
    """Every block coordinate of a grid of ``counts`` blocks, one row each, in
    ``itertools.product`` order."""
    if not counts:
        return np.zeros((1, 0), np.int64)
    return np.indices(tuple(counts), dtype=np.int64).reshape(len(counts), -1).T


def _rows(array: np.ndarray) -> list[tuple]:
    """The rows of a 2-d integer array as tuples of Python ints."""
    if array.shape[1] == 0:
        return [()] * array.shape[0]
    return list(zip(*array.T.tolist(), strict=True))


class _Builder:
    def __init__(self, program: Function, blocking: Blocking,
                 scatter: Scatter | None = None) -> None:
        self.program = program
        self.blocking = blocking
        self.dtype = np.dtype(program.dtype)
        self.itemsize = self.dtype.itemsize
        self.chunks: list[_Chunk] = []
        self.count = 0
        self.kernels: list = []
        digest = hashlib.sha1(
            (format_program(program) + blocking.describe()
             + (scatter.describe() if scatter else "")).encode()
        ).hexdigest()[:10]
        self.digest = digest
        self.ranges = {name: blocking.ranges(name) for name, _ in blocking.sizes}
        self.extent = {
            name: np.asarray([stop - start for start, stop in rs], np.int64)
            for name, rs in self.ranges.items()
        }
        self.operand_position = {d.name: k for k, d in enumerate(program.inputs)}
        self.stage_dims: dict[str, tuple[str, ...]] = {}
        self.output_ranges = self.ranges  # finer along a reduce-scatter's index

    def kernel(self, kernel) -> int:
        self.kernels.append(kernel)
        return len(self.kernels) - 1

    def add(self, stage: str, kind: str, kernel: int, coords: np.ndarray, inputs: np.ndarray,
            shapes: np.ndarray, nbytes: np.ndarray, flops: np.ndarray,
            sources: Callable[[], list] | None = None) -> np.ndarray:
        """Append one chunk of tasks; returns their indices."""
        chunk = _Chunk(stage, kind, kernel, self.count, coords, inputs, shapes, nbytes, flops,
                       sources)
        self.chunks.append(chunk)
        self.count += len(chunk)
        return np.arange(chunk.first, self.count, dtype=np.int64)

    def counts(self, key: Sequence[str]) -> tuple[int, ...]:
        return tuple(len(self.ranges[n]) for n in key)

    def extents(self, key: Sequence[str], coords: np.ndarray) -> np.ndarray:
        """Block extents along ``key`` of every row of ``coords`` (one column per name)."""
        columns = [self.extent[n][coords[:, k]] for k, n in enumerate(key)]
        if not columns:
            return np.zeros((len(coords), 0), np.int64)
        return np.stack(columns, axis=1)

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
        stage = f"{label}-{self.digest}"
        self.stage_dims[stage] = tuple(key)
        counts = self.counts(key)
        coords = _grid_coords(counts)
        shapes = self.extents(key, coords)
        sizes = shapes.prod(axis=1)
        ranges = self.ranges

        def sources() -> list:
            slices = {n: [slice(*r) for r in ranges[n]] for n in key}
            # product order is the coordinates' order; a diagonal reads its index twice
            blocks = list(itertools.product(*(slices[n] for n in key)))
            if tuple(key) != tuple(node.indices):
                picks = [list(key).index(n) for n in node.indices]
                blocks = [tuple(block[p] for p in picks) for block in blocks]
            return list(zip(itertools.repeat(position, len(blocks)), blocks, strict=True))

        ids = self.add(stage, LOAD, kernel, coords, np.zeros((len(coords), 0), np.int64),
                       shapes, sizes * self.itemsize, sizes * cast_cost, sources)
        return _Blocked(key, ids.reshape(counts), np.arange(len(ids), dtype=np.int64))

    def stage(
        self,
        inputs: list[_Blocked],
        fn,
        output: tuple[str, ...],
        monoid: str | None,
        label: str,
        join: Join | None = None,
        scatter: Scatter | None = None,
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
        coords = _grid_coords(self.counts(all_key))
        sources = np.zeros((len(coords), len(inputs)), np.int64)
        for k, b in enumerate(inputs):
            sources[:, k] = b.ids[tuple(coords[:, position[n]] for n in b.key)]
        out_positions = [position[n] for n in output]
        out_coords = coords[:, out_positions]
        extents = self.extents(all_key, coords)
        shapes = extents[:, out_positions]
        partial_ids = self.add(stage, kind, kernel, coords, sources, shapes,
                               shapes.prod(axis=1) * self.itemsize,
                               extents.prod(axis=1) * per_element)
        out_counts = self.counts(output)
        flat = (np.ravel_multi_index(tuple(out_coords.T), out_counts) if output
                else np.zeros(len(coords), np.int64))
        # partials of one output block in coordinate order; blocks in order of first partial
        grouped = np.argsort(flat, kind="stable")
        blocks, first, parts = np.unique(flat[grouped], return_index=True, return_counts=True)
        produced = np.argsort(grouped[first], kind="stable")
        order = blocks[produced]
        ids = np.empty(math.prod(out_counts), np.int64)
        if len(blocks) == len(flat):  # one partial per block: no reduce
            ids[flat] = partial_ids
            return _Blocked(output, ids.reshape(out_counts), flat)
        if not (parts == parts[0]).all():
            raise PlanError(f"stage {label}: output blocks with unequal partial counts")
        if scatter is not None:
            summed = [n for n in all_key if n not in output]
            ids, order, ranges = lower_scatter(self, label, scatter, all_key, output, summed,
                                               coords, partial_ids, flat, shapes,
                                               monoid or "+")
            self.output_ranges = {**self.ranges, **ranges}
            return _Blocked(output, ids, order)
        members = partial_ids[grouped].reshape(len(blocks), int(parts[0]))[produced]
        reduce_stage = f"{label}.reduce-{self.digest}"
        self.stage_dims[reduce_stage] = tuple(output)
        reduce_kernel = self.kernel(ReduceBlocks(monoid or "+", self.dtype))
        reduce_shapes = shapes[members[:, 0] - partial_ids[0]]
        sizes = reduce_shapes.prod(axis=1)
        ids[order] = self.add(reduce_stage, REDUCE, reduce_kernel,
                              out_coords[grouped[first]][produced], members, reduce_shapes,
                              sizes * self.itemsize, sizes * (members.shape[1] - 1))
        return _Blocked(output, ids.reshape(out_counts), order)

    def merge(self, node: Merge, old: _Blocked, new: _Blocked, label: str) -> _Blocked:
        if old.key != new.key:
            raise PlanError(
                f"merge of a value keyed {new.key} into one keyed {old.key}: keys must agree "
                "in order"
            )
        merge_kernel = self.kernel(ReduceBlocks(node.monoid, self.dtype))
        stage = f"{label}-{self.digest}"
        self.stage_dims[stage] = tuple(old.key)
        counts = self.counts(old.key)
        coords = (np.stack(np.unravel_index(old.order, counts), axis=1).astype(np.int64)
                  if counts else np.zeros((len(old.order), 0), np.int64))
        shapes = self.extents(old.key, coords)
        sizes = shapes.prod(axis=1)
        pairs = np.stack([old.ids.reshape(-1)[old.order], new.ids.reshape(-1)[old.order]],
                         axis=1)
        ids = np.empty(len(old.order), np.int64)
        ids[old.order] = self.add(stage, PAIR, merge_kernel, coords, pairs, shapes,
                                  sizes * self.itemsize, sizes)
        return _Blocked(old.key, ids.reshape(counts), old.order)


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


def _load_order(kind: np.ndarray, indptr: np.ndarray, inputs: np.ndarray) -> np.ndarray:
    """A task order with each load just before its first consumer.

    Executors take ready tasks in index order, so this keeps a copied (compacted or cast)
    block alive only while its consumers run, instead of loading every block up front.
    Compute tasks keep their order; the loads a task is first to read go before it in its
    input order; loads nobody reads (outputs) go last.
    """
    count = len(kind)
    width = int(np.diff(indptr).max(initial=0)) + 1
    readers = np.repeat(np.arange(count, dtype=np.int64), np.diff(indptr))
    slot = np.arange(len(inputs), dtype=np.int64) - indptr[readers]
    rank = np.where(kind == KIND_CODE[LOAD], np.int64(count) * width + np.arange(count),
                    np.arange(count, dtype=np.int64) * width + width - 1)
    read = kind[inputs] == KIND_CODE[LOAD]
    loads, first = np.unique(inputs[read], return_index=True)
    rank[loads] = readers[read][first] * width + slot[read][first]
    return np.argsort(rank, kind="stable")


def _assemble(chunks: list[_Chunk], kernels: list) -> tuple[TaskList, TaskColumns,
                                                            np.ndarray]:
    """The tasks of ``chunks`` in load-before-first-use order (:func:`_load_order`; their
    records built on first use), their columns and the renumbering (old index → new); a
    load read by several tasks has its kernel marked ``compact`` (its strided block is
    copied once)."""
    kind = np.concatenate([np.full(len(c), KIND_CODE[c.kind], np.int8) for c in chunks])
    widths = np.concatenate([np.full(len(c), c.inputs.shape[1], np.int64) for c in chunks])
    indptr = np.zeros(len(kind) + 1, np.int64)
    np.cumsum(widths, out=indptr[1:])
    inputs = np.concatenate([c.inputs.reshape(-1) for c in chunks])
    uses = np.bincount(inputs, minlength=len(kind))
    for chunk in chunks:
        if chunk.kind == LOAD and (uses[chunk.first:chunk.first + len(chunk)] > 1).any():
            kernels[chunk.kernel].compact = True
    order = _load_order(kind, indptr, inputs)
    renumber = np.empty(len(order), np.int64)
    renumber[order] = np.arange(len(order), dtype=np.int64)
    made_sources: dict[int, list] = {}  # chunk -> its loads' sources, made on first ask

    def sources_of(k: int) -> list | None:
        if chunks[k].sources is None:
            return None
        if k not in made_sources:
            made_sources[k] = chunks[k].sources()
        return made_sources[k]

    def make() -> list[Task]:
        built: list[Task] = []
        for k, chunk in enumerate(chunks):
            keys = list(zip(itertools.repeat(chunk.stage, len(chunk)),
                            *chunk.coords.T.tolist(), strict=True))
            built.extend(map(Task, keys, itertools.repeat(chunk.kind),
                             itertools.repeat(chunk.kernel), _rows(renumber[chunk.inputs]),
                             _rows(chunk.shapes), chunk.nbytes.tolist(), chunk.flops.tolist(),
                             sources_of(k) or itertools.repeat(None)))
        return [built[i] for i in order.tolist()]

    firsts = np.asarray([chunk.first for chunk in chunks], np.int64)

    def source(index: int) -> tuple | None:
        old = int(order[index])
        k = int(np.searchsorted(firsts, old, side="right")) - 1
        found = sources_of(k)
        return None if found is None else found[old - chunks[k].first]

    tasks = TaskList(len(order), make, source)
    lengths = widths[order]
    new_indptr = np.zeros(len(kind) + 1, np.int64)
    np.cumsum(lengths, out=new_indptr[1:])
    starts = np.repeat(indptr[:-1][order] - new_indptr[:-1], lengths)
    new_inputs = renumber[inputs[np.arange(int(new_indptr[-1]), dtype=np.int64) + starts]]
    stages: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for chunk in chunks:
        stages[chunk.stage] = (renumber[chunk.first:chunk.first + len(chunk)], chunk.coords)
    columns = TaskColumns(
        kind=kind[order],
        nbytes=np.concatenate([c.nbytes for c in chunks])[order],
        flops=np.concatenate([c.flops for c in chunks])[order],
        indptr=new_indptr,
        inputs=new_inputs,
        stages=stages,
        kernel=np.concatenate([np.full(len(c), c.kernel, np.int64) for c in chunks])[order],
    )
    return tasks, columns, renumber


def lower_to_tasks(program: Function, blocking: Blocking,
                   scatter: Scatter | None = None) -> TaskGraph:
    """Partially evaluate ``program`` over the block coordinates of ``blocking``.

    ``scatter`` ends the last stage's reduce as a reduce-scatter
    (:mod:`tensorc.codegen.reduce_scatter`): the output is then blocked finer along its index.

    Every product stage runs exactly the contraction path its join carries
    (``Join.path``, decided by the contraction-path pass); a product join without one is
    refused with a :class:`~tensorc.errors.PlanError`.
    """
    builder = _Builder(program, blocking, scatter)
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
            values[node] = builder.stage(blocked, fn, output, monoid, label, stage_join(node),
                                         scatter if node is program.output else None)
    final = values[program.output]
    tasks, columns, renumber = _assemble(builder.chunks, builder.kernels)
    outputs = []
    ranges = builder.output_ranges
    counts = tuple(len(ranges[n]) for n in final.key)
    for flat in range(final.ids.size):
        coords = np.unravel_index(flat, counts) if counts else ()
        slices = tuple(
            slice(*ranges[n][int(c)]) for n, c in zip(final.key, coords, strict=True)
        )
        outputs.append((int(renumber[final.ids.reshape(-1)[flat]]), slices))
    sizes = program.size_of
    graph = TaskGraph(
        name=builder.digest,
        tasks=tasks,
        kernels=builder.kernels,
        outputs=outputs,
        output_shape=tuple(sizes[n] for n in final.key),
        dtype=builder.dtype,
        operand_names=tuple(d.name for d in program.inputs),
        stage_dims=builder.stage_dims,
        _columns=columns,
    )
    return graph
