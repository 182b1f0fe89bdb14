"""Task graphs: the plain-data product of codegen, and all the runtime may depend on.

A :class:`TaskGraph` is a list of :class:`Task` in topological order (every input of a task
comes before it) plus the kernels the tasks call and the placement of the output blocks.

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
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
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


@dataclass
class TaskGraph:
    """Tasks in topological order, their kernels, and where each output block goes."""

    name: str
    tasks: list[Task]
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
        counter = Counter(task.kind for task in self.tasks)
        return {kind: counter.get(kind, 0) for kind in KINDS}

    def summary(self) -> dict[str, int]:
        counts = self.counts()
        return {
            "tasks": len(self.tasks),
            **{f"{kind}_tasks": count for kind, count in counts.items()},
            "flops": sum(task.flops for task in self.tasks),
            "intermediate_bytes": sum(
                task.nbytes for task in self.tasks if task.kind != LOAD
            ),
            "max_width": self.max_width(),
        }

    def max_width(self) -> int:
        """Most compute tasks that could run at once (tasks per dependency level); computed
        once per graph, since executors ask on every run."""
        if self._max_width is None:
            self._max_width = self._widest_level()
        return self._max_width

    def _widest_level(self) -> int:
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
        for index, task in enumerate(self.tasks):
            if any(not 0 <= s < index for s in task.inputs):
                raise IRVerificationError(f"task {task.key} reads a later or unknown task")
            if not 0 <= task.kernel < len(self.kernels):
                raise IRVerificationError(f"task {task.key} calls unknown kernel {task.kernel}")
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
