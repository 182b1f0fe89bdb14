"""Placement of block-program tasks as they are expanded: LSHS simulating time and bytes.

Contract: a :class:`BlockPlacer` is told about every block version (its bytes and the node
that holds it) and asked, one task at a time in submission order, which node runs it:
``place(inputs, out_bytes, flops) -> node``, where ``inputs`` are version ids. It never
runs data and it is deterministic.

Policies:

- ``lshs`` — the load-simulating scheduler for DAGs whose tasks are BLAS-3 sized: every
  node's cores are simulated as busy-until times (nodes on one host, when ``hosts`` gives
  ``(host of each node, cores of each host)``, share that host's cores, at most their own
  in all: spreading over them adds no compute, only moves); a task's inputs arrive at
  their ready time, plus, when they are on another node, their bytes over the calibrated
  bandwidth and, for a block another task made (not an input, there from the start),
  ``hop_seconds`` (the latency of the call boundary it crosses); the task goes to the node
  where it would *finish* first (compute at the calibrated per-core rate), ties to the node the
  byte objective of :class:`~tensorc.placement.cluster_state.ClusterState` prefers (peak
  memory + net in + net out), then to the lowest id. Bytes alone would put a whole
  factorisation on one node, and time alone would ignore memory: the simulated clock
  carries both.
- ``round_robin`` — the c-th task on node ``c % nodes`` (the ablation baseline).

Byte accounting (moved bytes, per-node peak memory) is the cluster-state model's, so the
stats of a block program read like those of an einsum.
"""

from __future__ import annotations

import heapq

from tensorc.placement.cluster_state import ClusterState

POLICIES = ("lshs", "round_robin")


class BlockPlacer:
    """Simulated nodes for a stream of block tasks (see the module docstring)."""

    def __init__(self, nodes: int, cores: int, policy: str, *, flops_per_core: float,
                 bytes_per_second: float, task_seconds: float,
                 hop_seconds: float = 0.0, hosts=None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown block scheduler {policy!r}; choose one of "
                             f"{', '.join(POLICIES)}")
        self.nodes = nodes
        self.policy = policy
        self.flops_per_core = flops_per_core
        self.bytes_per_second = bytes_per_second
        self.task_seconds = task_seconds
        self.hop_seconds = hop_seconds
        self.state = ClusterState(nodes, [], [])
        self.pool = list(range(nodes))  # per node, the cores it computes on
        pools = [max(1, cores)] * nodes
        if hosts is not None:  # nodes on one host share its cores, as many as they have
            host_of, host_cores = hosts
            self.pool = list(host_of)
            pools = [max(1, min(c, cores * host_of.count(h))) for h, c in enumerate(host_cores)]
        self.cores = [[0.0] * count for count in pools]  # per pool, busy-until times
        self.ready: list[float] = []  # per version: simulated time it exists
        self.count = 0
        self.tasks_per_node = [0] * nodes

    def add_version(self, nbytes: int, uses: int, node: int | None = None,
                    retained: bool = False) -> int:
        """A block version; with ``node``, one that already exists there (an input)."""
        block = self.state.add_block(nbytes, uses, retained)
        self.ready.append(0.0)
        if node is not None:
            self.state.add_copy(block, node)
            self.state.home[block] = node
        return block

    def place(self, inputs: list[int], out_bytes: int, flops: float) -> int:
        """The node for a task reading versions ``inputs`` (see the module policy)."""
        if self.policy == "round_robin" or self.nodes == 1:
            node = self.count % self.nodes
        else:
            node = min(range(self.nodes), key=lambda n: (
                self._finish(inputs, flops, n), self.state.cost(inputs, out_bytes, n), n))
        self.count += 1
        return node

    def _finish(self, inputs: list[int], flops: float, node: int) -> float:
        bit = 1 << node
        arrive = 0.0
        for block in inputs:
            ready = self.ready[block]
            if not self.state.holders[block] & bit:  # a copy; a result also crosses calls
                ready += self.state.size[block] / self.bytes_per_second + (
                    self.hop_seconds if ready > 0 else 0.0)
            arrive = max(arrive, ready)
        start = max(arrive, self.cores[self.pool[node]][0])
        return start + self.task_seconds + flops / self.flops_per_core

    def run(self, outputs: list[int], inputs: list[int], node: int, flops: float) -> None:
        """Record the task on ``node``: its inputs copied there, its outputs made there."""
        finish = self._finish(inputs, flops, node)
        heapq.heapreplace(self.cores[self.pool[node]], finish)
        self.state.run(outputs[0], inputs, node)
        for extra in outputs[1:]:
            self.state.add_copy(extra, node)
            self.state.home[extra] = node
        for block in outputs:
            self.ready[block] = finish
        self.tasks_per_node[node] += 1

    def moved_bytes(self) -> int:
        return sum(self.state.net_in)
