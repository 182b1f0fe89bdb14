"""Task graphs: the plain-data product of codegen, and all the runtime may depend on.

A :class:`TaskGraph` is a sequence of :class:`Task` in topological order (every input of a
task comes before it) plus the kernels the tasks call and the placement of the output blocks;
codegen's sequence is a :class:`TaskList`, whose records are built when first read.

Task kinds (TensorPlanner's workflow):

- ``load``   — read one block of an operand (a view of a numpy input, an ObjectRef on Ray);
- ``apply``  — a unary block kernel (a reduction pushed into one operand, a permutation);
- ``pair``   — an n-ary block kernel over one tuple of joined blocks (the contraction);
- ``reduce`` — fold the partial blocks of one output block with the statement's monoid.

Kernels are called ``kernel(*input_blocks, out=None)``; a load's kernel is called
``kernel(operand, slices, out=None)`` and also answers ``copies(operand, slices)`` (whether
its block is a fresh copy, so an executor may hand it a recycled buffer as ``out``) and
``identity(dtype)`` (whether a stored block of that dtype is the load's block unchanged).

Every task carries its deterministic key ``(stage, *block_coordinates)``, its block shape,
output bytes and flops, so counts and bytes can be asserted without running anything.

The same facts as arrays (:class:`TaskColumns`: kind codes, bytes, flops and the inputs in
CSR form) are what the planner's whole-graph passes read (the schedule simulation, the
cost, the summary): codegen hands them over with the graph; for a graph built otherwise
:meth:`TaskGraph.columns` derives them once from the tasks.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from tensorc.errors import IRVerificationError

LOAD, APPLY, PAIR, REDUCE = "load", "apply", "pair", "reduce"
KINDS = (LOAD, APPLY, PAIR, REDUCE)


class Task:
    """One node of the task graph (a plain slotted record; graphs hold 10⁵ of them)."""

    __slots__ = ("key", "kind", "kernel", "inputs", "shape", "nbytes", "flops", "source")

    def __init__(
        self,
        key: tuple,
        kind: str,
        kernel: int,
        inputs: tuple[int, ...],
        shape: tuple[int, ...],
        nbytes: int,
        flops: int,
        source: tuple[int, tuple[slice, ...]] | None = None,
    ) -> None:
        self.key = key
        self.kind = kind
        self.kernel = kernel
        self.inputs = inputs
        self.shape = shape
        self.nbytes = nbytes
        self.flops = flops
        self.source = source  # load tasks: (operand position, block slices)

    def __repr__(self) -> str:
        return f"Task({self.key!r}, {self.kind}, inputs={self.inputs}, shape={self.shape})"


Kernel = Callable[..., np.ndarray]


class TaskList(Sequence):
    """A graph's tasks made on first use: its length is known at once, the :class:`Task`
    records are built by ``make`` when an element is first read (once, under a lock), and
    a load's source by ``source`` without building any record. Codegen hands one over with
    the columns, so that planning a graph of millions of tasks (which reads the columns and
    the loads' sources) never builds a record each; running it does."""

    __slots__ = ("_count", "_make", "_source", "_tasks", "_lock")

    def __init__(self, count: int, make: Callable[[], list[Task]],
                 source: Callable[[int], tuple | None] | None = None) -> None:
        self._count, self._make, self._source, self._tasks = count, make, source, None
        self._lock = threading.Lock()

    def _list(self) -> list[Task]:
        tasks = self._tasks
        if tasks is None:
            with self._lock:
                if self._tasks is None:
                    self._tasks = self._make()
                    self._make = None
                tasks = self._tasks
        return tasks

    @property
    def made(self) -> bool:
        """Whether the records have been built."""
        return self._tasks is not None

    def source(self, index: int) -> tuple | None:
        """Task ``index``'s ``source`` (a load's operand position and block slices), from
        the records when built, else without building them."""
        if self._tasks is not None or self._source is None:
            return self._list()[index].source
        return self._source(index)

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index):
        return self._list()[index]

    def __iter__(self):
        return iter(self._list())

    def __eq__(self, other) -> bool:
        if isinstance(other, TaskList):
            other = other._list()
        return isinstance(other, list) and self._list() == other

    __hash__ = None

    def __reduce__(self):
        return list, (self._list(),)  # pickled as the records (``make`` is a closure)


def task_source(tasks: Sequence[Task], index: int) -> tuple | None:
    """The ``source`` of task ``index`` of ``tasks`` (a :class:`TaskList`'s without
    building its records)."""
    return tasks.source(index) if isinstance(tasks, TaskList) else tasks[index].source


KIND_CODE = {kind: code for code, kind in enumerate(KINDS)}
"""Task kind → its code in :attr:`TaskColumns.kind` (``load`` is 0)."""


@dataclass
class TaskColumns:
    """The tasks of a graph as arrays, index ``i`` for task ``i``.

    Attributes:
        kind: ``KIND_CODE`` of every task (int8).
        nbytes: output bytes (int64).
        flops: flops (int64).
        indptr: task ``i`` reads ``inputs[indptr[i]:indptr[i + 1]]`` (CSR, int64).
        inputs: the input task indices, in each task's input order (int64).
        kernel: every task's kernel index (int64).
        stages: per stage key ``key[0]``: the indices of its tasks and their block
            coordinates (one row per task), when codegen knows them; else empty.
    """

    kind: np.ndarray
    nbytes: np.ndarray
    flops: np.ndarray
    indptr: np.ndarray
    inputs: np.ndarray
    kernel: np.ndarray
    stages: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    @classmethod
    def of(cls, tasks: list[Task]) -> TaskColumns:
        """The columns of ``tasks`` (one pass over them)."""
        lengths = np.fromiter((len(t.inputs) for t in tasks), np.int64, len(tasks))
        indptr = np.zeros(len(tasks) + 1, np.int64)
        np.cumsum(lengths, out=indptr[1:])
        inputs = np.fromiter((s for t in tasks for s in t.inputs), np.int64, int(indptr[-1]))
        return cls(
            kind=np.fromiter((KIND_CODE[t.kind] for t in tasks), np.int8, len(tasks)),
            nbytes=np.fromiter((t.nbytes for t in tasks), np.int64, len(tasks)),
            flops=np.fromiter((t.flops for t in tasks), np.int64, len(tasks)),
            indptr=indptr,
            inputs=inputs,
            kernel=np.fromiter((t.kernel for t in tasks), np.int64, len(tasks)),
        )

    def uses(self) -> np.ndarray:
        """How many times each task's result is read (one per occurrence in inputs)."""
        return np.bincount(self.inputs, minlength=len(self.kind)).astype(np.int64)

    def readers(self) -> np.ndarray:
        """The reading task of every entry of :attr:`inputs`."""
        return np.repeat(np.arange(len(self.kind), dtype=np.int64), np.diff(self.indptr))


@dataclass
class TaskGraph:
    """Tasks in topological order, their kernels, and where each output block goes."""

    name: str
    tasks: Sequence[Task]
    """The tasks in order: a list, or a :class:`TaskList` built on first use."""
    kernels: list[Kernel]
    outputs: list[tuple[int, tuple[slice, ...]]]
    output_shape: tuple[int, ...]
    dtype: np.dtype
    operand_names: tuple[str, ...]
    stage_dims: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Index names of the block coordinates in the keys of each stage (``key[0]``): a
    load's array indices, a compute task's iteration indices, a reduce's output indices."""
    _consumers: list[list[int]] | None = field(default=None, repr=False)
    _max_width: int | None = field(default=None, repr=False)
    _columns: TaskColumns | None = field(default=None, repr=False)

    def columns(self) -> TaskColumns:
        """The tasks as arrays (codegen's, or derived from the tasks once)."""
        if self._columns is None:
            self._columns = TaskColumns.of(self.tasks)
        return self._columns

    def consumers(self) -> list[list[int]]:
        """For every task, the tasks that read its result (computed once)."""
        if self._consumers is None:
            consumers: list[list[int]] = [[] for _ in self.tasks]
            for index, task in enumerate(self.tasks):
                for source in task.inputs:
                    consumers[source].append(index)
            self._consumers = consumers
        return self._consumers

    def counts(self) -> dict[str, int]:
        """Number of tasks of each kind (every kind present, zero if absent)."""
        found = np.bincount(self.columns().kind, minlength=len(KINDS))
        return {kind: int(found[code]) for code, kind in enumerate(KINDS)}

    def summary(self) -> dict[str, int]:
        counts = self.counts()
        columns = self.columns()
        compute = columns.kind != KIND_CODE[LOAD]
        return {
            "tasks": len(self.tasks),
            **{f"{kind}_tasks": count for kind, count in counts.items()},
            "flops": int(columns.flops.sum()),
            "intermediate_bytes": int(columns.nbytes[compute].sum()),
            "max_width": self.max_width(),
        }

    def max_width(self) -> int:
        """Most compute tasks that could run at once (tasks per dependency level); computed
        once per graph, since executors ask on every run."""
        if self._max_width is None:
            self._max_width = self._widest_level()
        return self._max_width

    def _widest_level(self) -> int:
        levels = _levels(self.columns())
        if levels is not None:
            compute = levels[levels > 0]
            return int(np.bincount(compute).max()) if len(compute) else 0
        level = [0] * len(self.tasks)
        widths: Counter[int] = Counter()
        for index, task in enumerate(self.tasks):
            if task.kind == LOAD:
                continue
            depth = 1 + max((level[s] for s in task.inputs), default=0)
            level[index] = depth
            widths[depth] += 1
        return max(widths.values(), default=0)

    def verify(self) -> None:
        """Check topological order and output coverage; raise on a broken graph."""
        columns = self.columns()
        late = (columns.inputs < 0) | (columns.inputs >= columns.readers())
        if late.any():
            task = self.tasks[int(columns.readers()[np.argmax(late)])]
            raise IRVerificationError(f"task {task.key} reads a later or unknown task")
        kernel = columns.kernel
        unknown = (kernel < 0) | (kernel >= len(self.kernels))
        if unknown.any():
            index = int(np.argmax(unknown))
            raise IRVerificationError(
                f"task {self.tasks[index].key} calls unknown kernel {int(kernel[index])}")
        covered = sum(
            int(np.prod([s.stop - s.start for s in slices])) for _, slices in self.outputs
        )
        if covered != int(np.prod(self.output_shape)):
            raise IRVerificationError(
                f"output blocks cover {covered} elements of {int(np.prod(self.output_shape))}"
            )

    def format(self, limit: int | None = None) -> str:
        """Deterministic text: one line per task, ``limit`` lines at most."""
        lines = []
        for index, task in enumerate(self.tasks[:limit]):
            args = ",".join(str(s) for s in task.inputs)
            lines.append(
                f"t{index} {task.kind} {task.key} <- [{args}] shape={task.shape} "
                f"bytes={task.nbytes} flops={task.flops}"
            )
        if limit is not None and len(self.tasks) > limit:
            lines.append(f"... {len(self.tasks) - limit} more tasks")
        return "\n".join(lines)


LEVEL_ROUNDS = 64  # relaxation rounds before the levels are walked task by task


def _levels(columns: TaskColumns) -> np.ndarray | None:
    """Dependency level of every task (loads 0, a compute task one more than its deepest
    input) by rounds over all edges at once; ``None`` for a graph deeper than
    :data:`LEVEL_ROUNDS`."""
    count = len(columns.kind)
    compute = columns.kind != KIND_CODE[LOAD]
    level = compute.astype(np.int64)
    if not len(columns.inputs):
        return level
    readers = columns.readers()
    for _ in range(LEVEL_ROUNDS):
        deepest = np.zeros(count, np.int64)
        np.maximum.at(deepest, readers, level[columns.inputs])
        updated = np.where(compute, deepest + 1, 0)
        if np.array_equal(updated, level):
            return level
        level = updated
    return None
