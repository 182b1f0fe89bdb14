"""Connecting to Ray: which cluster, which nodes, in which order.

Contract:

- ``connect(address, num_nodes)`` returns a :class:`RayCluster`.
  ``address=None`` starts a private Ray on this machine — one node, or a
  ``ray.cluster_utils.Cluster`` of ``num_nodes`` nodes with one CPU each (the demo and the
  tests; ``TENSORC_RAY_INLINE_BYTES`` lowers Ray's inline threshold); ``"auto"`` attaches to the
  cluster ``ray start`` left running here; any other string is a Ray address (``host:port``
  or ``ray://…``). A private Ray never attaches to a stray
  cluster (``address="local"``).
- A ``host:port`` address is probed with a plain TCP connect first, so a dead address fails in
  about a second with an :class:`~tensorc.errors.ExecutionError` naming it, instead of Ray's
  long connection retries.
- Nodes are numbered in a stable order — the driver's node first, then the others by
  address and port — and ``RayCluster.refresh()`` drops nodes that died. Node indices are
  what the schedulers and the layouts speak; node ids (hex) are what Ray speaks.
- ``RAY_AUTH_MODE`` defaults to ``disabled`` for a private cluster (nothing listens outside
  this machine's loopback users); an explicit setting in the environment wins.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

from tensorc.errors import ExecutionError
from tensorc.runtime.ray.held import forget_all
from tensorc.runtime.ray.peer_blocks import forget_offers
from tensorc.runtime.ray.tasks import read_report

LOCAL_NODE_MEMORY = 512 * 1024 * 1024
"""Object store per node of a private multi-node cluster (bytes)."""

INLINE_BYTES_VARIABLE = "TENSORC_RAY_INLINE_BYTES"
"""Ray inlines objects below 100 KiB into task messages, where no object location records
them; setting this variable gives a private cluster a smaller threshold, so Ray's object
directory sees (and ``measure=True`` measures) every block above it. The tests set 1024."""

RAY_INLINE_BYTES = 100 * 1024
"""Ray's own inline threshold (its ``max_direct_call_object_size``): a task's result or
argument whose serialised size is at most this travels inside Ray's messages, never in an
object store."""

PROBE_SECONDS = 2.0


@dataclass
class RayCluster:
    """The Ray cluster this process is connected to, and its live nodes in a stable order."""

    address: str | None
    node_ids: list[str]
    cpus: list[float]
    driver_node: str
    local_cluster: object | None = None  # a ray.cluster_utils.Cluster we started
    owns_ray: bool = True
    store_bytes: int = 0
    """Object store memory of the live nodes together (bytes)."""
    inline_bytes: int = RAY_INLINE_BYTES
    """The cluster's inline threshold: Ray's, or the smaller one a private multi-node
    cluster was given (``TENSORC_RAY_INLINE_BYTES``)."""
    epoch: int = 0
    """Bumped whenever the live nodes change: node indices recorded earlier may be stale."""
    workers: list = field(default_factory=list, repr=False)
    """The node workers (Ray actors) the executor started, in node order."""
    workers_epoch: int = -1
    endpoints: list = field(default_factory=list, repr=False)
    """The node workers' block servers (``(host, port)``, or the refs of the answers not
    read yet: :func:`~tensorc.runtime.ray.calls.peer_endpoints`), in node order."""
    endpoints_by: float = 0.0
    """Until when (``time.monotonic()``) a submission waits for those answers."""
    measure: bool = False
    """Read Ray's object directory after every run for the bytes Ray moved (the session's
    ``tc.init(measure=...)``; a call's own ``measure=`` wins)."""
    _dead: list[str] = field(default_factory=list)

    def restart_workers(self) -> None:
        """Start the node workers afresh at the next call (one died, its node perhaps
        alive: the node list alone would not show it)."""
        self.workers_epoch = -1

    @property
    def nodes(self) -> int:
        return len(self.node_ids)

    @property
    def node_store_bytes(self) -> float:
        """A node's share of :attr:`store_bytes`."""
        return self.store_bytes / max(1, self.nodes)

    @property
    def total_cpus(self) -> int:
        return max(1, int(sum(self.cpus)))

    def index_of(self, node_id: str) -> int | None:
        try:
            return self.node_ids.index(node_id)
        except ValueError:
            return None

    @property
    def driver_index(self) -> int:
        """The driver's node's index (node 0 when the driver is on no node of the
        cluster): where blocks the driver made are recorded."""
        found = self.index_of(self.driver_node)
        return 0 if found is None else found

    def locate(self, reported: list) -> list[int | None]:
        """The node index each of ``reported`` (refs to node ids a task returned, or to
        calls' reports) names."""
        import ray

        return [self.index_of(read_report(node)) for node in ray.get(list(reported))]

    def refresh(self) -> list[str]:
        """Re-read the live nodes (their CPUs and object stores); returns the ids of nodes
        that died since the last look."""
        node_ids, cpus, store_bytes = _live_nodes(self.driver_node)
        dead = [n for n in self.node_ids if n not in node_ids]
        self._dead.extend(dead)
        if node_ids != self.node_ids:
            self.epoch += 1
        self.node_ids, self.cpus, self.store_bytes = node_ids, cpus, store_bytes
        return dead

    @property
    def dead_nodes(self) -> list[str]:
        return list(self._dead)

    def describe(self) -> str:
        kind = "private" if self.owns_ray else f"at {self.address}"
        return f"Ray cluster ({kind}): {self.nodes} node(s), {self.total_cpus} CPU(s)"


def _live_nodes(driver_node: str) -> tuple[list[str], list[float], int]:
    """The live nodes' ids in the stable order, their CPUs, and their object stores' bytes
    together."""
    import ray

    alive = [n for n in ray.nodes() if n.get("Alive")]
    alive.sort(
        key=lambda n: (
            n["NodeID"] != driver_node,
            n.get("NodeManagerAddress", ""),
            n.get("NodeManagerPort", 0),
            n["NodeID"],
        )
    )
    return ([n["NodeID"] for n in alive], [float(n["Resources"].get("CPU", 0)) for n in alive],
            int(sum(n["Resources"].get("object_store_memory", 0) for n in alive)))


def _inline_bytes() -> int:
    """A private cluster's inline threshold (:data:`INLINE_BYTES_VARIABLE`, else Ray's)."""
    inline = os.environ.get(INLINE_BYTES_VARIABLE)
    return int(inline) if inline else RAY_INLINE_BYTES


def _head_node_args() -> dict:
    args: dict = {"num_cpus": 1, "object_store_memory": LOCAL_NODE_MEMORY}
    if os.environ.get(INLINE_BYTES_VARIABLE):
        args["_system_config"] = {"max_direct_call_object_size": _inline_bytes()}
    return args


def check_reachable(address: str) -> None:
    """Fail fast when ``host:port`` does not accept connections."""
    target = address[len("ray://"):] if address.startswith("ray://") else address
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        raise ExecutionError(
            f"Ray address {address!r} is not 'host:port', 'ray://host:port' or 'auto'"
        )
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_SECONDS):
            pass
    except OSError as err:
        raise ExecutionError(
            f"cannot reach a Ray cluster at {address!r}: {err.strerror or err}; start one with "
            "'ray start --head' or pass address=None for a private cluster"
        ) from err


def connect(address: str | None = None, num_nodes: int | None = None) -> RayCluster:
    """Connect this process to Ray (see the module docstring for what each address means)."""
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    if ray.is_initialized():
        ray.shutdown()
    local_cluster = None
    try:
        if address is None and num_nodes and num_nodes > 1:
            from ray.cluster_utils import Cluster

            local_cluster = Cluster(
                initialize_head=True,
                head_node_args=_head_node_args(),
            )
            for _ in range(num_nodes - 1):
                local_cluster.add_node(num_cpus=1, object_store_memory=LOCAL_NODE_MEMORY)
            ray.init(address=local_cluster.address, log_to_driver=False)
            local_cluster.wait_for_nodes()
        elif address is None:
            ray.init(address="local", log_to_driver=False, include_dashboard=False)
        else:
            if address != "auto":
                check_reachable(address)
            ray.init(address=address, log_to_driver=False)
    except ExecutionError:
        raise
    except (ConnectionError, RuntimeError, ValueError) as err:
        if local_cluster is not None:
            local_cluster.shutdown()
        raise ExecutionError(f"cannot connect to Ray at {address or 'a private cluster'!r}: "
                             f"{err}") from err
    driver = ray.get_runtime_context().get_node_id()
    node_ids, cpus, store_bytes = _live_nodes(driver)
    return RayCluster(
        address=address,
        node_ids=node_ids,
        cpus=cpus,
        driver_node=driver,
        local_cluster=local_cluster,
        owns_ray=address is None,
        store_bytes=store_bytes,
        inline_bytes=_inline_bytes() if local_cluster is not None else RAY_INLINE_BYTES,
    )


def disconnect(cluster: RayCluster | None) -> None:
    """Disconnect from Ray and stop the private cluster, if this process started one."""
    import ray

    forget_all()  # the workers holding blocks end with the session
    forget_offers()  # and those offering them
    if ray.is_initialized():
        ray.shutdown()
    if cluster is not None and cluster.local_cluster is not None:
        cluster.local_cluster.shutdown()


_connected: RayCluster | None = None


def set_connected(cluster: RayCluster | None) -> None:
    """Record the cluster this process is connected to (the session does, on ``tc.init``)."""
    global _connected
    _connected = cluster


NO_CLUSTER = ("no Ray cluster: call tc.init(backend='ray') (a private cluster), "
              "tc.init(address='auto') or tc.init(address='host:port') first")


def connected() -> RayCluster:
    """The connected Ray cluster, or an error saying how to connect."""
    if _connected is None:
        raise ExecutionError(NO_CLUSTER)
    import ray

    if not ray.is_initialized():
        raise ExecutionError("the Ray connection is gone (ray.shutdown was called); "
                             "call tc.init again")
    return _connected
