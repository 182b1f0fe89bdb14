"""Running a statement program in this process: the local executor's statement runner.

Contract: :func:`run_statements_here` runs an :class:`~tensorc.frontend.tc_lower.Unrolled` program's
statements in SSA order on numpy arrays, each result feeding later ones, with plans from the
driver's planner (planned with the whole program first when ``nodes > 1`` was asked for).
Three kinds of statement: an IR statement (planned, run on the :class:`~tensorc.runtime.
task_pool.TaskPool`), a *fill* (a constant) and a *whole-array* statement (an operation of
:mod:`tensorc.codegen.whole_array`, such as a reshape or a small solve). A run longer than
about two seconds shows a progress bar on a terminal (:mod:`tensorc.progress`). The helpers
here (one statement run here, constants, statistics) serve the Ray runner's statements that
run on the driver too.
"""

from __future__ import annotations

import time

import numpy as np

from tensorc.codegen.whole_array import apply_whole
from tensorc.frontend.tc_lower import Statement, Unrolled
from tensorc.planning.plan import Plan
from tensorc.progress import Progress
from tensorc.runtime.task_pool import TaskPool, admission_budget
from tensorc.stored import BlockSink, StoredArray


def run_statements_here(planner, unrolled: Unrolled, arrays: dict,
                        sinks: dict | None = None) -> tuple[dict, list]:
    """Run ``unrolled`` on ``arrays`` (inputs by label) in this process, statement by
    statement in SSA order: ``({output label: ndarray}, [(label, statistics)])``. An IR
    statement whose label is in ``sinks`` and that no later statement reads writes its
    blocks to that :class:`~tensorc.stored.BlockSink` as they complete (its value is
    ``None``); any other sink gets the whole value written."""
    nodes = planner.options.nodes or 1
    layouts = planner.plan_layouts(unrolled, nodes) if nodes > 1 else None
    sinks = dict(sinks or {})
    read = {label for st in unrolled.statements for label in st.operands}
    streamed = {st.label for st in unrolled.statements
                if st.label in sinks and st.program is not None and st.label not in read
                and layouts is None}
    env: dict[str, object] = dict(arrays)
    ran: list[tuple[str, dict]] = []
    planned: dict[str, tuple[Plan, bool, float]] = {}
    for statement in unrolled.statements:
        if statement.program is None:
            continue
        started = time.perf_counter()
        if layouts is not None:  # planned with the whole program, before the run
            plan, cached = layouts.plans[statement.label], True
        else:
            stored = {k: env[label].chunks for k, label in enumerate(statement.operands)
                      if isinstance(env.get(label), StoredArray)}
            sink = sinks.get(statement.label) if statement.label in streamed else None
            plan, cached = planner.cached_plan(
                statement, stored=stored,
                sink_chunks=None if sink is None else (sink.chunks or ()))
        seconds = time.perf_counter() - started
        planned[statement.label] = (plan, cached,
                                    seconds if cached else plan.stats["plan_seconds"])
    total = sum(p.stats["tasks"] for p, _, _ in planned.values())
    with Progress(total + len(unrolled.statements) - len(planned)) as progress:
        for statement in unrolled.statements:
            if statement.program is None:
                env[statement.label] = local_constant(statement, env)
                if statement.whole is not None:
                    ran.append((statement.label, whole_stats(statement, "local")))
                progress.advance(1)
                continue
            plan, cached, seconds = planned[statement.label]
            env[statement.label], stats = run_here(
                statement, plan, [env[label] for label in statement.operands],
                cached=cached, plan_seconds=seconds, workers=planner.options.workers,
                sink=sinks.pop(statement.label) if statement.label in streamed else None)
            ran.append((statement.label, stats))
            progress.advance(plan.stats["tasks"])
    for label, sink in sinks.items():  # computed whole: written whole
        write_whole(sink, np.asarray(env[label]))
        env[label] = None
    return {label: env[label] for label in output_labels(unrolled)}, ran


def write_whole(sink: BlockSink, value: np.ndarray) -> None:
    """A value computed whole, written to ``sink`` as one block."""
    sink.open(value.shape)
    sink.write(tuple(slice(0, n) for n in value.shape), value.astype(sink.dtype, copy=False))


def run_here(statement: Statement, plan: Plan, operands: list, *, cached: bool,
             plan_seconds: float, workers, sink: BlockSink | None = None
             ) -> tuple[np.ndarray | None, dict]:
    """One IR statement on the local executor: its value in the statement's dtype, and
    its statistics; with a ``sink``, its blocks written there instead (value ``None``)."""
    pool = TaskPool(workers, admission_budget(plan))
    if sink is not None:
        sink.open(output_block_shape(plan))
        pool.run(plan.graph, None, operands, sink)
        return None, local_stats(plan, pool.last_run, cached=cached, plan_seconds=plan_seconds)
    out = np.empty(statement.shape, dtype=plan.graph.dtype)
    pool.run(plan.graph, None, operands, out)
    stats = local_stats(plan, pool.last_run, cached=cached, plan_seconds=plan_seconds)
    return (out if out.dtype == statement.dtype else out.astype(statement.dtype)), stats


def output_block_shape(plan: Plan) -> tuple[int, ...]:
    """The block shape of a plan's result (its first output block's extent, which regular
    blockings share)."""
    shape = plan.graph.output_shape
    if not plan.graph.outputs or not shape:
        return tuple(shape)
    _, slices = plan.graph.outputs[0]
    return tuple(max(1, s.stop - s.start) for s in slices) if slices else tuple(shape)


def local_stats(plan: Plan, run: dict, *, cached: bool, plan_seconds: float) -> dict:
    """The statistics of one local run of ``plan``."""
    return {
        **plan.stats,
        "backend": "local",
        "scheduler": None,
        "plan_cached": cached,
        "plan_seconds": plan_seconds,
        "run_seconds": run["run_seconds"],
        "workers": run["workers"],
        "blas_threads": run["blas_threads"],
        "measured_inter_node_bytes": None,
        "peak_rss_bytes": run.get("peak_rss_bytes"),
        "rss_before_bytes": run.get("rss_before_bytes"),
    }


def output_labels(unrolled: Unrolled) -> list[str]:
    return list(dict.fromkeys(label for _, label in unrolled.outputs))


def local_constant(statement: Statement, env: dict) -> np.ndarray:
    """A fill, or a whole-array statement, computed in this process."""
    if statement.whole is None:
        return np.full(statement.shape, statement.fill, statement.dtype)
    values = [np.asarray(env[label]) for label in statement.operands]
    return np.asarray(apply_whole(statement.whole, *values), dtype=statement.dtype)


def whole_stats(statement: Statement, backend: str, seconds: float = 0.0) -> dict:
    return {"backend": backend, "whole_array": statement.whole[0], "tasks": 1,
            "run_seconds": seconds}
