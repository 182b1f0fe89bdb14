"""The cache-hit fast path of ``tensorc.einsum`` for small local calls.

People call einsum in loops on small operands, where a call's cost is its overhead. The
first call of a kind runs the full path (front end, plan cache, executor) and, when it is
eligible, leaves an :class:`Entry` here keyed cheaply by what decides the plan; the next
call with the same key skips everything a small call does not need:

- the key is ``(subscripts, optimize, shape, dtype, contiguity of each operand)``, built
  from attributes only; eligible calls are local (no ``tc.Array``, session backend local),
  take ndarray operands that are C- or Fortran-contiguous, and leave ``out``, ``dtype``,
  ``casting``, ``order`` and the plan options at their defaults (anything else takes the
  full path, which checks it);
- a view einsum (``ij->ji``, ``ii->i``) is the view, taken by its recipe;
- a plan of at most :data:`MAX_TASKS` tasks with no two runnable at once runs its kernels in
  order in the calling thread (no executor object, no thread pool, no BLAS re-limit: the
  executor would run such a graph serially too), into a result allocated in the memory order
  the full path chose;
- statistics are the full path's, copied, with ``fast_path: True`` and the run time.

Everything keyed here is derived from a plan in ``tensorc.planning.plan.EINSUM_PLANS``;
:func:`clear` drops it with that cache. It sits beside :mod:`tensorc.runtime.ray.plans` in the layer
order: it replays a plan that module ran, and records its statistics through it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from tensorc import session
from tensorc.codegen.taskgraph import LOAD
from tensorc.errors import ExecutionError
from tensorc.frontend.views import Recipe, take_view

MAX_TASKS = 8
MAX_ENTRIES = 1024

ENTRIES: dict[tuple, Entry] = {}
"""Prepared calls by key; read without a lock (one dict get), written on a miss."""


def clear() -> None:
    ENTRIES.clear()


def key(subscripts, operands: Sequence[object], out, optimize, backend, dtype, order, casting,
        plan_options: dict) -> tuple | None:
    """The fast-path key of a call, or ``None`` when the call is not eligible."""
    if (
        out is not None
        or dtype is not None
        or order != "K"
        or casting != "safe"
        or plan_options
        or backend not in (None, "local")
        or type(subscripts) is not str
        or not isinstance(optimize, (bool, str))
        or not session._session.executor.in_process  # noqa: SLF001 - attribute reads only
    ):
        return None
    parts: list[object] = [subscripts, optimize]
    for operand in operands:
        if type(operand) is not np.ndarray:
            return None
        flags = operand.flags
        if flags.c_contiguous:
            operand_order = "C"
        elif flags.f_contiguous:
            operand_order = "F"
        else:
            return None
        parts.append(operand.shape)
        parts.append(operand.dtype)
        parts.append(operand_order)
    return tuple(parts)


class Entry:
    """A prepared call: either a view recipe, or a serial run of a small task graph."""

    __slots__ = ("recipe", "steps", "shape", "axes", "compute", "result_type", "stats")

    def __init__(self, stats: dict) -> None:
        self.recipe: Recipe | None = None
        self.steps: list[tuple] = []
        self.shape: tuple[int, ...] = ()
        self.axes: tuple[int, ...] | None = None
        self.compute = self.result_type = None
        self.stats = {**stats, "plan_cached": True, "fast_path": True}


def learn_view(call_key: tuple | None, recipe: Recipe, stats: dict) -> None:
    if call_key is None:
        return
    entry = Entry(stats)
    entry.recipe = recipe
    _store(call_key, entry)


def learn(call_key: tuple | None, plan, target: np.ndarray, compute: np.dtype,
          result_type: np.dtype, stats: dict) -> None:
    """Remember ``plan`` for ``call_key`` when its graph is small and serial. ``target`` is
    the result array the full path allocated (its memory order is kept)."""
    if call_key is None:
        return
    graph = plan.graph
    if len(graph.tasks) > MAX_TASKS or graph.max_width() > 1:
        return
    entry = Entry(stats)
    destination = dict(graph.outputs)
    for index, task in enumerate(graph.tasks):
        entry.steps.append((
            graph.kernels[task.kernel],
            task.kind == LOAD,
            task.source if task.kind == LOAD else tuple(task.inputs),
            destination.get(index),
            task.key,
        ))
    entry.shape = target.shape
    if target.ndim > 1 and not target.flags.c_contiguous:
        strides = [abs(s) for s in target.strides]
        entry.axes = tuple(sorted(range(target.ndim), key=lambda k: (-strides[k], k)))
    entry.compute = compute
    entry.result_type = result_type
    _store(call_key, entry)


def _store(call_key: tuple, entry: Entry) -> None:
    if len(ENTRIES) >= MAX_ENTRIES:
        ENTRIES.pop(next(iter(ENTRIES)))
    ENTRIES[call_key] = entry


def run(entry: Entry, operands: Sequence[np.ndarray], record: Callable[[dict], None]) -> object:
    """Run a call whose key found ``entry`` in :data:`ENTRIES`; ``record`` receives the
    statistics (``tensorc.runtime.ray.plans.record``)."""
    started = time.perf_counter()
    if entry.recipe is not None:
        view = take_view(operands[0], entry.recipe)
        record(entry.stats)
        return view[()] if view.ndim == 0 else view
    if entry.axes is None:
        target = np.empty(entry.shape, dtype=entry.compute)
    else:
        axes = entry.axes
        target = np.empty([entry.shape[k] for k in axes], dtype=entry.compute).transpose(
            np.argsort(axes)
        )
    values: list[object] = []
    for kernel, load, source, destination, task_key in entry.steps:
        out = None
        if destination is not None:
            out = target[destination] if destination else target
        try:
            if load:
                value = kernel(operands[source[0]], source[1], out=out)
            else:
                value = kernel(*[values[s] for s in source], out=out)
        except Exception as err:  # noqa: BLE001 - re-raised with the task named, as the executor does
            raise ExecutionError(
                f"task {task_key} failed: {type(err).__name__}: {err}"
            ) from err
        values.append(value)
    stats = dict(entry.stats)
    stats["run_seconds"] = time.perf_counter() - started
    record(stats)
    if target.dtype != entry.result_type:
        target = target.astype(entry.result_type)
    return target[()] if target.ndim == 0 else target
