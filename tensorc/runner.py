"""Running SSA statement programs: the ``.tc`` programs and the lazy array programs.

Contract: a :class:`StatementRunner` (plan options in :class:`Options`) plans and runs an
:class:`~tensorc.frontend.tc_lower.Unrolled` program, its inputs bound by label:

- :meth:`StatementRunner.plan` plans one statement (cached by its IR, blocking hints, node
  count and the layouts of operands already on the cluster);
- :meth:`StatementRunner.plan_layouts` plans the whole program for ``nodes`` nodes (layouts
  flow between statements; :mod:`tensorc.planning.program_layouts`), cached by the program's
  statements and the inputs' layouts;
- :meth:`StatementRunner.run` runs the statements in SSA order, each result feeding later
  ones: in this process on numpy arrays (``backend="local"``), or on the Ray session
  (``"ray"``), where every intermediate stays on the cluster, each statement reads its
  operands in the layout (or replica) its plan chose, and a numpy input is distributed once,
  by the first statement that reads it. On Ray the statements are submitted without
  waiting for each other (Ray orders them by their data) and the program is waited for
  once at its end; a statement whose result and operands are all at most
  :data:`DRIVER_BYTES` runs on the driver instead (a round of calls to the nodes would cost
  more than its work; reading its operands costs less), its result a numpy array the next
  statement on the nodes distributes. Those run as late as they can: after every later
  statement on the nodes that does not read them is submitted, so the driver waits for
  their operands while the nodes work on the rest. Returns ``(values by output label,
  per-statement stats)``; the values are numpy arrays (local), or
  :class:`~tensorc.array.BlockArray` and small numpy arrays (Ray);
- three kinds of statement: an IR statement (``program``), a *fill* (a constant; made on its
  nodes on Ray) and a *whole-array* statement (``whole``, an operation of
  :mod:`tensorc.codegen.whole_array` such as a reshape or a small solve), which runs as one
  task on the node holding most of its operands (Ray) and is reported in the stats;
- a run longer than about two seconds shows a progress bar on a terminal
  (:mod:`tensorc.progress`).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from tensorc import execution, session
from tensorc.array import BlockArray, full
from tensorc.codegen.whole_array import apply_whole
from tensorc.frontend.tc_lower import Statement, Unrolled
from tensorc.passes.base import PassContext, PassOptions
from tensorc.planning.plan import Plan, PlanCache, plan_program
from tensorc.planning.pricing import planning_context
from tensorc.planning.program_layouts import ProgramPlan, plan_program_layouts
from tensorc.progress import Progress
from tensorc.runtime.call_batch import CallBatch
from tensorc.runtime.local import available_cores
from tensorc.session import ray_cluster

LAYOUT_CACHE_SIZE = 64
DRIVER_BYTES = 64 * 1024  # statements of a Ray program this small run on the driver


@dataclass(frozen=True)
class Options:
    """Plan options of a statement program (see ``tc.compile``): block sizes by index name
    (``grid`` as blocks per index), worker threads, contraction-path optimisation, nodes
    and the distribution planner."""

    grid: tuple[tuple[str, int], ...] = ()
    block_shape: tuple[tuple[str, int], ...] = ()
    workers: int | None = None
    optimize: object = "auto"
    nodes: int | None = None
    planner: str = "auto"


class StatementRunner:
    """Plans (cached) and runs statement programs; see the module docstring."""

    def __init__(self, options: Options | None = None) -> None:
        self.options = options or Options()
        self.plans = PlanCache()
        self._layouts: OrderedDict[tuple, ProgramPlan] = OrderedDict()
        self.node_calls: int | None = None
        """Calls the last Ray run submitted when its statements' calls were merged
        (``None`` when each statement submitted its own)."""

    # -- planning ------------------------------------------------------------------------
    def _context(self, statement: Statement, nodes: int = 1, placed=None) -> PassContext:
        sizes = statement.program.size_of
        block = dict(statement.block)
        for name, count in self.options.grid:
            if name in sizes:
                block[name] = max(1, math.ceil(sizes[name] / count))
        for name, size in self.options.block_shape:
            if name in sizes:
                block[name] = size
        layouts = {d.name: "C" for d in statement.program.inputs}
        return planning_context(PassOptions(
            optimize=self.options.optimize,
            workers=int(self.options.workers or available_cores()),
            block_shape=block or None,
            layouts=layouts,
            nodes=nodes,
            planner=self.options.planner,
            placed=placed,
        ))

    def plan(self, statement: Statement, nodes: int = 1, placed=None) -> Plan:
        """The (cached) plan of one statement's IR for ``nodes`` nodes, its operands at
        positions in ``placed`` already laid out there."""
        return self.cached_plan(statement, nodes, placed)[0]

    def cached_plan(self, statement: Statement, nodes: int = 1,
                    placed=None) -> tuple[Plan, bool]:
        """:meth:`plan` and whether it came from the cache."""
        ctx = self._context(statement, nodes, placed)
        key = (statement.program, tuple(sorted((ctx.options.block_shape or {}).items())), nodes,
               None if not placed else tuple((p, s.key()) for p, s in sorted(placed.items())))
        plan = self.plans.get(key)
        if plan is not None:
            return plan, True
        plan = plan_program(f"{statement.label}: {statement.text}", statement.program, ctx)
        self.plans.put(key, plan)
        return plan, False

    def plan_layouts(self, unrolled: Unrolled, nodes: int, initial=None,
                     skip: frozenset = frozenset()) -> ProgramPlan:
        """The whole-program plan for ``nodes`` nodes (cached): layouts flow between the
        statements; ``initial`` gives the layouts of inputs already on the cluster; the
        statements labelled in ``skip`` run on the driver and are not planned (a later
        statement lays their results out as it would a numpy input)."""
        key = (unrolled, nodes, skip, None if not initial else tuple(
            (label, s.key()) for label, s in sorted(initial.items())))
        result = self._layouts.get(key)
        if result is not None:
            self._layouts.move_to_end(key)
            return result
        planned = [st for st in unrolled.statements
                   if st.whole is None and st.label not in skip]
        result = plan_program_layouts(
            planned, lambda st, placed: self.plan(st, nodes, placed), nodes, initial)
        self._layouts[key] = result
        if len(self._layouts) > LAYOUT_CACHE_SIZE:
            self._layouts.popitem(last=False)
        return result

    def _on_driver(self, statement: Statement, replicas: dict, ran: list) -> None:
        """Run a small statement of a Ray program in this process (at most
        :data:`DRIVER_BYTES` in and out); its operands are gathered (waiting for them), its
        result stays a numpy array, which a later statement on the nodes distributes as its
        plan cuts it."""
        started = time.perf_counter()
        env = {label: _gathered(replicas[label][0][1]) for label in statement.operands}
        if statement.program is None:
            value = _local_constant(statement, env)
            stats = (_whole_stats(statement, "local") if statement.whole is not None
                     else {"backend": "local", "tasks": 0})
        else:
            plan, cached = self.cached_plan(statement)
            value, stats = _run_here(statement, plan, [env[label] for label in
                                                       statement.operands],
                                     cached=cached, plan_seconds=0.0, workers=1)
        stats["run_seconds"] = time.perf_counter() - started
        stats["on_driver"] = True
        ran.append((statement.label, stats))
        replicas[statement.label] = [(None, value)]

    # -- running -------------------------------------------------------------------------
    def run(self, unrolled: Unrolled, arrays: dict, backend: str) -> tuple[dict, list]:
        """Run ``unrolled`` on ``arrays`` (inputs by label) with ``backend`` (``"local"`` or
        ``"ray"``): ``({label: value} for every output label, [(label, stats)])``."""
        self.node_calls = None
        if backend == "ray":
            return self._run_on_ray(arrays, unrolled)
        return self._run_locally(arrays, unrolled)

    def _run_locally(self, arrays: dict, unrolled: Unrolled) -> tuple[dict, list]:
        nodes = self.options.nodes or 1
        layouts = self.plan_layouts(unrolled, nodes) if nodes > 1 else None
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
                plan, cached = self.cached_plan(statement)
            seconds = time.perf_counter() - started
            planned[statement.label] = (plan, cached,
                                        seconds if cached else plan.stats["plan_seconds"])
        total = sum(p.stats["tasks"] for p, _, _ in planned.values())
        with Progress(total + len(unrolled.statements) - len(planned)) as progress:
            for statement in unrolled.statements:
                if statement.program is None:
                    env[statement.label] = _local_constant(statement, env)
                    if statement.whole is not None:
                        ran.append((statement.label, _whole_stats(statement, "local")))
                    progress.advance(1)
                    continue
                plan, cached, seconds = planned[statement.label]
                env[statement.label], stats = _run_here(
                    statement, plan, [env[label] for label in statement.operands],
                    cached=cached, plan_seconds=seconds, workers=self.options.workers)
                ran.append((statement.label, stats))
                progress.advance(plan.stats["tasks"])
        return {label: env[label] for label in _output_labels(unrolled)}, ran

    def _run_on_ray(self, arrays: dict, unrolled: Unrolled,
                    pipelined: bool = True) -> tuple[dict, list]:
        cluster = ray_cluster()
        cluster.refresh()
        scheduler = session.current().scheduler
        nodes = self.options.nodes or cluster.nodes
        given = [label for label, value in arrays.items() if isinstance(value, BlockArray)]
        initial = execution.layouts_of([arrays[label] for label in given])
        ran: list[tuple[str, dict]] = []
        on_driver = _driver_statements(unrolled, arrays)
        layouts = self.plan_layouts(
            unrolled, nodes, {given[k]: source for k, source in initial.items()}, on_driver)
        replicas: dict[str, list[tuple[object, object]]] = {
            label: [(None, value)] for label, value in arrays.items()}
        total = sum(p.stats["tasks"] for p in layouts.plans.values())
        pending = [] if pipelined and not session.current().measure else None
        batch = CallBatch(cluster) if pending is not None else None
        with Progress(total + len(unrolled.statements) - len(layouts.plans), nodes) as bar:
            try:
                self._ray_statements(unrolled, layouts, replicas, scheduler, cluster, ran,
                                     bar, pending, batch, on_driver)
                complete = not pending or execution.finished(pending)
            except Exception as err:  # a statement on the driver failed, or read a block
                if batch is not None and len(batch):  # a dead node held: the calls not
                    _discard(batch, arrays)  # submitted are forgotten
                if pending is None or not execution.lost_worker(err):
                    raise
                complete = False
            if not complete:  # a node died: run the program again, each statement waited for
                return self._run_on_ray(arrays, unrolled, pipelined=False)
        submitted = batch.submitted_calls if batch is not None else 0
        self.node_calls = submitted or None
        return {label: replicas[label][0][1] for label in _output_labels(unrolled)}, ran

    def _ray_statements(self, unrolled, layouts, replicas, scheduler, cluster, ran, bar,
                        pending, batch, on_driver) -> None:
        last_read = _last_reads(unrolled)
        deferred: list[Statement] = []  # small statements, run on the driver when needed
        batched: list[str] = []  # labels made by the calls in the batch
        superseded: list = []  # results of the batch replaced by their conversion

        def submit(now: int) -> None:  # the batched calls, merged, before statement
            if batch is None or not len(batch):  # ``now``; intermediates no later statement
                return  # reads are dropped (never returned)
            waiting = {label for d in deferred for label in d.operands}
            drop = [value.blocks for label in batched
                    if last_read[label] < now and label not in waiting
                    for _, value in replicas[label] if isinstance(value, BlockArray)]
            pending.extend(batch.flush(drop + superseded))
            batched.clear()
            superseded.clear()

        def flush(now: int, needed=None) -> None:  # the deferred statements ``needed``
            chosen = list(deferred)  # reads (all by default) run on the driver, in order
            if needed is not None:
                wanted, chosen = set(needed), []
                for waiting in reversed(deferred):
                    if waiting.label in wanted:
                        chosen.insert(0, waiting)
                        wanted.update(waiting.operands)
            if any(label in batched for waiting in chosen for label in waiting.operands):
                submit(now)
            for waiting in chosen:
                deferred.remove(waiting)
                self._on_driver(waiting, replicas, ran)
                bar.advance(1)

        for now, statement in enumerate(unrolled.statements):
            if statement.label in on_driver:
                deferred.append(statement)  # after the statements on the nodes that do
                continue  # not need it are submitted: the driver waits for its operands
            if any(d.label in statement.operands for d in deferred):
                flush(now, statement.operands)
            if statement.whole is not None:
                operands = [replicas[label][0][1] for label in statement.operands]
                started = time.perf_counter()
                shape, dtype = statement.shape, np.dtype(statement.dtype)
                found = execution.run_blockwise(statement.whole, operands, shape, dtype,
                                                batch=batch, pending=pending)
                if found is None:  # one task reading real refs: the batch goes first
                    submit(now)
                    found = execution.run_whole(statement.whole, operands, shape, dtype)
                elif batch is not None:
                    batched.append(statement.label)
                result, how = found
                ran.append((statement.label, {**_whole_stats(
                    statement, "ray", time.perf_counter() - started), **how}))
                replicas[statement.label] = [(None, result)]
                bar.advance(1)
                continue
            if statement.program is None:
                replicas[statement.label] = [(None, full(statement.shape, statement.fill,
                                                         dtype=statement.dtype))]
                bar.advance(1)
                continue
            plan = layouts.plans[statement.label]
            placed = (plan.problem.placed or {}) if plan.problem is not None else {}
            operands = [_replica(replicas[label], placed.get(position))
                        for position, label in enumerate(statement.operands)]
            used: dict[int, object] = {}
            result, stats = execution.run_on_ray(plan, operands, scheduler, inputs_used=used,
                                                 pending=pending, batch=batch)
            if batch is not None:
                batched.append(statement.label)
            ran.append((statement.label, stats))
            for position, label in enumerate(statement.operands):
                if position in used:  # distributed here (numpy) or re-laid out (a replica)
                    read = layouts.reads[statement.label][position]
                    kept = [(s, v) for s, v in replicas[label] if isinstance(v, BlockArray)]
                    replicas[label] = [*kept, (read, used[position])]
            if result.dtype != np.dtype(statement.dtype):  # converted on the nodes
                superseded.append(result.blocks)
                result = BlockArray(execution.cast(result.blocks, np.dtype(statement.dtype),
                                                   batch=batch, pending=pending),
                                    result.node_grid)
            replicas[statement.label] = [(None, result)]
            bar.advance(plan.stats["tasks"], _tasks_per_node(stats, cluster.nodes))
        submit(len(unrolled.statements))
        flush(len(unrolled.statements))


def _run_here(statement: Statement, plan: Plan, operands: list, *, cached: bool,
              plan_seconds: float, workers) -> tuple[np.ndarray, dict]:
    """One IR statement on the local executor: its value in the statement's dtype, and
    its statistics."""
    out = np.empty(statement.shape, dtype=plan.graph.dtype)
    run = execution.run_local(plan, operands, out, workers=workers)
    stats = execution.local_stats(plan, run, cached=cached, plan_seconds=plan_seconds)
    return (out if out.dtype == statement.dtype else out.astype(statement.dtype)), stats


def _discard(batch: CallBatch, arrays: dict) -> None:
    """Forget a batch that will not be submitted, and the re-laid-out copies of the
    program's inputs its calls were to make."""
    batch.discard()
    for value in arrays.values():
        if isinstance(value, BlockArray):
            value.forget_unsubmitted()


def _driver_statements(unrolled: Unrolled, arrays: dict) -> frozenset[str]:
    """The statements of a Ray program small enough to run on the driver: their result and
    every operand at most :data:`DRIVER_BYTES`."""
    nbytes = {label: _nbytes(value) for label, value in arrays.items()}
    for statement in unrolled.statements:
        nbytes[statement.label] = math.prod(statement.shape) * np.dtype(statement.dtype).itemsize
    return frozenset(
        statement.label for statement in unrolled.statements
        if all(nbytes[label] <= DRIVER_BYTES for label in (statement.label, *statement.operands)))


def _last_reads(unrolled: Unrolled) -> dict[str, float]:
    """The position of the last statement reading each label (infinity for an output)."""
    last: dict[str, float] = {}
    for position, statement in enumerate(unrolled.statements):
        last.setdefault(statement.label, -1)
        for label in statement.operands:
            last[label] = position
    for label in _output_labels(unrolled):
        last[label] = math.inf
    return last


def _nbytes(value) -> int:
    return value.nbytes if isinstance(value, BlockArray) else np.asarray(value).nbytes


def _tasks_per_node(stats: dict, nodes: int) -> list[int] | None:
    placed = stats.get("node_of")
    if not placed:
        return None
    counts = [0] * nodes
    for node in placed:
        if node is not None and 0 <= node < nodes:
            counts[node] += 1
    return counts


def _gathered(value) -> np.ndarray:
    return value.numpy() if isinstance(value, BlockArray) else np.asarray(value)


def _output_labels(unrolled: Unrolled) -> list[str]:
    return list(dict.fromkeys(label for _, label in unrolled.outputs))


def _local_constant(statement: Statement, env: dict) -> np.ndarray:
    """A fill, or a whole-array statement, computed in this process."""
    if statement.whole is None:
        return np.full(statement.shape, statement.fill, statement.dtype)
    values = [np.asarray(env[label]) for label in statement.operands]
    return np.asarray(apply_whole(statement.whole, *values), dtype=statement.dtype)


def _whole_stats(statement: Statement, backend: str, seconds: float = 0.0) -> dict:
    return {"backend": backend, "whole_array": statement.whole[0], "tasks": 1,
            "run_seconds": seconds}


def _replica(options: list, wanted) -> object:
    """The copy of a tensor laid out as ``wanted`` (a ``Blocks`` layout), else its first copy."""
    if wanted is not None:
        for source, value in options:
            if source is not None and source.key() == wanted.key():
                return value
    return options[0][1]
