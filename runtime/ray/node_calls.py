"""One call per node, each running one given kernel: work the driver already split by node
(a sparse einsum's parts, :mod:`tensorc.sparse.partition`), on the node workers.

Contract: :func:`run_node_calls` takes a list of ``(node index, kernel, arguments)``: the
kernel is any picklable callable, called on its node as ``kernel(*arguments)``. Each
distinct argument object (by identity) is put in Ray once, so an argument shared by every
call (a dense operand) is stored once and fetched by each node that reads it; ``None``
travels by value. A :class:`~tensorc.runtime.kept.Kept` argument is put once per session
and its stored object reused by every later call (``kept_stored`` in the statistics: the
ids of the ``Kept`` arguments this run stored). Each call is one staged call
(:func:`~tensorc.runtime.ray.calls.submit_stage`) with a single ``RUN`` step on the node's
:class:`~tensorc.runtime.ray.tasks.NodeWorker`, its payload sent with it (a call made
once). All calls are submitted before any is waited for; the function returns ``(values,
statistics)``: each call's return value in order, and ``calls``, ``ran_on`` (the node index
each ran on, from its report) and ``node_peak_rss_bytes`` (the highest peak RSS measured
per node). A kernel's error raises :class:`~tensorc.errors.ExecutionError`; a node lost
mid-call raises :class:`~tensorc.errors.NodeLostError` once the cluster's membership shows
it (at most :data:`NOTICE_SECONDS` of waiting for Ray to declare the node dead), so the
caller can split the work again over the nodes left; a node worker that died while its
node lives raises :class:`~tensorc.errors.ExecutionError` and is started again by the next
call.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from tensorc.errors import ExecutionError, NodeLostError
from tensorc.runtime.kept import Kept
from tensorc.runtime.ray.calls import (
    SUBMITTING,
    WorkerLost,
    node_workers,
    submit_stage,
    wait_for_calls,
    worker_lost_errors,
)
from tensorc.runtime.ray.cluster import RayCluster
from tensorc.runtime.ray.stages import RUN, Step

NOTICE_SECONDS = 30.0
"""How long a lost call waits for Ray to declare its node dead (Ray's default health check
takes about 15 s); a worker that died on a node still alive after that is an
:class:`~tensorc.errors.ExecutionError`, and the node workers are started again."""


def _await_membership(cluster: RayCluster, epoch: int) -> None:
    """Return once the cluster's live nodes differ from those of ``epoch`` (or after
    :data:`NOTICE_SECONDS`)."""
    deadline = time.monotonic() + NOTICE_SECONDS
    cluster.refresh()
    while cluster.epoch == epoch and time.monotonic() < deadline:
        time.sleep(0.1)
        cluster.refresh()


def run_node_calls(cluster: RayCluster, calls: Sequence[tuple[int, object, Sequence]]
                   ) -> tuple[list, dict]:
    """Run each ``kernel(*arguments)`` on its node; see the module docstring."""
    import ray

    put: dict[int, object] = {}
    fresh_kept: set[int] = set()

    def ref_of(value):
        if value is None:
            return None
        if isinstance(value, Kept):
            found = value.stored_for(cluster, cluster.epoch)
            if found is None:
                found = value.store(cluster, cluster.epoch, ray.put(value.value))
                fresh_kept.add(id(value))
            return found
        found = put.get(id(value))
        if found is None:
            found = put[id(value)] = ray.put(value)
        return found

    workers = node_workers(cluster)
    results, reports = [], []
    with SUBMITTING:
        for node, kernel, arguments in calls:
            if not 0 <= node < cluster.nodes:
                raise ExecutionError(f"node {node} is not a live node of the cluster "
                                     f"({cluster.nodes} nodes)")
            refs = [ref_of(a) for a in arguments]
            step = (Step(RUN, kernel), tuple(("x", i) for i in range(len(refs))))
            value, report = submit_stage(cluster, workers, node, "", ((step,), (0,), None),
                                         refs, returns=2)
            results.append(value)
            reports.append(report)
    epoch = cluster.epoch
    try:
        peaks = wait_for_calls(cluster, reports)
        values = ray.get(results)
    except (WorkerLost, *worker_lost_errors()) as err:
        _await_membership(cluster, epoch)
        if cluster.epoch == epoch:  # a worker died on a node that lives: start new ones
            cluster.restart_workers()
            raise ExecutionError(f"a node worker died during one of {len(calls)} node "
                                 f"calls while its node lives ({cluster.describe()}); run "
                                 "the call again") from err
        raise NodeLostError(f"a node died during one of {len(calls)} node calls "
                            f"({cluster.describe()} now)") from err
    ran_on = cluster.locate(reports)
    return values, {"calls": len(calls), "ran_on": ran_on, "node_peak_rss_bytes": peaks,
                    "kept_stored": fresh_kept}
