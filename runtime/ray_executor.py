"""The Ray executor: one remote call per task, placed where the schedule says.

Contract: ``RayExecutor(cluster).run(graph, schedule, inputs)`` takes a task graph, its
:class:`~tensorc.runtime.schedule.Schedule` and one :class:`~tensorc.runtime.blocks.Blocks`
per operand, submits the whole graph without waiting between levels, waits for it, and
returns the result as ``Blocks`` (the blocks stay on the nodes that computed them).
Statistics are in ``executor.last_run``.

Policy:

- a load whose block is exactly one stored block, unchanged (no diagonal, no cast), is that
  block's ObjectRef — no task; any other load is a task on the node holding its first piece
  that stitches the pieces and applies the load kernel;
- a compute task whose only consumer is on the same node (and folds no local groups) runs
  inside that consumer's call: no bytes change, Ray's per-call overhead is saved;
- every other task is ``run(kernel, *input_refs)`` with
  ``NodeAffinitySchedulingStrategy(node, soft=True)`` when the schedule is pinned (no
  strategy for ``ray_default``); inputs are ObjectRefs, so Ray moves blocks between nodes and
  frees them; the executor keeps no block in the driver;
- a reduce task with local groups first folds each group on its node, then folds the group
  results (and any lone inputs) on the task's node;
- the executor waits in short polls, re-reading the live nodes; a Ray failure, or no progress
  for ``TENSORC_RAY_TIMEOUT`` seconds (default 600), raises
  :class:`~tensorc.errors.ExecutionError` naming the task and any node that died. Soft
  affinity lets Ray run a task elsewhere when its node is gone, and lineage reconstruction
  (task retries are on) recomputes blocks lost with a node;
- measured transfers: after the run, ``ray.experimental.get_object_locations`` tells where
  every block of the call now has a copy; a copy on a node other than the one that produced
  the block (the node its worker reported) was moved there by Ray. Copies of input blocks
  that existed before the call are not counted. Objects below Ray's inline threshold
  (100 KiB) travel inside task messages, have no store location and are not measured.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from tensorc.codegen.taskgraph import LOAD, REDUCE, TaskGraph
from tensorc.errors import ExecutionError
from tensorc.runtime import ray_tasks
from tensorc.runtime.blocks import Blocks
from tensorc.runtime.ray_cluster import RayCluster

POLL_SECONDS = 1.0




def _fusable(graph: TaskGraph, node_of: Sequence[int], groups) -> dict[int, int]:
    """Tasks that run inside their consumer's remote call: a compute task whose only consumer
    is a compute task on the same node, which is not an output block and whose consumer does
    not fold locally first (``groups``). Nothing crosses a node there, so the schedule's
    bytes are unchanged; what is saved is Ray's per-call overhead (about a millisecond)."""
    consumers = graph.consumers()
    outputs = {task for task, _ in graph.outputs}
    fused: dict[int, int] = {}
    for index, task in enumerate(graph.tasks):
        if task.kind == LOAD or index in outputs or index in groups:
            continue
        if len(consumers[index]) != 1:
            continue
        consumer = consumers[index][0]
        if consumer not in groups and node_of[consumer] == node_of[index]:
            fused[index] = consumer
    return fused


def _fused_program(graph: TaskGraph, root: int, refs: list, fused_into: dict[int, int]):
    """The steps of ``root``'s call (its fused producers first), the block arguments, and
    the fused tasks it covers."""
    steps: list = []
    args: list = []
    members: list[int] = []

    def visit(task: int, parent: int) -> tuple[str, int]:
        if fused_into.get(task) == parent:
            inputs = tuple(visit(source, task) for source in graph.tasks[task].inputs)
            steps.append((graph.kernels[graph.tasks[task].kernel], inputs))
            members.append(task)
            return ("t", len(steps) - 1)
        args.append(refs[task])
        return ("x", len(args) - 1)

    inputs = tuple(visit(source, root) for source in graph.tasks[root].inputs)
    steps.append((graph.kernels[graph.tasks[root].kernel], inputs))
    return tuple(steps), args, members


def _settled_locations(refs: list, settle_seconds: float = 1.0) -> dict:
    """Object locations once they stop changing: raylets report new copies to the owner
    asynchronously, so a look right after the run can miss the last few."""
    from ray.experimental import get_object_locations

    def copies(found: dict) -> int:
        return sum(len(info.get("node_ids") or ()) for info in found.values())

    locations = get_object_locations(refs)
    deadline = time.monotonic() + settle_seconds
    while time.monotonic() < deadline:
        time.sleep(0.01)
        again = get_object_locations(refs)
        if copies(again) == copies(locations):
            return again
        locations = again
    return locations


def object_copies(cluster: RayCluster, refs: Sequence) -> dict:
    """The hex ids of the nodes holding a copy of each of ``refs`` now (empty on one node)."""
    from ray.experimental import get_object_locations

    if not refs or cluster.nodes == 1:
        return {}
    locations = get_object_locations(list(refs))
    return {ref: set(info.get("node_ids") or ()) for ref, info in locations.items()}


def measure_copies(cluster: RayCluster, refs: Sequence, producer_of: dict,
                   existing: dict) -> tuple[int, list[int]]:
    """Bytes Ray copied between nodes for ``refs``, in all and per receiving node: every
    copy on a node other than the block's producer (``producer_of[ref]``, a hex node id or
    the ref of one) that ``existing`` (:func:`object_copies` before) did not list."""
    import ray

    unique = list(dict.fromkeys(refs))
    locations = _settled_locations(unique)
    pending = {r: p for r, p in producer_of.items() if isinstance(p, ray.ObjectRef)}
    resolved = dict(zip(pending, ray.get(list(pending.values())), strict=True))
    per_node = [0] * cluster.nodes
    total = 0
    for ref in unique:
        info = locations.get(ref) or {}
        holders = set(info.get("node_ids") or ())
        producer = resolved.get(ref, producer_of.get(ref))
        copies = holders - {producer} - existing.get(ref, set())
        size = int(info.get("object_size") or 0)
        for node in copies:
            index = cluster.index_of(node)
            if index is not None:
                per_node[index] += size
            total += size
    return total, per_node


def submit(cluster: RayCluster, name: str, node: int | None, *args):
    """Call remote function ``name`` on node index ``node`` (soft affinity; ``None``: Ray
    decides); returns its two refs, the block and the reporting node id."""
    if node is None:
        strategy = "DEFAULT"
    else:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        strategy = NodeAffinitySchedulingStrategy(cluster.node_ids[node], soft=True)
    return ray_tasks.remote(name).options(scheduling_strategy=strategy).remote(*args)


class RayExecutor:
    """Submit a scheduled task graph to Ray; see the module docstring."""

    def __init__(self, cluster: RayCluster) -> None:
        self.cluster = cluster
        self.last_run: dict = {}
        self._existing: dict | None = None  # input copies seen by locate_loads

    def locate_loads(
        self, graph: TaskGraph, inputs: Sequence[Blocks]
    ) -> tuple[dict[int, int], dict[int, list[int]]]:
        """For every load task, the node index holding (the first piece of) its data, and
        the other nodes that already hold a cached copy of it (read from Ray)."""
        for blocks in inputs:
            blocks.resolve(self.cluster.index_of)
        self._existing = self._input_copies(inputs)
        placed: dict[int, int] = {}
        cached: dict[int, list[int]] = {}
        for index, task in enumerate(graph.tasks):
            if task.kind != LOAD:
                continue
            operand, slices = task.source
            blocks = inputs[operand]
            coords = blocks.pieces(slices)[0][0]
            placed[index] = blocks.nodes.get(coords, 0)
            copies = self._existing.get(blocks.refs[coords], set())
            others = sorted(i for i in map(self.cluster.index_of, copies)
                            if i is not None and i != placed[index])
            if others:
                cached[index] = others
        return placed, cached

    def run(
        self, graph: TaskGraph, schedule, inputs: Sequence[Blocks]
    ) -> Blocks:
        import ray

        started = time.perf_counter()
        dead_before = set(self.cluster.dead_nodes)
        existing = self._existing if self._existing is not None else self._input_copies(inputs)
        self._existing = None
        refs: list = [None] * len(graph.tasks)
        reported: dict[int, object] = {}
        producer_of: dict[object, object] = {}  # block ref -> node-id ref or hex id
        extra: list = []  # group-fold refs, measured too
        pinned = schedule.pinned
        groups = schedule.reduce_groups

        def node_for(index: int) -> int | None:
            return schedule.node_of[index] if pinned else None

        fused_into = _fusable(graph, schedule.node_of, groups) if pinned else {}
        for index, task in enumerate(graph.tasks):
            kernel = graph.kernels[task.kernel]
            if index in fused_into:
                continue  # runs inside its consumer's call
            if task.kind == LOAD:
                block, where, stitched = self._load(task, kernel, inputs, node_for(index))
                refs[index], producer_of[block] = block, where
                if stitched:
                    reported[index] = where
                continue
            sources = [refs[s] for s in task.inputs]
            if task.kind == REDUCE and index in groups:
                folded, lone = [], set(task.inputs)
                for node, members in groups[index]:
                    block, where = submit(self.cluster, "run", node if pinned else None,
                                          kernel, *[refs[m] for m in members])
                    folded.append(block)
                    producer_of[block] = where
                    extra.append(block)
                    lone -= set(members)
                sources = folded + [refs[s] for s in task.inputs if s in lone]
                if len(sources) == 1:  # one group held every partial
                    refs[index] = sources[0]
                    reported[index] = producer_of[sources[0]]
                    continue
            steps, args, members = _fused_program(graph, index, refs, fused_into)
            if len(steps) > 1:
                block, where = submit(self.cluster, "fused", node_for(index), steps, *args)
                for member in members:
                    reported[member] = where
            else:
                block, where = submit(self.cluster, "run", node_for(index), kernel, *sources)
            refs[index] = block
            reported[index] = where
            producer_of[block] = where
        submitted = time.perf_counter()
        calls = len(set(reported.values())) + len(extra)
        task_of = {ref: i for i, ref in reported.items()}
        self._wait(graph, task_of, list(dict.fromkeys(reported.values())), dead_before)
        finished = time.perf_counter()
        ran_on = dict(zip(reported, ray.get(list(reported.values())), strict=True))
        if self.cluster.nodes > 1:
            measured, per_node = self._measure(refs, extra, producer_of, existing)
        else:  # one node: nothing can move between nodes, nothing to look up
            measured, per_node = 0, [0]
        self.last_run = {
            "run_seconds": finished - started,
            "submit_seconds": submitted - started,
            "ran_on": {i: self.cluster.index_of(n) for i, n in ran_on.items()},
            "measured_inter_node_bytes": measured,
            "measured_node_recv_bytes": per_node,
            "remote_calls": calls,
        }
        return self._result(graph, refs, reported, schedule.node_of)

    def _load(self, task, kernel, inputs, node: int | None):
        """A load's block ref, its producer and whether a task makes it: the stored block
        itself and the node id it was made on, or a stitching task and the ref of the node id
        that task reports."""
        operand, slices = task.source
        blocks = inputs[operand]
        pieces = blocks.pieces(slices)
        first = pieces[0][0]
        if (
            len(pieces) == 1
            and blocks.block_slices(first) == tuple(slices)
            and kernel.identity(blocks.dtype)
        ):
            return blocks.refs[first], self._node_id(blocks.nodes.get(first)), False
        shape = tuple(s.stop - s.start for s in slices)
        layout = tuple((dst, src) for _, dst, src in pieces)
        full = tuple(slice(0, n) for n in shape)
        block, where = submit(self.cluster, "load", node, kernel, full, shape, layout,
                              *[blocks.refs[c] for c, _, _ in pieces])
        return block, where, True

    def _node_id(self, index: int | None) -> str | None:
        """The hex id of node ``index`` (``None`` when no such node is live)."""
        ids = self.cluster.node_ids
        return ids[index] if index is not None and 0 <= index < len(ids) else None

    def _wait(self, graph, task_of, pending, dead_before) -> None:
        import ray

        limit = float(os.environ.get("TENSORC_RAY_TIMEOUT", "600"))
        waiting = list(pending)
        last_progress = time.monotonic()
        while waiting:
            ready, waiting = ray.wait(
                waiting, num_returns=len(waiting), timeout=POLL_SECONDS, fetch_local=False
            )
            if ready:
                last_progress = time.monotonic()
                try:
                    ray.get(ready)
                except ray.exceptions.RayError as err:
                    raise self._failure(graph, task_of, ready, err, dead_before) from err
            self.cluster.refresh()
            if waiting and time.monotonic() - last_progress > limit:
                died = self._died(dead_before)
                raise ExecutionError(
                    f"Ray made no progress for {limit:.0f} s with {len(waiting)} task(s) "
                    f"outstanding{died}; set TENSORC_RAY_TIMEOUT to wait longer"
                )

    def _died(self, dead_before) -> str:
        dead = [n for n in self.cluster.dead_nodes if n not in dead_before]
        return f"; node(s) died during the run: {', '.join(dead)}" if dead else ""

    def _failure(self, graph, task_of, ready, err, dead_before) -> ExecutionError:
        import ray

        where = "a task"
        for ref in ready:
            try:
                ray.get(ref, timeout=0)
            except ray.exceptions.RayError:
                if ref in task_of:
                    task = graph.tasks[task_of[ref]]
                    where = f"task {task.key} ({task.kind})"
                break
        self.cluster.refresh()
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return ExecutionError(
            f"Ray failed running {where}: {type(err).__name__}: {first_line}"
            f"{self._died(dead_before)}"
        )

    def _input_copies(self, inputs) -> dict:
        refs = [ref for blocks in inputs for ref in blocks.refs.values()]
        return object_copies(self.cluster, refs)

    def _measure(self, refs, extra, producer_of, existing) -> tuple[int, list[int]]:
        unique = [r for r in list(refs) + extra if r is not None]
        return measure_copies(self.cluster, unique, producer_of, existing)

    def _result(self, graph: TaskGraph, refs, reported, node_of) -> Blocks:
        starts = [sorted({slices[d].start for _, slices in graph.outputs})
                  for d in range(len(graph.output_shape))]
        bounds = tuple(
            tuple(starts[d]) + (graph.output_shape[d],) for d in range(len(graph.output_shape))
        )
        blocks = Blocks(graph.output_shape, graph.dtype, bounds)
        for task, slices in graph.outputs:
            coords = tuple(starts[d].index(s.start) for d, s in enumerate(slices))
            blocks.refs[coords] = refs[task]
            blocks.nodes[coords] = node_of[task]
            if task in reported:
                blocks.reported[coords] = reported[task]
        return blocks
