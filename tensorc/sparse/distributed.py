"""A sparse einsum run on the nodes of an executor out of this process (a Ray session):
the plan's graph split by output blocks, one call per node, the result gathered here.

Contract: :func:`run_on_nodes` takes the executor, the :class:`~tensorc.sparse.plan.SparsePlan`
and the operands its loads read, and the driver's target (a
:class:`~tensorc.sparse.results.SparseResultSink` or a dense ndarray); it returns the run's
statistics after writing every result block into the target. Steps:

1. :func:`~tensorc.sparse.partition.partition` spreads the output blocks' cones over as
   many of the executor's nodes as the model finds worth it (:func:`nodes_worth_using`: a
   dense operand is sent to each, the work divides among them), balanced by non-zeros and
   flops, and cuts each node's compact operand pieces;
2. ``executor.run_node_calls`` runs one :class:`~tensorc.sparse.node_run.NodeRuns` per node
   (the same kernels as a local run), each node's pieces and the shared dense operands its
   arguments (a dense operand is put once); :func:`run_together` runs several plans that
   do not read each other's results this way, each node's parts of all of them one call;
3. each node's result blocks come back packed (:mod:`tensorc.sparse.compact`) and are
   written into the target: a sparse block into the sink, a dense one into its slice.

A node that dies under the calls (:class:`~tensorc.errors.NodeLostError`) makes the run
start again at step 1 over the nodes left, at most :data:`MAX_RERUNS` times (``reruns`` in
the statistics): nothing was written into the target yet, and every operand is still on
the driver (a kept piece is stored again for the new membership).

Statistics: the plan's, with ``backend`` (the executor's), ``remote_calls`` (one per node
with work), ``nodes_used``, ``tasks_per_node``, ``nonzeros_per_node`` (operand non-zeros
each node read), ``node_recv_bytes`` (bytes of the arguments each node was sent: its pieces
and every dense operand it reads), ``node_send_bytes`` (bytes of the packed blocks it
returned), ``shipped_bytes`` (both, summed), ``duplicated_tasks``, ``ran_on``,
``node_peak_rss_bytes``, ``reruns``, ``partition_seconds``, ``run_seconds``, and
``kept_bytes_reused`` (bytes of a ``SparseTensor``'s pieces an earlier call stored and this
one read again: not in ``node_recv_bytes``).
"""

from __future__ import annotations

import time

import numpy as np

from tensorc.errors import NodeLostError
from tensorc.planning.cost import machine
from tensorc.runtime.kept import Kept
from tensorc.sparse.compact import packed_bytes, unpack
from tensorc.sparse.node_run import NodeRun, NodeRuns
from tensorc.sparse.partition import duplicated_tasks, partition

MAX_RERUNS = 2
"""Times a call is run again after a node died under it (each time over the nodes left)."""


def nodes_worth_using(graph, inputs: list, nodes: int) -> int:
    """How many of ``nodes`` a call spreads its output blocks over: the count (1, 2, 4, ...
    up to ``nodes``) whose modelled time is least. Every node used is sent each dense
    operand whole, one copy after another out of the driver's store (bytes at the
    calibrated network rate), and the work (its tasks' entries at the calibrated sparse
    rate of the node's cores) divides among them.
    With no dense operand to send, every node."""
    figures = machine()
    dense = sum(op.nbytes for op in inputs if isinstance(op, np.ndarray))
    rate = figures.sparse_flops_per_core * figures.cores_per_node
    work = sum(task.flops for task in graph.tasks) / rate
    copy = dense / figures.network_bytes_per_second
    counts = sorted({min(nodes, 2 ** k) for k in range(max(1, nodes).bit_length() + 1)})
    return min(counts, key=lambda n: (n * copy + work / n, -n))


def _nbytes(value) -> int:
    if isinstance(value, Kept):
        return value.nbytes
    return 0 if value is None else int(getattr(value, "nbytes", 0) or 0)


def run_on_nodes(executor, plan, inputs: list, target, kept: dict | None = None) -> dict:
    """Run ``plan`` over ``inputs`` on ``executor``'s nodes into ``target``; see the module
    docstring. ``kept``: the operands given as ``SparseTensor``, by position (their pieces
    are :class:`~tensorc.runtime.kept.Kept`: stored once, reused by later calls)."""
    return run_together(executor, [(plan, inputs, target, kept)])[0]


def run_together(executor, runs: list[tuple]) -> list[dict]:
    """Run several ``(plan, inputs, target, kept)``, none reading another's target, as one
    call per node: each plan partitioned on its own (its node count its own), a node's
    parts of every plan one :class:`~tensorc.sparse.node_run.NodeRuns`. Each run's
    statistics, in order (``merged_runs``: how many ran together; ``remote_calls``: the
    calls that carried a part of it; ``node_calls``, ``partition_seconds`` and
    ``run_seconds``: the whole group's, on its first run, 0 on the others; an operand two
    runs read is counted in the first one's ``node_recv_bytes``, as it is sent once)."""
    started = time.perf_counter()
    reruns = 0
    while True:
        nodes = executor.nodes
        parted = [partition(plan.graph, inputs, nodes_worth_using(plan.graph, inputs, nodes),
                            kept) if plan.graph.outputs else []
                  for plan, inputs, _, kept in runs]
        by_node: dict[int, list[tuple[int, object]]] = {}
        first = 0  # each run's nodes start where the last run's ended: no pile on node 0
        for k, parts in enumerate(parted):
            for part in parts:
                part.node = (part.node + first) % nodes
                by_node.setdefault(part.node, []).append((k, part))
            first += len(parts)
        calls = [(node, NodeRuns(tuple(NodeRun(part.graph) for _, part in items),
                                 tuple(len(part.operands) for _, part in items)),
                  [op for _, part in items for op in part.operands])
                 for node, items in sorted(by_node.items())]
        partitioned = time.perf_counter()
        try:
            values, ran = executor.run_node_calls(calls) if calls else ([], {})
            break
        except NodeLostError:
            if reruns >= MAX_RERUNS or nodes <= 1:
                raise
            reruns += 1  # nothing was written yet: split the work again over the nodes left
    stored_now = ran.get("kept_stored", set())
    ran_on = ran.get("ran_on", [])
    figures = [{"recv": [0] * nodes, "send": [0] * nodes, "tasks": [0] * nodes,
                "nonzeros": [0] * nodes, "reused": 0, "ran_on": []} for _ in runs]
    for c, ((node, items), results) in enumerate(zip(sorted(by_node.items()), values,
                                                     strict=True)):
        sent = set()  # an operand two runs read is sent once: counted for the first
        for (k, part), (starts, packed) in zip(items, results, strict=True):
            each = figures[k]
            if c < len(ran_on):
                each["ran_on"].append(ran_on[c])
            for op in part.operands:  # a kept piece stored by an earlier call is not sent again
                if isinstance(op, Kept) and id(op) not in stored_now:
                    each["reused"] += op.nbytes
                elif id(op) not in sent:
                    each["recv"][node] += _nbytes(op)
                sent.add(id(op))
            each["send"][node] = sum(packed_bytes(p) for p in packed) + int(starts.nbytes)
            each["tasks"][node] = part.tasks
            each["nonzeros"][node] = part.nonzeros
            for start, block in zip(starts.tolist(), packed, strict=True):
                _write(runs[k][2], start, unpack(block))
    finished = time.perf_counter()
    return [{
        **plan.stats,
        "backend": executor.backend,
        "scheduler": "nonzeros (output blocks by cone, largest first)",
        "remote_calls": len(parts),
        "merged_runs": len(runs),
        "node_calls": ran.get("calls", 0) if k == 0 else 0,
        "nodes_used": len(parts),
        "tasks_per_node": each["tasks"],
        "nonzeros_per_node": each["nonzeros"],
        "node_recv_bytes": each["recv"],
        "node_send_bytes": each["send"],
        "shipped_bytes": sum(each["recv"]) + sum(each["send"]),
        "kept_bytes_reused": each["reused"],
        "duplicated_tasks": duplicated_tasks(parts, plan.graph) if parts else 0,
        "ran_on": each["ran_on"],
        "node_peak_rss_bytes": ran.get("node_peak_rss_bytes", [None] * nodes),
        "reruns": reruns,
        "partition_seconds": partitioned - started if k == 0 else 0.0,
        "run_seconds": finished - partitioned if k == 0 else 0.0,
        "plan_cached": plan.stats.get("plan_cached", False),
        "measured_inter_node_bytes": None,
    } for k, ((plan, _, _, _), parts, each) in enumerate(zip(runs, parted, figures,
                                                              strict=True))]


def _write(target, start: list[int], block) -> None:
    shape = tuple(int(d) for d in np.shape(block)) if isinstance(block, np.ndarray) else (
        tuple(block.shape))
    slices = tuple(slice(a, a + n) for a, n in zip(start, shape, strict=True))
    if isinstance(target, np.ndarray):
        target[slices] = block
    else:
        target.write(slices, block)
