"""Evaluating lazy arrays: lower the graph, plan it as one program, run it, keep the values.

Contract: ``evaluate_graph(exprs)`` evaluates every not-yet-evaluated ``ArrayNode`` in
``exprs`` in one program (:mod:`tensorc.lazy.lowering`), planned by the whole-program planner
and run by one :class:`~tensorc.driver.statements.StatementRunner` (plans cached across
evaluations, so a loop that builds the same computation each iteration plans once): on the
Ray session when there is one (results stay on the nodes as
:class:`~tensorc.runtime.ray.arrays.DistributedArray`), else in this process (numpy). Each
evaluated node becomes a leaf holding its value (its operands are released),
``tc.last_stats()`` reports the run, and :func:`last_program` keeps what ``explain()``
shows. A ``deferred`` node under them (:mod:`tensorc.lazy.graph`) is computed first, its
operands evaluated as their own program and its callable run on their values; the rest is
then one program reading its value.
"""

from __future__ import annotations

import time
import weakref

from tensorc import session
from tensorc.driver import stats as run_stats
from tensorc.driver.statements import StatementRunner
from tensorc.errors import ExecutionError
from tensorc.lazy.graph import ArrayNode, NodeKind, leaf
from tensorc.lazy.lowering import LoweredGraph, lower_graph, post_order
from tensorc.runtime.ray.arrays import DistributedArray

RUNNER = StatementRunner()
"""The runner of every array program (its plan caches are shared by all evaluations)."""

_PROGRAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def backend() -> str:
    """Where array programs run now: the session's executor's backend (``"ray"`` or
    ``"local"``)."""
    return session.current().executor.backend


def evaluate_graph(exprs: list[ArrayNode]) -> None:
    """Evaluate ``exprs`` (see the module docstring)."""
    pending = [e for e in dict.fromkeys(exprs) if e.value is None]
    if not pending:
        return
    _run_deferred(pending)
    pending = [e for e in pending if e.value is None]
    if not pending:
        return
    started = time.perf_counter()
    lowered = lower_graph(pending)
    executor = session.current().executor
    where = executor.backend
    if executor.in_process and any(isinstance(v, DistributedArray)
                                   for v in lowered.inputs.values()):
        raise ExecutionError("this array lives on a Ray session that has been shut down; "
                             "call tc.init(...) again and recreate it")
    values, ran = RUNNER.run(lowered.unrolled, lowered.inputs, executor)
    for expr, label in zip(pending, lowered.labels, strict=True):
        if expr.value is None:
            expr.become_leaf(values[label] if label in values else lowered.inputs[label])
    stats = run_stats.program_stats(ran, backend=where, seconds=time.perf_counter() - started,
                                    remote_calls=RUNNER.node_calls)
    stats["statements_run"] = len(lowered.unrolled.statements)
    run_stats.record(stats)
    for expr in pending:
        _PROGRAMS[expr] = (lowered, where, stats)


def evaluate_into(expr: ArrayNode, sink) -> None:
    """Evaluate ``expr`` with its blocks written to ``sink`` (a
    :class:`~tensorc.stored.BlockSink`) as they complete, never held whole: the program is
    planned with its result streamed; ``expr`` itself stays unevaluated. On Ray the nodes
    write the blocks they compute."""
    _run_deferred([expr])
    started = time.perf_counter()
    lowered = lower_graph([expr])
    executor = session.current().executor
    label = lowered.labels[0]
    _, ran = RUNNER.run(lowered.unrolled, lowered.inputs, executor, sinks={label: sink})
    stats = run_stats.program_stats(ran, backend=executor.backend,
                                    seconds=time.perf_counter() - started,
                                    remote_calls=RUNNER.node_calls)
    stats["statements_run"] = len(lowered.unrolled.statements)
    run_stats.record(stats)


def _run_deferred(roots: list[ArrayNode]) -> None:
    """Compute every ``deferred`` node under ``roots``, innermost first."""
    for node in post_order(roots):
        if node.kind is not NodeKind.DEFERRED or node.value is not None:
            continue
        evaluate_graph([a for a in node.args if isinstance(a, ArrayNode)])
        value = node.op(*(a.value if isinstance(a, ArrayNode) else a for a in node.args))
        if tuple(value.shape) != node.shape:
            raise ExecutionError(f"{node.params} made shape {tuple(value.shape)}, not "
                                 f"{node.shape}")
        if value.dtype != node.dtype:  # convert as a program of its own
            converted = ArrayNode(NodeKind.CAST, None, (leaf(value),), None, node.shape, node.dtype)
            evaluate_graph([converted])
            value = converted.value
        node.become_leaf(value)


def last_program(expr: ArrayNode) -> tuple[LoweredGraph, str, dict] | None:
    """The program that evaluated ``expr`` (its lowering, backend and statistics)."""
    return _PROGRAMS.get(expr)
