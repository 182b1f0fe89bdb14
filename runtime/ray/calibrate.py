"""The calibration probe: the distributed cost model's constants, measured on the cluster.

Contract: :func:`calibrate_cluster(cluster) <calibrate_cluster>` returns the figures of a
:class:`~tensorc.planning.cost.Machine` (a dict of its fields) measured in well under a
second on the running cluster, through the node workers the executor uses (``tc.init``
installs them for planning on that session; ``tc.plan`` without a cluster keeps the
defaults):

- *per block task*: the seconds a node worker spends per block step (a chain of trivial
  steps, divided), plus the round trip of one call spread over the steps of a typical call;
- *network*: bytes per second into another node — a block put on the driver's node and
  read by the worker of another node, less one call's round trip (on a single node, the
  object store's copy rate);
- *compute*: one core's BLAS rate (a 256 x 256 matrix product with one BLAS thread), and
  the flops a second of the compiled sparse loop on one core (counted as sparse plans
  count them) (a 4,096² CSR with 40
  entries a row times a 4,096 × 64 matrix, the loop's compilation untimed; the best of five
  tries, since the nodes' workers may still be starting);
- *cores per node*: the CPUs Ray reports for the nodes (the smallest);
- *hosts*: which nodes run on one machine (its host name and boot id), and the cores that
  machine's processes may run on: several Ray nodes started on one machine share its cores,
  and the block placer knows that spreading over them adds no compute;
- *per call between nodes*: what a block made by one call pays, beyond its bytes, to reach a
  call on another node that waits for it: a chain of calls alternating between two nodes, each
  returning a fresh copy of the :data:`HOP_BYTES` block it was sent, timed per call, less the
  block's bytes at the measured rate (at least one call's round trip). On one machine's Ray
  nodes this is 6 to 15 ms (the result's store, the owner's notice, the next call's push),
  ten times a bare round trip. The same chain with an 8 KiB block, sent by value, gives the
  figure for blocks Ray carries inside its messages (``inline_bytes``: the cluster's inline
  threshold, 100 KiB unless a private cluster was given less, less :data:`INLINE_MARGIN`;
  a TSQR's R factors, a solve's row sums), which never enter an object store: 1.4-1.9 ms
  here, at least one round trip. A cluster that inlines nothing that small gets no such
  figure.

Each figure is the median of a few tries, clamped to a sane range so a hiccup on a busy
machine cannot make the planner absurd.

Before probing, :func:`warm_up` readies the nodes for a session's first call: every node
worker imports what reading a store needs, and one no-op task runs on every node, so Ray
starts a worker process there for plain tasks (placing a numpy operand's blocks, ``tc.random``):
that start costs one to a few seconds per node on a busy machine, paid here (in ``tc.init``)
instead of by the first call.
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np

from tensorc.runtime.ray.calls import node_workers, submit
from tensorc.runtime.ray.cluster import RayCluster

PROBE_BYTES = 8 * 2**20
HOP_BYTES = 2**20
SMALL_HOP_BYTES = 8 * 2**10  # a block Ray carries inside its messages (under 100 KiB)
INLINE_MARGIN = 2**10
"""Bytes of a block's serialised header: Ray compares an object's serialised size with its
inline threshold, so a block is small up to the threshold less this."""
HOPS = 6
TRIES = 3
STEPS_PER_CALL = 16  # a typical call's block steps, over which one call's overhead spreads


def _clamp(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


def warm_up(cluster: RayCluster) -> None:
    """Ready every node for the first call (module docstring); returns when they are."""
    import ray

    tasks = [submit(cluster, "run", node, os.getpid)[0] for node in range(cluster.nodes)]
    ray.get([w.warm.remote() for w in node_workers(cluster)] + tasks)


def calibrate_cluster(cluster: RayCluster) -> dict:
    """Measure the model's constants on ``cluster`` (module docstring), the nodes warmed up
    first (:func:`warm_up`)."""
    import ray

    warm_up(cluster)
    workers = node_workers(cluster)
    far = workers[-1]
    trips = []
    for _ in range(TRIES + 2):
        started = time.perf_counter()
        ray.get(far.node.remote())
        trips.append(time.perf_counter() - started)
    trip = statistics.median(trips)
    rates = []
    for k in range(TRIES + 1):  # the first transfer to a node also sets up the connection
        block = ray.put(np.full(PROBE_BYTES // 8, float(k)))
        started = time.perf_counter()
        ray.get(far.nbytes.remote(block))
        rates.append(PROBE_BYTES / max(time.perf_counter() - started - trip, 1e-6))
        del block
    rates = rates[1:]
    rate = statistics.median(rates)
    ends = (workers[0], far)
    inline = max(0, cluster.inline_bytes - INLINE_MARGIN)  # the largest block Ray inlines
    small = min(SMALL_HOP_BYTES, inline)
    hops, small_hops = [], []
    for _ in range(TRIES):
        # a stored block starts from the store, a small one by value: as each travels
        for nbytes, found, by_value in ((HOP_BYTES, hops, False), (small, small_hops, True)):
            if nbytes <= 0:
                continue
            block = np.zeros(nbytes // 8)
            if not by_value:
                block = ray.put(block)
            started = time.perf_counter()
            for k in range(HOPS):
                block = ends[k % 2].relay.remote(block)
            ray.get(block)
            found.append((time.perf_counter() - started) / HOPS - nbytes / rate)
            del block
    call = _clamp(statistics.median(hops), trip, 0.1)
    flops, step = statistics.median(
        [tuple(found) for found in ray.get([far.compute_probe.remote() for _ in range(TRIES)])])
    # the best try: a try that shared its core with a node still starting is only slower
    sparse = max(ray.get([far.sparse_probe.remote() for _ in range(TRIES + 2)]))
    host_of, host_cores = hosts_of(ray.get([w.host.remote() for w in workers]))
    return {
        "sparse_flops_per_core": _clamp(sparse, 10e6, 100e9),
        "network_bytes_per_second": _clamp(rate, 10e6, 100e9),
        "task_seconds": _clamp(step + trip / STEPS_PER_CALL, 1e-6, 0.1),
        "blas_flops_per_core": _clamp(flops, 0.1e9, 1e12),
        "cores_per_node": max(1, int(min(cluster.cpus or [1]))),
        "call_seconds": call,
        "small_call_seconds": (_clamp(statistics.median(small_hops), trip, call)
                               if small_hops else None),
        "inline_bytes": inline,
        "host_of": host_of,
        "host_cores": host_cores,
        "host_nodes": tuple(cluster.node_ids),
        "source": f"probed on {cluster.nodes} node(s)",
    }


def hosts_of(found: list[tuple[str, int]]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(host index of each node, cores of each host)`` from each node's ``(machine
    identity, cores)``, hosts numbered in order of first appearance."""
    index: dict[str, int] = {}
    cores: list[int] = []
    for identity, count in found:
        if identity not in index:
            index[identity] = len(cores)
            cores.append(int(count))
    return tuple(index[identity] for identity, _ in found), tuple(cores)
