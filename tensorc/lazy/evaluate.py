"""Evaluating lazy arrays: lower the graph, plan it as one program, run it, keep the values.

Contract: ``evaluate_graph(exprs)`` evaluates every not-yet-evaluated ``ArrayNode`` in
``exprs`` in one program (:mod:`tensorc.lazy.lowering`), planned by the whole-program planner
and run by one :class:`~tensorc.driver.statements.StatementRunner` (plans cached across
evaluations, so a loop that builds the same computation each iteration plans once): on the
Ray session when there is one (results stay on the nodes as
:class:`~tensorc.runtime.ray.arrays.DistributedArray`), else in this process (numpy). Each
evaluated node becomes a leaf holding its value (its operands are released); so does every
other node the program computed as a statement, locally and on Ray (where its value stays on
the nodes): its value is kept only while something still refers to the node, which is when
a later program may read it instead of computing it again (scikit-learn's loss, its
gradient and its intercept's gradient from one ``X @ w``, computed once an iteration on Ray
too, not three times).
``tc.last_stats()`` reports the run, and :func:`last_program` keeps what ``explain()``
shows. A ``deferred`` node under them (:mod:`tensorc.lazy.graph`) is computed first, its
operands evaluated as their own program and its callable run on their values; the rest is
then one program reading its value.

An array not made yet (:mod:`tensorc.lazy.creation`) under them is, on Ray, an input of
the program given as its :class:`~tensorc.placement.recipes.Recipe`: the plan of the first
statement reading it lays it out freely and the run makes it there; it then becomes a
leaf holding what was made (``made_for`` names the statement). Made in its default layout
instead when it is a requested array itself, when a whole-array statement reads it, or when
the program runs in this process.
"""

from __future__ import annotations

import dataclasses
import time
import weakref

from tensorc import session
from tensorc.driver import stats as run_stats
from tensorc.driver.statements import StatementRunner
from tensorc.errors import ExecutionError
from tensorc.lazy.graph import ArrayNode, NodeKind, leaf
from tensorc.lazy.lowering import LoweredGraph, lower_graph, post_order
from tensorc.lazy.not_made import creation_of
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
    executor = session.current().executor
    _run_deferred(pending, made_later=not executor.in_process)
    pending = [e for e in pending if e.value is None]
    if not pending:
        return
    started = time.perf_counter()
    lowered = lower_graph(pending)
    where = executor.backend
    if executor.in_process and any(isinstance(v, DistributedArray)
                                   for v in lowered.inputs.values()):
        raise ExecutionError("this array lives on a Ray session that has been shut down; "
                             "call tc.init(...) again and recreate it")
    inputs, not_made = _recipes_as_inputs(lowered)
    kept = lowered.intermediates
    program = lowered.unrolled if not kept else dataclasses.replace(
        lowered.unrolled, outputs=(*lowered.unrolled.outputs,
                                   *((label, label) for _, label in kept)))
    values, ran = RUNNER.run(program, inputs, executor)
    _made(not_made, lowered, ran)
    for expr, label in zip(pending, lowered.labels, strict=True):
        if expr.value is None:
            expr.become_leaf(values[label] if label in values else lowered.inputs[label])
    for node, label in kept:
        if node.value is None:
            node.become_leaf(values[label])
    stats = run_stats.program_stats(ran, backend=where, seconds=time.perf_counter() - started,
                                    remote_calls=RUNNER.node_calls)
    stats["statements_run"] = len(lowered.unrolled.statements)
    run_stats.record(stats)
    shown = dataclasses.replace(lowered, intermediates=())  # not kept alive by explain()
    for expr in (*pending, *(node for node, _ in kept)):
        _PROGRAMS[expr] = (shown, where, stats)


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


def _recipes_as_inputs(lowered: LoweredGraph) -> tuple[dict, dict]:
    """The program's input values with every array not made yet given as its recipe (made
    by the run where its first reader's plan wants it), and those nodes by label. One a
    whole-array statement reads is made first, in its default layout."""
    whole = {label for st in lowered.unrolled.statements if st.whole is not None
             for label in st.operands}
    inputs, not_made = dict(lowered.inputs), {}
    for label, value in lowered.inputs.items():
        recipe = creation_of(value) if isinstance(value, ArrayNode) else None
        if recipe is None:
            continue
        if label in whole:
            value.become_leaf(value.op())
            inputs[label] = value.value
        else:
            inputs[label] = recipe
            not_made[label] = value
    return inputs, not_made


def _made(not_made: dict, lowered: LoweredGraph, ran: list) -> None:
    """Each array made by the run becomes a leaf of what was made (in its default layout if
    no statement on the nodes made it); its ``origin`` names the statement whose plan chose
    its layout."""
    texts = {st.label: st.text for st in lowered.unrolled.statements}
    operands = {st.label: st.operands for st in lowered.unrolled.statements}
    on_nodes = [label for label, stats in ran if not stats.get("on_driver")]
    for label, node in not_made.items():
        made = node.op.recipe.made
        if made is not None and made.origin is None:
            reader = next((st for st in on_nodes if label in operands.get(st, ())), None)
            if reader is not None:
                made.origin = f"laid out for statement {reader} ({texts[reader].strip()})"
        node.become_leaf(made if made is not None else node.op())


def _run_deferred(roots: list[ArrayNode], made_later: bool = False) -> None:
    """Compute every ``deferred`` node under ``roots``, innermost first; with
    ``made_later``, an array not made yet under them (not a root) is left to the program
    reading it."""
    requested = {id(r) for r in roots}
    for node in post_order(roots):
        if node.kind is not NodeKind.DEFERRED or node.value is not None:
            continue
        if made_later and id(node) not in requested and creation_of(node) is not None:
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
