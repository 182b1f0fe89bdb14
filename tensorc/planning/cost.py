"""One cost model for local planning decisions: seconds on this kind of machine.

Every choice the compiler makes between alternatives (contraction order, fused join versus
pairwise stages, block counts) asks this module, so the choices agree with each other. The
model is deliberately simple and its constants are the machine figures in ``docs/performance.md``:

- a contraction of blocks costs ``flops / rate + bytes / bandwidth``, where ``rate`` is the
  BLAS rate when opt_einsum can hand the pair to BLAS (GEMM/TDOT/DOT) and numpy's einsum loop
  rate otherwise, and ``bytes`` are its inputs plus its output;
- BLAS work spreads over every core whether it runs as one call or several; numpy's own loops
  use one core per task; memory traffic is shared by all cores; every task costs a fixed
  dispatch overhead (:class:`Work`, :func:`parallel_seconds`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tensorc.codegen.taskgraph import KIND_CODE, LOAD
from tensorc.ir.contraction import Key, contraction_flops, path_steps, uses_blas, volume

BLAS_FLOPS_PER_CORE = 50e9
EINSUM_FLOPS_PER_CORE = 2e9
MEMORY_BYTES_PER_SECOND = 28e9
DISPATCH_SECONDS = 40e-6


@dataclass(frozen=True)
class Work:
    """Seconds of work by kind: BLAS compute (spreads over every core, inside one call or
    across calls), scalar compute (numpy loops: one core per task) and memory traffic (no
    number of cores shortens it: they share one memory bus)."""

    blas: float = 0.0
    scalar: float = 0.0
    memory: float = 0.0

    def __add__(self, other: Work) -> Work:
        return Work(self.blas + other.blas, self.scalar + other.scalar, self.memory + other.memory)

    def times(self, count: int) -> Work:
        return Work(self.blas * count, self.scalar * count, self.memory * count)

    @property
    def serial_seconds(self) -> float:
        return self.blas + self.scalar + self.memory


def step_work(inputs: Sequence[Key], output: Key, sizes: dict[str, int], itemsize: int) -> Work:
    """The :class:`Work` of one einsum step on one core; a one-operand step (a sum or a
    transpose) is pure memory traffic."""
    moved = itemsize * (sum(volume(k, sizes) for k in inputs) + volume(output, sizes))
    memory = moved / MEMORY_BYTES_PER_SECOND
    if len(inputs) == 1:
        return Work(memory=memory)
    flops = contraction_flops(inputs, output, sizes)
    if uses_blas(inputs, output):
        return Work(blas=flops / BLAS_FLOPS_PER_CORE, memory=memory)
    return Work(scalar=flops / EINSUM_FLOPS_PER_CORE, memory=memory)


def step_seconds(inputs: Sequence[Key], output: Key, sizes: dict[str, int], itemsize: int) -> float:
    """Modelled seconds of one einsum step on one core."""
    return step_work(inputs, output, sizes, itemsize).serial_seconds


def path_seconds(
    inputs: Sequence[Key],
    output: Key,
    path: Sequence[tuple[int, ...]],
    sizes: dict[str, int],
    itemsize: int,
) -> float:
    """Modelled seconds of a whole contraction path (opt_einsum's linear path format)."""
    return sum(
        step_seconds(step_inputs, step_output, sizes, itemsize)
        for step_inputs, step_output in path_steps(inputs, output, path, sizes)
    )


def parallel_seconds(work: Work, tasks: int, workers: int) -> float:
    """Wall time of ``tasks`` tasks doing ``work`` in all with ``workers`` cores."""
    usable = max(1, min(workers, tasks))
    return (
        work.blas / max(1, workers)
        + work.scalar / usable
        + work.memory
        + tasks * DISPATCH_SECONDS
    )


# -- distributed plans ---------------------------------------------------------------------

NETWORK_BYTES_PER_SECOND = 125e6  # 1 Gbit/s into a node (a commodity cluster link)
RAY_TASK_SECONDS = 0.5e-3  # a remote call on its node (docs/performance.md: ~0.5 ms each)
RAY_CALL_SECONDS = 1e-3  # a block crossing nodes between calls: the next call's round trip
RAY_SUBMIT_SECONDS = 20e-6  # the driver submitting one remote call (Ray pipelines these)
CORES_PER_NODE = 8  # a cluster node runs this many tasks at once
NODE_FLOPS_PER_CORE = BLAS_FLOPS_PER_CORE  # a cluster node's BLAS rate per core
SPARSE_FLOPS_PER_CORE = NODE_FLOPS_PER_CORE / 16
"""A sparse kernel's rate on one core, in the ``flops`` a sparse plan's tasks count (a
multiply and an add per stored entry and dense column): a sixteenth of the BLAS rate until a
cluster's probe measures it (SpMM of a 10,000² CSR at 1 % times a 10,000 × 64 matrix, 128M
flops, took 60 ms on one core here, against 33 GFLOP/s of BLAS)."""
NODE_COPY_BYTES_PER_SECOND = 4e9  # stitching a re-laid-out block: fresh memory, written once
SPILL_PENALTY = 10.0  # seconds per network-second of bytes over a node's memory budget
COMMUNICATION_SLACK = 1.1  # the busiest receiver's budget, as a multiple of the lower bound
OVER_BUDGET_PENALTY = 1000.0  # seconds per network-second of bytes received over that budget


@dataclass(frozen=True)
class Machine:
    """The cluster constants of the distributed model: bytes per second into a node, seconds
    of overhead per block task, BLAS flops per core, cores per node, and where the figures
    came from (``defaults``, or a probe of the running cluster)."""

    network_bytes_per_second: float = NETWORK_BYTES_PER_SECOND
    task_seconds: float = RAY_TASK_SECONDS
    blas_flops_per_core: float = NODE_FLOPS_PER_CORE
    cores_per_node: int = CORES_PER_NODE
    source: str = "defaults"
    call_seconds: float = RAY_CALL_SECONDS
    """The latency a block pays to reach a call on another node (one call's round trip),
    on top of its bytes over the network rate."""
    small_call_seconds: float | None = None
    """The same for a block of at most ``inline_bytes``, which Ray carries inside its
    messages (it never enters an object store); ``None``: as ``call_seconds`` (not probed)."""
    inline_bytes: int = 0
    """The largest block Ray carries inside its messages on this cluster (0: none known)."""
    sparse_flops_per_core: float = SPARSE_FLOPS_PER_CORE
    """A sparse kernel's (the compiled CSR-times-dense loop's) flops a second on one core,
    counted as a sparse plan counts them."""
    host_of: tuple[int, ...] = ()
    """Per node, the index of the host (machine) it runs on; empty: every node its own."""
    host_cores: tuple[int, ...] = ()
    """Per host, the cores its processes can run on (the nodes on it share them)."""
    host_nodes: tuple[str, ...] = ()
    """The nodes' ids ``host_of`` follows (the cluster's order when it was probed)."""

    def hosts(self, nodes: int, node_ids=None) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
        """``(host of each node, host_cores)`` for a cluster of ``nodes`` nodes (``node_ids``
        in its order, when known: nodes are matched by id, so a cluster whose nodes changed
        since the probe is read right) when some of them share a host; else ``None`` (every
        node its own cores, also for a node the probe did not see)."""
        if node_ids is not None and self.host_nodes:
            known = dict(zip(self.host_nodes, self.host_of, strict=True))
            if any(node not in known for node in node_ids):
                return None
            host_of = tuple(known[node] for node in node_ids)
        else:
            host_of = self.host_of
        if len(host_of) != nodes or len(set(host_of)) == nodes:
            return None
        return host_of, self.host_cores

    def describe(self) -> str:
        shared = ""
        if self.hosts(len(self.host_of)):
            shared = (f" ({len(self.host_of)} node(s) on {len(self.host_cores)} host(s) of "
                      f"{'/'.join(map(str, self.host_cores))} core(s), shared)")
        return (f"{self.source}: network {self.network_bytes_per_second / 1e6:.0f} MB/s per "
                f"node, {self.task_seconds * 1e6:.0f} us per block task, "
                f"{self.blas_flops_per_core / 1e9:.1f} GFLOP/s per core, "
                f"{self.cores_per_node} core(s) per node{shared}, "
                f"{self.call_seconds * 1e3:.2f} ms per call between nodes"
                + ("" if self.small_call_seconds is None else
                   f" ({self.small_call_seconds * 1e3:.2f} ms for a small block)")
                + ", "
                f"{self.sparse_flops_per_core / 1e9:.1f} sparse GFLOP/s per core")


DEFAULT_MACHINE = Machine()
_machine = DEFAULT_MACHINE


def machine() -> Machine:
    """The constants the distributed model prices with now."""
    return _machine


def use_machine(figures: Machine | None) -> None:
    """Price with ``figures`` from now on (``None``: the defaults). The module constants the
    model reads are set from them, so every part of the model agrees."""
    global _machine, NETWORK_BYTES_PER_SECOND, RAY_TASK_SECONDS, NODE_FLOPS_PER_CORE
    global CORES_PER_NODE
    _machine = figures or DEFAULT_MACHINE
    NETWORK_BYTES_PER_SECOND = _machine.network_bytes_per_second
    RAY_TASK_SECONDS = _machine.task_seconds
    NODE_FLOPS_PER_CORE = _machine.blas_flops_per_core
    CORES_PER_NODE = _machine.cores_per_node


@dataclass(frozen=True)
class CostReport:
    """The modelled price of one distributed plan (from the LSHS simulation).

    ``cost`` is seconds: the busiest receiver's bytes over the network bandwidth, plus the
    busiest node's compute (its flops at the BLAS rate and one remote call per task, over
    the node's :data:`CORES_PER_NODE` cores), plus a steep price for every byte the busiest
    receiver gets beyond :data:`COMMUNICATION_SLACK` × the lower bound,
    plus the driver's submission of every task, plus a steep penalty per byte a node would
    hold over its memory budget.
    """

    cost: float
    inter_node_bytes: int
    max_node_recv_bytes: int
    max_node_memory_bytes: int
    node_recv_bytes: tuple[int, ...]
    node_memory_bytes: tuple[int, ...]
    node_flops: tuple[int, ...]
    node_tasks: tuple[int, ...]
    tasks: int
    fits: bool


def over_budget_seconds(received: float, bound_bytes: int) -> float:
    """The penalty for a busiest receiver over :data:`COMMUNICATION_SLACK` × the lower
    bound: the network is the resource a cluster shares and scales worst, so a plan may
    trade compute or dispatch for bytes only within that slack."""
    if bound_bytes <= 0:
        return 0.0
    over = received - COMMUNICATION_SLACK * bound_bytes
    return OVER_BUDGET_PENALTY * max(0.0, over) / NETWORK_BYTES_PER_SECOND


def node_parts(received, copied, flops, tasks, memory, memory_budget: int,
               bound_bytes: int = 0) -> dict[str, float]:
    """The distributed price's terms in seconds from per-node figures (any sequences, or
    numpy arrays, of one value per node: bytes received, a repartition's included; bytes
    stitched into re-laid-out blocks; flops and tasks run; peak memory): ``network`` (the
    busiest receiver), ``copies``, ``compute`` (the busiest node's flops and task overhead
    over its cores), ``submission`` (the driver's, every task), and the two charges that
    are not time, ``spill`` (bytes over a node's memory budget) and ``over_budget`` (bytes
    over the communication budget, :func:`over_budget_seconds`)."""
    received = np.asarray(received)
    memory = np.asarray(memory)
    top_received = int(received.max())
    over = int(np.maximum(memory - memory_budget, 0).sum())
    return {
        "network": top_received / NETWORK_BYTES_PER_SECOND,
        "copies": int(np.asarray(copied).max()) / NODE_COPY_BYTES_PER_SECOND,
        "compute": float((np.asarray(flops) / NODE_FLOPS_PER_CORE
                          + np.asarray(tasks) * RAY_TASK_SECONDS).max()) / CORES_PER_NODE,
        "submission": int(np.asarray(tasks).sum()) * RAY_SUBMIT_SECONDS,
        "spill": SPILL_PENALTY * over / NETWORK_BYTES_PER_SECOND,
        "over_budget": over_budget_seconds(top_received, bound_bytes),
    }


TIME_PARTS = ("network", "copies", "compute", "submission")
"""The terms of :func:`node_parts` that are modelled time (the others are charges)."""


def node_seconds(received, copied, flops, tasks, memory, memory_budget: int,
                 bound_bytes: int = 0) -> tuple[float, bool]:
    """The distributed price in seconds (the sum of :func:`node_parts`) and whether every
    node fits its memory budget: the one formula :func:`distributed_cost` (a simulated
    schedule) and :mod:`tensorc.planning.symbolic_cost` (closed form) both price with."""
    parts = node_parts(received, copied, flops, tasks, memory, memory_budget, bound_bytes)
    cost = (parts["network"] + parts["copies"] + parts["compute"] + parts["submission"]
            + parts["spill"] + parts["over_budget"])
    return float(cost), parts["spill"] == 0


def distributed_cost(graph, placed, memory_budget: int, moved=None,
                     bound_bytes: int = 0, copied=None) -> CostReport:
    """Price a task graph placed by a simulated schedule (``tensorc.placement.schedule``);
    ``moved`` adds bytes each node receives before the graph runs (a repartition), and
    ``copied`` the bytes each node stitches into new blocks for it (priced at
    :data:`NODE_COPY_BYTES_PER_SECOND`: a repartition costs its copies even when nothing
    crosses the network); ``bound_bytes`` is the communication lower bound
    (:func:`over_budget_seconds`)."""
    nodes = placed.nodes
    received = [a + b for a, b in zip(placed.net_in_bytes, moved or [0] * nodes, strict=True)]
    columns = graph.columns()
    compute = columns.kind != KIND_CODE[LOAD]
    node_of = np.asarray(placed.node_of, np.int64)[compute]
    flops_per_node = np.zeros(nodes, np.int64)
    np.add.at(flops_per_node, node_of, columns.flops[compute])
    flops = flops_per_node.tolist()
    tasks = np.bincount(node_of, minlength=nodes).tolist()
    cost, fits = node_seconds(received, copied or [0], flops, tasks, placed.memory_bytes,
                              memory_budget, bound_bytes)
    return CostReport(
        cost=cost,
        inter_node_bytes=sum(received),
        max_node_recv_bytes=max(received),
        max_node_memory_bytes=placed.max_node_memory_bytes,
        node_recv_bytes=tuple(received),
        node_memory_bytes=tuple(placed.memory_bytes),
        node_flops=tuple(flops),
        node_tasks=tuple(tasks),
        tasks=sum(tasks),
        fits=fits,
    )
