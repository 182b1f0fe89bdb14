"""The one executor interface: what runs a planned unit, in this process or on Ray.

Contract: an :class:`Executor` runs the three kinds of planned unit tensorc makes and returns
each run's statistics (the driver records them; nothing here writes ``tc.last_stats()``):

- :meth:`Executor.run_plan` — one planned einsum (a :class:`~tensorc.planning.plan.Plan`,
  its task graph) on its operands;
- :meth:`Executor.run_statements` — a program's SSA statements (a ``.tc`` program or a lazy
  array program, :class:`~tensorc.frontend.tc_lower.Unrolled`), planned through the
  driver's :class:`StatementPlanner`;
- :meth:`Executor.run_block_program` — a block program's DAG, expanded from its ready
  tasks here and in program order on Ray (:class:`~tensorc.codegen.block_dag.BlockDag`).

It also makes the values programs start from, where they will be used: :meth:`place` (a
driver array), :meth:`full`, :meth:`random` and :meth:`reblock` (an evaluated value cut as
``block_shape=``/``grid=`` ask), and runs the operations whose result shape depends on
the data (:meth:`select`, :meth:`unique`, :meth:`nonzero`) on values evaluated for them.

Two implementations: :class:`~tensorc.runtime.local.LocalExecutor` (threads in this process,
numpy results) and :class:`~tensorc.runtime.ray.executor.RayExecutor` (node workers on a
Ray cluster, results left on the nodes as
:class:`~tensorc.runtime.ray.arrays.DistributedArray`). The session chooses one when it starts
(``tc.init``); nothing above the runtime branches on which it is.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

import numpy as np


class StatementPlanner(Protocol):
    """What an executor asks the driver while it runs a statement program."""

    options: Any
    """The program's plan options (``workers``, ``nodes``, ...)."""

    def cached_plan(self, statement, nodes: int = 1, placed=None,
                    stored: dict | None = None, sink_chunks=None) -> tuple[Any, bool]:
        """One statement's plan for ``nodes`` nodes and whether it was cached (``stored``:
        operand positions read from storage → their chunk shapes)."""
        ...

    def plan_layouts(self, unrolled, nodes: int, initial=None, skip: frozenset = frozenset(),
                     stored: dict | None = None, sinks: dict | None = None):
        """The whole program's plan (layouts flowing between statements; ``stored``: input
        labels read from storage → their chunk shapes; ``sinks``: labels streamed to a
        sink → its chunk shape)."""
        ...


class Executor(ABC):
    """Runs planned units; see the module docstring."""

    backend: ClassVar[str]
    """``"local"`` or ``"ray"``: what ``tc.last_stats()["backend"]`` says."""

    in_process: ClassVar[bool]
    """Whether results are numpy arrays in this process (so a view, numpy's own einsum or
    a result written into ``out`` can stand for a run)."""

    @property
    @abstractmethod
    def nodes(self) -> int:
        """Nodes this executor runs on (1 in this process)."""

    @property
    @abstractmethod
    def cpus(self) -> int:
        """Worker threads in all: what a plan's default ``workers`` is."""

    @abstractmethod
    def default_memory_limit(self) -> tuple[int, str]:
        """The memory budget of one worker when nobody set one: ``(bytes, how it was
        chosen)``, for ``explain()``."""

    @abstractmethod
    def plan_inputs(self, spec, operands: Sequence[object], plan_options: dict,
                    scheduler: str) -> tuple[dict, dict | None, int, tuple[str, ...]]:
        """How an einsum on ``operands`` is planned here: ``(plan options, layouts of
        operands already placed, default workers, memory order of each operand)``."""

    @abstractmethod
    def layouts_of(self, operands: Sequence[object]) -> dict:
        """The layout (no data) of every operand already placed here, by position: what the
        planner prices when it may compute in place or repartition."""

    @abstractmethod
    def run_plan(self, plan, operands: Sequence[object], *, out: np.ndarray | None = None,
                 result_type: np.dtype | None = None, scheduler: str = "lshs",
                 measure: bool | None = None, workers: int | None = None,
                 cached: bool = False, plan_seconds: float = 0.0) -> tuple[object, dict]:
        """Run one planned einsum on ``operands``: ``(result, statistics)``. In process the
        result is written into ``out`` when given; on Ray it stays distributed (converted
        to ``result_type`` on the nodes). ``cached`` and ``plan_seconds`` (the driver's
        planning time) go into the statistics."""

    @abstractmethod
    def run_statements(self, planner: StatementPlanner, unrolled, arrays: dict,
                       sinks: dict) -> tuple[dict, list, int | None]:
        """Run a statement program on ``arrays`` (inputs by label): ``({output label:
        value}, [(label, statistics)], merged node calls or None)``. An output label in
        ``sinks`` is written block by block to its :class:`~tensorc.stored.BlockSink`
        where the executor can (its value is then ``None``), else computed and written
        whole."""

    @abstractmethod
    def run_block_program(self, program, dag, inputs: dict, bounds, *, scheduler: str,
                          workers: int | None, dtype, memory_limit: int | None = None
                          ) -> tuple[dict, dict]:
        """Run a block program's DAG on ``inputs``: ``(outputs by name, statistics)``;
        ``memory_limit``: the budget of one worker, where the executor places to one."""

    def run_node_calls(self, calls: Sequence[tuple[int, Any, Sequence]]) -> tuple[list, dict]:
        """Run work already split by node: each ``(node, kernel, arguments)`` as
        ``kernel(*arguments)`` on that node, returning ``(values, statistics)`` (a sparse
        einsum's parts). Only an executor with nodes out of this process has it."""
        raise NotImplementedError(f"the {self.backend} executor runs no node calls")

    def join_columns(self, values: Sequence[object]) -> object | None:
        """``values`` (evaluated matrices, or vectors as one column each, of the same rows)
        side by side as one block program input, without copying them; ``None`` where this
        executor cannot (the caller concatenates them)."""
        return None

    @abstractmethod
    def place(self, value: np.ndarray, block_shape=None, grid=None) -> object:
        """A driver array as this executor keeps values (on Ray: its blocks on their
        nodes, unless it is small and no blocking is asked for)."""

    @abstractmethod
    def full(self, shape: tuple[int, ...], fill_value, dtype: np.dtype, block_shape=None,
             grid=None) -> object:
        """An array of ``shape`` filled with ``fill_value``, made where it will be used."""

    @abstractmethod
    def random(self, shape: tuple[int, ...], dtype: np.dtype, seed: int, block_shape=None,
               grid=None) -> object:
        """Uniform [0, 1) values; block ``g`` of the blocking drawn from numpy's PCG64
        seeded with ``(seed, *g)``, so values depend on the seed and the blocking only."""

    @abstractmethod
    def reblock(self, value, block_shape=None, grid=None) -> object:
        """An evaluated ``value`` cut as ``block_shape``/``grid`` ask (never gathered)."""

    @abstractmethod
    def select(self, value, mask) -> object:
        """``value[mask]`` for a boolean ``mask`` (at least 1-d) of ``value``'s leading
        dimensions: the selected elements (or sub-arrays) in C order, one result dimension
        for the mask's. A data-dependent shape: the caller has evaluated both (a
        synchronisation point); on Ray the result stays distributed."""

    @abstractmethod
    def unique(self, value, kind: str) -> tuple:
        """numpy 2's ``unique_values``/``unique_counts``/``unique_inverse``/``unique_all`` of
        ``value`` by ``kind`` (``"values"``, ``"counts"``, ``"inverse"``, ``"all"``; values
        sorted, each NaN distinct): the tuple of
        :func:`tensorc.runtime.data_dependent.unique_of`."""

    @abstractmethod
    def nonzero(self, value) -> tuple:
        """``np.nonzero(value)`` (``value`` at least 1-d): one int64 index array per
        dimension."""
