"""Codegen of a sparse statement: a TaskGraph over the coordinates of non-empty blocks.

Contract: :func:`lower_sparse` takes the statement's operands (:class:`SparseScan`: index
names per dimension, whether it is sparse, and for a sparse one the non-zeros of each
non-empty block), its steps (:class:`SparseStep`, opt_einsum's linear path: each step
takes values from the list and appends its result; the last step's result is the
statement's), the blocking and the compute dtype, and returns a :class:`SparseLowering`
(the graph and what each step does), touching no data:

- a step's tasks are the tuples of block coordinates where *every* input has a block: the
  non-empty blocks of its sparse inputs are joined on their shared indices (the smallest
  set first), and only indices no input restricts range over all their blocks. A dense
  operand has every block; a value a step made has the blocks some task produced. So a
  1 % matrix cut in 100 × 100 blocks has tasks only where its non-empty blocks meet, and
  an empty operand block produces no task;
- each tuple is one ``pair`` (``apply`` for one input) task running the step's kernel
  (:func:`~tensorc.codegen.sparse_kernels.step_kernel`); the partials of one output block
  are summed by one ``reduce`` task placed right after them (grouped by output block, so
  partials do not pile up);
- operand blocks are loaded by ``load`` tasks created before their first use: a sparse
  block by :class:`~tensorc.codegen.sparse_kernels.SparseLoad` in the format its step's
  kernel takes, a dense one by the dense :class:`~tensorc.codegen.kernels.LoadBlock`;
- tasks carry bytes priced by non-zeros (:func:`sparse_bytes`: a 2-d block as CSR, others
  as coordinates and values; the exact count for an operand block, the estimate below for
  a computed one), a dense block by its elements;
- output density is estimated by the simple independence model: a product term of a
  tuple is non-zero with probability ``p`` = the product of its sparse blocks' densities,
  an output entry sums ``K`` terms (the contracted extents), so it is non-zero with
  probability ``1 - (1 - p)^K``; partials of one block combine as ``1 - ∏(1 - dₜ)``. A
  correction observed on an earlier run of the same call scales the last step's block
  estimates and each partial's (``final_factor``, at most full);
  ``StepInfo.model_nnz`` keeps the model's own figure.

Output blocks no task produces are zero (absent from a sparse result); the graph's
``outputs`` list only the produced ones.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tensorc.codegen.blocking import Blocking
from tensorc.codegen.kernels import LoadBlock, equation
from tensorc.codegen.sparse_kernels import SparseLoad, SparseReduce, step_kernel
from tensorc.codegen.taskgraph import APPLY, LOAD, PAIR, REDUCE, Task, TaskGraph

INDEX_BYTES = 8


def sparse_bytes(nnz: float, ndim: int, dtype) -> int:
    """Bytes of a sparse block of ``nnz`` non-zeros: a 2-d block as CSR (``int32`` column
    indices while they fit, as scipy makes them), any other as coordinates (``int64`` per
    dimension) and values."""
    index = (4 if nnz < 2**31 else 8) if ndim == 2 else INDEX_BYTES * ndim
    return int(nnz * (np.dtype(dtype).itemsize + index))


@dataclass(frozen=True)
class SparseScan:
    """One operand as codegen sees it: index names per dimension (may repeat), and for a
    sparse operand the non-zeros of each non-empty block, by block coordinates per
    dimension."""

    indices: tuple[str, ...]
    sparse: bool
    nonzeros: dict[tuple[int, ...], int] | None = None


@dataclass(frozen=True)
class SparseStep:
    """One step: the positions it takes from the value list, its result's key, and whether
    that result is sparse."""

    taken: tuple[int, ...]
    output: tuple[str, ...]
    sparse_out: bool


@dataclass
class StepInfo:
    """What one step runs, for ``explain()``."""

    equation: str
    library: str
    tasks: int
    reduce_tasks: int
    sparse_out: bool
    estimated_nnz: float
    size: int
    model_nnz: float = 0.0
    """The independence model's non-zeros, before a correction from an earlier run."""

    @property
    def estimated_density(self) -> float:
        return self.estimated_nnz / self.size if self.size else 0.0


@dataclass
class SparseLowering:
    graph: TaskGraph
    steps: list[StepInfo] = field(default_factory=list)


class _Value:
    """A blocked value: its key, whether sparse, and per present block its task (or a lazy
    load) and estimated non-zeros."""

    def __init__(self, key: tuple[str, ...], sparse: bool, full: bool) -> None:
        self.key = key
        self.sparse = sparse
        self.full = full  # a dense operand: every block present, loaded on first use
        self.tasks: dict[tuple[int, ...], int] = {}
        self.nnz: dict[tuple[int, ...], float] = {}
        self.position: int | None = None
        self.scan: SparseScan | None = None


class _Builder:
    def __init__(self, scans: Sequence[SparseScan], blocking: Blocking, dtype) -> None:
        self.scans = scans
        self.blocking = blocking
        self.dtype = np.dtype(dtype)
        self.ranges = {name: blocking.ranges(name) for name, _ in blocking.sizes}
        self.extent = {n: [b - a for a, b in rs] for n, rs in self.ranges.items()}
        self.tasks: list[Task] = []
        self.kernels: list = []
        self.stage_dims: dict[str, tuple[str, ...]] = {}
        text = repr([(s.indices, s.sparse) for s in scans]) + blocking.describe()
        self.digest = hashlib.sha1(text.encode()).hexdigest()[:10]
        self.loaders: dict[int, int] = {}

    def add(self, task: Task) -> int:
        self.tasks.append(task)
        return len(self.tasks) - 1

    def kernel(self, kernel) -> int:
        self.kernels.append(kernel)
        return len(self.kernels) - 1

    def size(self, key: Sequence[str], coords: Sequence[int]) -> int:
        return math.prod(self.extent[n][c] for n, c in zip(key, coords, strict=True))

    # -- operands --------------------------------------------------------------------------

    def operand(self, position: int, scan: SparseScan) -> _Value:
        key = tuple(dict.fromkeys(scan.indices))
        value = _Value(key, scan.sparse, full=not scan.sparse)
        value.position, value.scan = position, scan
        if scan.sparse:
            places = [[d for d, n in enumerate(scan.indices) if n == name] for name in key]
            for coords, count in (scan.nonzeros or {}).items():
                if all(coords[g[0]] == coords[d] for g in places for d in g[1:]):
                    value.nnz[tuple(coords[g[0]] for g in places)] = float(count)
        return value

    def load(self, value: _Value, coords: tuple[int, ...], fmt: str) -> int:
        task = value.tasks.get(coords)
        if task is not None:
            return task
        scan, position = value.scan, value.position
        if position not in self.loaders:
            repeated = len(value.key) != len(scan.indices)
            if scan.sparse:
                groups = tuple(tuple(d for d, n in enumerate(scan.indices) if n == name)
                               for name in value.key)
                kernel = SparseLoad(fmt, self.dtype, groups if repeated else None)
            else:
                kernel = LoadBlock(equation([scan.indices], value.key) if repeated else None,
                                   self.dtype)
            self.loaders[position] = self.kernel(kernel)
        where = dict(zip(value.key, coords, strict=True))
        slices = tuple(slice(*self.ranges[n][where[n]]) for n in scan.indices)
        shape = tuple(self.extent[n][where[n]] for n in value.key)
        stage = f"load-in{position}-{self.digest}"
        self.stage_dims[stage] = value.key
        if scan.sparse:
            nbytes = sparse_bytes(value.nnz[coords], len(value.key), self.dtype)
        else:
            nbytes = math.prod(shape) * self.dtype.itemsize
        task = self.add(Task((stage, *coords), LOAD, self.loaders[position], (), shape,
                             nbytes, 0, (position, slices)))
        value.tasks[coords] = task
        return task

    # -- steps -----------------------------------------------------------------------------

    def tuples(self, inputs: list[_Value], names: tuple[str, ...]) -> list[tuple[int, ...]]:
        """Block coordinates (over ``names``) where every input has a block."""
        bound: list[str] = []
        rows: list[tuple[int, ...]] = [()]
        restricting = sorted((v for v in inputs if not v.full), key=lambda v: len(v.nnz))
        for value in restricting:
            shared = [n for n in value.key if n in bound]
            new = [n for n in value.key if n not in bound]
            at = [value.key.index(n) for n in shared]
            fresh = [value.key.index(n) for n in new]
            table: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
            for coords in value.nnz:
                table.setdefault(tuple(coords[p] for p in at), []).append(
                    tuple(coords[p] for p in fresh))
            where = [bound.index(n) for n in shared]
            rows = [row + extra for row in rows
                    for extra in table.get(tuple(row[p] for p in where), ())]
            bound += new
        free = [n for n in names if n not in bound]
        if free:
            ranges = [range(len(self.ranges[n])) for n in free]
            rows = [row + extra for row in rows for extra in itertools.product(*ranges)]
            bound += free
        order = [bound.index(n) for n in names]
        return [tuple(row[p] for p in order) for row in rows]

    def step(self, number: int, inputs: list[_Value], step: SparseStep,
             factor: float = 1.0) -> tuple[_Value, StepInfo]:
        names = tuple(dict.fromkeys(n for v in inputs for n in v.key))
        output = step.output
        keys = [v.key for v in inputs]
        kernel = step_kernel(keys, [v.sparse for v in inputs], output, step.sparse_out,
                             self.dtype)
        kernel_index = self.kernel(kernel)
        at = [[names.index(n) for n in v.key] for v in inputs]
        out_at = [names.index(n) for n in output]
        contracted = [p for p, n in enumerate(names) if n not in output]
        rows = self.tuples(inputs, names)
        rows.sort(key=lambda row: (tuple(row[p] for p in out_at), row))
        stage = f"step{number}-{self.digest}"
        reduce_stage = f"step{number}.reduce-{self.digest}"
        self.stage_dims[stage] = names
        self.stage_dims[reduce_stage] = output
        result = _Value(output, step.sparse_out, full=False)
        kind = PAIR if len(inputs) > 1 else APPLY
        reduce_kernel = None
        reduces = 0
        modelled = 0.0
        for out_coords, group in itertools.groupby(rows, key=lambda r: tuple(r[p]
                                                                            for p in out_at)):
            shape = tuple(self.extent[n][c] for n, c in zip(output, out_coords, strict=True))
            size = math.prod(shape)
            parts, zero = [], 1.0
            for row in group:
                sources = []
                density = 1.0
                for value, places, fmt in zip(inputs, at, kernel.formats, strict=True):
                    coords = tuple(row[p] for p in places)
                    if value.position is not None:
                        sources.append(self.load(value, coords, fmt))
                    else:
                        sources.append(value.tasks[coords])
                    if value.sparse:
                        block = self.size(value.key, coords)
                        density *= min(1.0, value.nnz[coords] / block) if block else 0.0
                terms = math.prod(self.extent[names[p]][row[p]] for p in contracted)
                filled = 1.0 - (1.0 - density) ** terms if terms else 0.0
                zero *= 1.0 - filled
                nbytes = self._nbytes(size * min(1.0, filled * factor), size, len(output),
                                      step.sparse_out)
                work = math.prod(self.extent[n][c] for n, c in zip(names, row, strict=True))
                parts.append(self.add(Task((stage, *row), kind, kernel_index, tuple(sources),
                                           shape, nbytes, int(work * density * len(inputs)))))
            modelled += size * (1.0 - zero)
            estimate = min(size, size * (1.0 - zero) * factor)
            if len(parts) == 1:
                result.tasks[out_coords] = parts[0]
            else:
                if reduce_kernel is None:
                    reduce_kernel = self.kernel(SparseReduce(step.sparse_out, self.dtype))
                reduces += 1
                result.tasks[out_coords] = self.add(Task(
                    (reduce_stage, *out_coords), REDUCE, reduce_kernel, tuple(parts), shape,
                    self._nbytes(estimate, size, len(output), step.sparse_out),
                    int(estimate * (len(parts) - 1))))
            result.nnz[out_coords] = estimate
        total = math.prod(dict(self.blocking.sizes)[n] for n in output)
        info = StepInfo(equation(keys, output), kernel.library, len(rows), reduces,
                        step.sparse_out, sum(result.nnz.values()), total, modelled)
        return result, info

    def _nbytes(self, nnz: float, size: int, ndim: int, sparse: bool) -> int:
        return sparse_bytes(nnz, ndim, self.dtype) if sparse else size * self.dtype.itemsize


def lower_sparse(scans: Sequence[SparseScan], steps: Sequence[SparseStep],
                 blocking: Blocking, dtype, final_factor: float = 1.0) -> SparseLowering:
    """The task graph of a sparse statement; see the module docstring. ``final_factor``
    scales the last step's estimated densities (each block's and each partial's, at most
    full): what an earlier run of the same call observed over what the model said."""
    builder = _Builder(scans, blocking, dtype)
    values = [builder.operand(k, scan) for k, scan in enumerate(scans)]
    infos = []
    for number, step in enumerate(steps):
        inputs = [values[t] for t in step.taken]
        for t in sorted(step.taken, reverse=True):
            del values[t]
        value, info = builder.step(number, inputs, step,
                                   final_factor if number == len(steps) - 1 else 1.0)
        values.append(value)
        infos.append(info)
    final = values[-1]
    outputs = []
    for coords, task in sorted(final.tasks.items()):
        slices = tuple(slice(*builder.ranges[n][c]) for n, c in zip(final.key, coords,
                                                                     strict=True))
        outputs.append((task, slices))
    sizes = dict(blocking.sizes)
    graph = TaskGraph(
        name=builder.digest,
        tasks=builder.tasks,
        kernels=builder.kernels,
        outputs=outputs,
        output_shape=tuple(sizes[n] for n in final.key),
        dtype=builder.dtype,
        operand_names=tuple(f"in{k}" for k in range(len(scans))),
        stage_dims=builder.stage_dims,
    )
    return SparseLowering(graph, infos)
