"""Running a statement program on Ray: pipelined, its statements' calls merged.

Contract: ``RayStatementRun(planner, cluster, scheduler).run(arrays, unrolled)`` runs an
:class:`~tensorc.frontend.tc_lower.Unrolled` program's statements in SSA order on the
cluster, each result feeding later ones, and returns ``({output label: value}, [(label,
statistics)])``; ``node_calls`` then says how many merged calls it submitted (``None`` when
each statement submitted its own). Every intermediate stays on the cluster, each statement
reads its operands in the layout (or replica) its plan chose, and a numpy input is
distributed once, by the first statement that reads it. The statements are submitted
without waiting for each other (Ray orders them by their data), their calls merged per node
and level (:mod:`tensorc.runtime.ray.call_batch`), and the program is waited for once at
its end. An input read from storage (a :class:`~tensorc.stored.StoredArray`) is never
materialised: the statements reading it are planned with its chunks, and their calls read
its blocks on the nodes that use them (:mod:`tensorc.runtime.ray.stages`). The peak RSS each
node's worker measured during the program's calls is in every statement's statistics
(``node_peak_rss_bytes``, ``peak_rss_bytes``: the calls of the statements are merged, so the
figure is the program's). A statement whose result and operands are all at most
:data:`DRIVER_BYTES` runs on the driver instead (a round of calls to the nodes would cost
more than its work; reading its operands costs less), its result a numpy array the next
statement on the nodes distributes. Those run as late as they can: after every later
statement on the nodes that does not read them is submitted, so the driver waits for their
operands while the nodes work on the rest. A fill is made on its nodes; a whole-array
statement runs block by block where it can, else as one task on the node holding most of
its operands. If a node worker dies, the program runs again with every statement waited
for (no batch). An output given a sink (``sinks=``, ``tc.to_zarr`` of a lazy array) that no
later statement reads is written by the nodes as they compute its blocks
(:mod:`tensorc.runtime.ray.streamed_results`); its value is then ``None``.
"""

from __future__ import annotations

import math
import time

import numpy as np

from tensorc.frontend.tc_lower import Statement, Unrolled
from tensorc.placement.recipes import Recipe
from tensorc.progress import Progress
from tensorc.runtime.ray import plans, whole_array
from tensorc.runtime.ray.arrays import DistributedArray, full
from tensorc.runtime.ray.call_batch import CallBatch
from tensorc.runtime.ray.stages import output_bounds
from tensorc.runtime.ray.streamed_results import (
    settle,
    sink_chunks,
    written_per_node,
)
from tensorc.runtime.statements import (
    local_constant,
    output_labels,
    run_here,
    whole_stats,
)
from tensorc.stored import StoredArray

DRIVER_BYTES = 64 * 1024  # statements of a Ray program this small run on the driver

REPLANS = 3
"""Times a program re-run after a node died is planned again when more nodes die."""


class RayStatementRun:
    """One statement program's run on Ray; see the module docstring."""

    def __init__(self, planner, cluster, scheduler: str) -> None:
        self.planner = planner
        self.cluster = cluster
        self.scheduler = scheduler
        self.node_calls: int | None = None
        self.writers: dict[str, object] = {}
        """Output label → node writer of its sink, for the results the nodes write."""

    def _on_driver(self, statement: Statement, replicas: dict, ran: list) -> None:
        """Run a small statement of a Ray program in this process (at most
        :data:`DRIVER_BYTES` in and out); its operands are gathered (waiting for them), its
        result stays a numpy array, which a later statement on the nodes distributes as its
        plan cuts it."""
        started = time.perf_counter()
        env = {label: _gathered(replicas[label][0][1]) for label in statement.operands}
        if statement.program is None:
            value = local_constant(statement, env)
            stats = (whole_stats(statement, "local") if statement.whole is not None
                     else {"backend": "local", "tasks": 0})
        else:
            plan, cached = self.planner.cached_plan(statement)
            value, stats = run_here(statement, plan, [env[label] for label in
                                                       statement.operands],
                                     cached=cached, plan_seconds=0.0, workers=1)
        stats["run_seconds"] = time.perf_counter() - started
        stats["on_driver"] = True
        ran.append((statement.label, stats))
        replicas[statement.label] = [(None, value)]


    def run(self, arrays: dict, unrolled: Unrolled, pipelined: bool = True,
            replans: int = REPLANS, sinks: dict | None = None) -> tuple[dict, list]:
        """Run ``unrolled`` on ``arrays``; see the module docstring. A run that is not
        pipelined and finds the cluster's nodes changed under it (another node died while
        it ran again) is planned again for the nodes left, at most ``replans`` times.
        ``sinks`` maps output labels to :class:`~tensorc.stored.BlockSink`s; the statements
        making them that no later statement reads write their blocks from the nodes (value
        ``None``, labels in :attr:`writers`); the caller writes the others."""
        sinks = sinks or {}
        cluster = self.cluster
        cluster.refresh()
        scheduler = self.scheduler
        nodes = self.planner.options.nodes or cluster.nodes
        given = [label for label, value in arrays.items() if isinstance(value, DistributedArray)]
        initial = plans.layouts_of([arrays[label] for label in given])
        ran: list[tuple[str, dict]] = []
        on_driver = _driver_statements(unrolled, arrays)
        stored = {label: value.chunks for label, value in arrays.items()
                  if isinstance(value, StoredArray)}
        streamable = _streamable(unrolled, sinks, on_driver)
        layouts = self.planner.plan_layouts(
            unrolled, nodes, {given[k]: source for k, source in initial.items()}, on_driver,
            stored, {label: sinks[label].chunks or () for label in streamable})
        for label in streamable:
            if label not in self.writers:
                bounds = output_bounds(layouts.plans[label].graph)
                chunks = sink_chunks(bounds, sinks[label].chunks)
                if chunks is not None:  # each block whole chunks: its node writes it
                    sinks[label].open(chunks)
                    self.writers[label] = sinks[label].node_writer()
        replicas: dict[str, list[tuple[object, object]]] = {
            label: [(None, value)] for label, value in arrays.items()}
        total = sum(p.stats["tasks"] for p in layouts.plans.values())
        pending = [] if pipelined and not cluster.measure else None
        batch = CallBatch(cluster) if pending is not None else None
        peaks: list = []
        with Progress(total + len(unrolled.statements) - len(layouts.plans), nodes) as bar:
            try:
                self._ray_statements(unrolled, layouts, replicas, scheduler, cluster, ran,
                                     bar, pending, batch, on_driver)
                complete = not pending or plans.finished(pending, peaks)
            except Exception as err:  # a statement on the driver failed, or read a block
                if batch is not None and len(batch):  # a dead node held: the calls not
                    _discard(batch, arrays)  # submitted are forgotten
                if pending is None and isinstance(err, plans.NodesChanged) and replans:
                    return self.run(arrays, unrolled, pipelined=False, replans=replans - 1,
                                    sinks=sinks)
                if pending is None or not plans.lost_worker(err):
                    if self.writers and pending:  # no call still writes when the caller
                        settle(pending)  # removes the store they write into
                    raise
                complete = False
            if not complete:  # a node died: run the program again, each statement waited for
                return self.run(arrays, unrolled, pipelined=False, sinks=sinks)
        submitted = batch.submitted_calls if batch is not None else 0
        self.node_calls = submitted or None
        if peaks:
            _program_peaks(ran, peaks)
        for label, stats in ran:
            if label in self.writers:
                stats["node_sink_bytes"] = written_per_node(replicas[label][0][1].blocks,
                                                            cluster)
                stats["sink_bytes"] = sum(stats["node_sink_bytes"])
        return {label: None if label in self.writers else replicas[label][0][1]
                for label in output_labels(unrolled)}, ran

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
                    for _, value in replicas[label] if isinstance(value, DistributedArray)]
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
                found = whole_array.run_blockwise(statement.whole, operands, shape, dtype,
                                                batch=batch, pending=pending)
                if found is None:  # one task reading real refs: the batch goes first
                    submit(now)
                    found = whole_array.run_whole(statement.whole, operands, shape, dtype)
                elif batch is not None:
                    batched.append(statement.label)
                result, how = found
                ran.append((statement.label, {**whole_stats(
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
            writer = self.writers.get(statement.label)
            result, stats = plans.run_on_ray(plan, operands, scheduler, inputs_used=used,
                                             pending=pending, batch=batch, sink=writer)
            if batch is not None:
                batched.append(statement.label)
            ran.append((statement.label, stats))
            for position, label in enumerate(statement.operands):
                if position in used:  # distributed here (numpy) or re-laid out (a replica)
                    read = layouts.reads[statement.label][position]
                    kept = [(s, v) for s, v in replicas[label] if isinstance(v, DistributedArray)]
                    replicas[label] = [*kept, (read, used[position])]
            if writer is None and result.dtype != np.dtype(statement.dtype):  # converted
                superseded.append(result.blocks)
                result = DistributedArray(whole_array.cast(result.blocks, np.dtype(statement.dtype),
                                                   batch=batch, pending=pending),
                                    result.node_grid)
            replicas[statement.label] = [(None, result)]
            bar.advance(plan.stats["tasks"], _tasks_per_node(stats, cluster.nodes))
        submit(len(unrolled.statements))
        flush(len(unrolled.statements))


def _streamable(unrolled: Unrolled, sinks: dict, on_driver: frozenset) -> list[str]:
    """The labels in ``sinks`` the nodes can write as they compute them: made by a statement
    planned on the nodes that no later statement reads, into a sink another process can
    write."""
    read = {label for st in unrolled.statements for label in st.operands}
    return [st.label for st in unrolled.statements
            if st.label in sinks and st.program is not None and st.whole is None
            and st.label not in read and st.label not in on_driver
            and sinks[st.label].node_writer() is not None]


def _discard(batch: CallBatch, arrays: dict) -> None:
    """Forget a batch that will not be submitted, and the re-laid-out copies of the
    program's inputs its calls were to make."""
    batch.discard()
    for value in arrays.values():
        if isinstance(value, DistributedArray):
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
    for label in output_labels(unrolled):
        last[label] = math.inf
    return last


def _nbytes(value) -> int:
    if isinstance(value, (DistributedArray, StoredArray, Recipe)):
        return value.nbytes
    return np.asarray(value).nbytes


def _program_peaks(ran: list, peaks: list) -> None:
    """The peak RSS measured on each node during a pipelined program's (merged) calls, in
    the statistics of every statement that ran on the nodes."""
    values = [p for p in peaks if p is not None]
    for _, stats in ran:
        if stats.get("backend") == "ray" and not stats.get("on_driver"):
            stats["node_peak_rss_bytes"] = list(peaks)
            stats["peak_rss_bytes"] = max(values) if values else None


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
    return value.numpy() if isinstance(value, DistributedArray) else np.asarray(value)


def _replica(options: list, wanted) -> object:
    """The copy of a tensor laid out as ``wanted`` (a ``Blocks`` layout), else its first copy."""
    if wanted is not None:
        for source, value in options:
            if source is not None and source.key() == wanted.key():
                return value
    return options[0][1]
