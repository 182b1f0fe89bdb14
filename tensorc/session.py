"""The process's execution session: which executor runs planned units, chosen once.

``tc.init(address=None, *, backend=None, num_nodes=None, scheduler="lshs")`` chooses it;
``tc.shutdown()`` ends it. Without ``init`` the session's executor is the local one
(:class:`~tensorc.runtime.local.LocalExecutor`) and nothing imports Ray. Rules:

- ``backend="local"`` — the in-process executor; ``address`` and ``num_nodes`` must be unset.
- ``backend="ray"`` (the default as soon as ``address`` or ``num_nodes`` is given) — the Ray
  executor (:class:`~tensorc.runtime.ray.executor.RayExecutor`); ``address=None`` starts a
  private Ray on this machine (``num_nodes > 1``: a ``ray.cluster_utils.Cluster`` of that many
  one-CPU nodes), ``"auto"`` attaches to the cluster ``ray start`` runs here, another string
  is a Ray address.
- ``scheduler`` is the default placement for every call (``lshs``, ``round_robin``,
  ``ray_default``); a call's own ``scheduler=`` wins.
- ``measure=True`` reads Ray's object directory after every run for the bytes Ray really
  moved (``measured_*`` statistics; it costs a few round trips after the run, so it is off
  by default, and a call's own ``measure=`` wins). Transfers counted from the calls'
  arguments (``transfer_bytes``) are always reported.
- ``calibrate=True`` (the default) probes the cluster in well under a second — per-task
  overhead, bandwidth into a node, one core's BLAS rate, cores per node — and the
  distributed cost model prices with those figures while the session lasts
  (``tc.session.current().machine``); ``tc.shutdown()`` restores the defaults.
- ``memory_limit`` (bytes or a size such as ``"4GB"``) is the memory budget of one worker:
  this process for local runs, each node on Ray. Every plan is blocked so that its
  modelled peak fits (``explain()`` shows both), and a plan that cannot fit is refused
  before it runs. A call's own ``memory_limit=`` wins; unset, the executor's default (a
  fraction of the memory available) applies. It may be changed while the session lasts
  (``tc.session.current().memory_limit = "2GB"``), also without ``init``.
- ``init`` again replaces the session (the previous one is shut down first).

:func:`executor_for` is the one place a call's executor is chosen: the session's, or for a
call given ``backend=`` or distributed operands, the one those ask for.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Sequence

from tensorc.errors import ExecutionError, PlanError
from tensorc.planning.cost import Machine, use_machine
from tensorc.planning.options import BACKENDS, check_scheduler, memory_bytes
from tensorc.planning.planners import load_smt
from tensorc.runtime.executor import Executor
from tensorc.runtime.local import LocalExecutor
from tensorc.runtime.ray.arrays import DistributedArray
from tensorc.runtime.ray.calibrate import calibrate_cluster
from tensorc.runtime.ray.cluster import (
    NO_CLUSTER,
    check_reachable,
    connect,
    connected,
    disconnect,
    set_connected,
)
from tensorc.runtime.ray.executor import RayExecutor

LOCAL = LocalExecutor()
"""The in-process executor (stateless: every session shares it)."""


class Session:
    """The current session: its backend, default placement, measuring switch, cost-model
    constants and the executor that runs its planned units. ``scheduler`` and ``measure``
    may be changed while it lasts; the executor follows."""

    def __init__(self, backend: str, scheduler: str, cluster=None, measure: bool = False,
                 machine: Machine | None = None, executor: Executor = LOCAL,
                 memory_limit=None) -> None:
        self.backend = backend
        self.cluster = cluster  # tensorc.runtime.ray.cluster.RayCluster
        self.machine = machine
        """The cost model's constants probed on the cluster (``None``: the defaults)."""
        self.executor = executor
        """What runs this session's planned units."""
        self.scheduler = scheduler  # the setters pass both on to the executor and cluster
        self.measure = measure
        self.memory_limit = memory_limit

    @property
    def memory_limit(self) -> int | None:
        """The budget of one worker set for this session, in bytes (``None``: the
        executor's default)."""
        return self._memory_limit

    @memory_limit.setter
    def memory_limit(self, value) -> None:
        self._memory_limit = None if value is None else memory_bytes(value)

    def memory_budget(self, call_limit: int | None = None) -> tuple[int, str]:
        """The budget a call plans with and where it came from: the call's own
        ``memory_limit=``, the session's, or the executor's default."""
        if call_limit is not None:
            return call_limit, "the call's memory_limit="
        if self._memory_limit is not None:
            return self._memory_limit, "the session's memory_limit (tc.init)"
        return self.executor.default_memory_limit()

    @property
    def scheduler(self) -> str:
        """The default placement of every call (a call's own ``scheduler=`` wins)."""
        return self._scheduler

    @scheduler.setter
    def scheduler(self, value: str) -> None:
        self._scheduler = value
        if isinstance(self.executor, RayExecutor):
            self.executor.scheduler = value

    @property
    def measure(self) -> bool:
        """Whether Ray runs read the object directory for the bytes Ray moved."""
        return self._measure

    @measure.setter
    def measure(self, value: bool) -> None:
        self._measure = bool(value)
        if self.cluster is not None:
            self.cluster.measure = bool(value)

    def __repr__(self) -> str:
        return (f"Session(backend={self.backend!r}, scheduler={self.scheduler!r}, "
                f"measure={self.measure!r}, cluster={self.cluster!r}, machine={self.machine!r})")


_lock = threading.Lock()
_session = Session(backend="local", scheduler="lshs")


def init(
    address: str | None = None,
    *,
    backend: str | None = None,
    num_nodes: int | None = None,
    scheduler: str = "lshs",
    measure: bool = False,
    calibrate: bool = True,
    memory_limit=None,
) -> Session:
    """Start (or replace) the session; see the module docstring."""
    global _session
    check_scheduler(scheduler)
    if memory_limit is not None:
        memory_limit = memory_bytes(memory_limit)
    if backend is None:
        backend = "ray" if address is not None or num_nodes is not None else "local"
    if backend not in BACKENDS:
        raise PlanError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if num_nodes is not None and (isinstance(num_nodes, bool) or int(num_nodes) < 1):
        raise PlanError(f"num_nodes must be a positive integer, got {num_nodes!r}")
    if backend == "local" and (address is not None or num_nodes not in (None, 1)):
        raise PlanError("backend='local' runs in this process; address and num_nodes need 'ray'")
    if backend == "ray" and address not in (None, "auto"):
        check_reachable(address)  # a dead address fails here, before the current session is touched
    with _lock:
        shutdown()
        if backend == "local":
            _session = Session("local", scheduler, memory_limit=memory_limit)
            return _session
        cluster = connect(address, num_nodes)
        set_connected(cluster)
        try:
            machine = Machine(**calibrate_cluster(cluster)) if calibrate else None
            if cluster.nodes > 1:
                load_smt()  # plans over several nodes search with z3
        except BaseException:  # a half-made session is no session: back to local
            set_connected(None)
            disconnect(cluster)
            raise
        use_machine(machine)
        _session = Session("ray", scheduler, cluster, bool(measure), machine,
                           RayExecutor(cluster, scheduler), memory_limit)
        # run before the exit handlers Ray's own nodes registered (handlers run last first):
        # a script that ends without tc.shutdown() stops its private cluster in about a
        # second, where Ray's handlers alone wait about 8 s for the nodes' processes
        atexit.unregister(shutdown)
        atexit.register(shutdown)
        return _session


def shutdown() -> None:
    """End the session: disconnect from Ray (stopping a private cluster); back to local."""
    global _session
    if _session.cluster is not None:
        disconnect(_session.cluster)
    set_connected(None)
    use_machine(None)
    _session = Session("local", _session.scheduler)


def current() -> Session:
    return _session


def executor_for(backend: str | None = None, operands: Sequence[object] = ()) -> Executor:
    """The executor a call runs on: ``backend="local"`` (refused with distributed
    operands), ``"ray"`` or distributed (``DistributedArray``) operands: the Ray session's;
    otherwise the session's own."""
    distributed = any(isinstance(op, DistributedArray) for op in operands)
    if backend == "local":
        if distributed:
            raise PlanError("backend='local' cannot take tc.Array operands; call .numpy() "
                            "first or use backend='ray'")
        return LOCAL
    if backend == "ray" or distributed:
        if _session.executor.in_process:
            raise ExecutionError(NO_CLUSTER)
        connected()  # a clear error when the connection is gone
    return _session.executor
