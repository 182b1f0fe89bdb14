"""The process's execution session: which backend runs graphs, and the Ray connection.

``tc.init(address=None, *, backend=None, num_nodes=None, scheduler="lshs")`` chooses it;
``tc.shutdown()`` ends it. Without ``init`` the session is the local executor and nothing
imports Ray. Rules:

- ``backend="local"`` — the in-process executor; ``address`` and ``num_nodes`` must be unset.
- ``backend="ray"`` (the default as soon as ``address`` or ``num_nodes`` is given) —
  ``address=None`` starts a private Ray on this machine (``num_nodes > 1``: a
  ``ray.cluster_utils.Cluster`` of that many one-CPU nodes), ``"auto"`` attaches to the
  cluster ``ray start`` runs here, another string is a Ray address.
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
- ``init`` again replaces the session (the previous one is shut down first).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from tensorc.errors import ExecutionError, PlanError
from tensorc.planning.cost import Machine, use_machine
from tensorc.planning.options import BACKENDS, check_scheduler
from tensorc.runtime.calibrate import probe as calibration_probe
from tensorc.runtime.ray_cluster import connect, disconnect, probe


@dataclass
class Session:
    backend: str
    scheduler: str
    cluster: object | None = None  # tensorc.runtime.ray_cluster.RayCluster
    measure: bool = False
    machine: Machine | None = None
    """The cost model's constants probed on the cluster (``None``: the defaults)."""


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
) -> Session:
    """Start (or replace) the session; see the module docstring."""
    global _session
    check_scheduler(scheduler)
    if backend is None:
        backend = "ray" if address is not None or num_nodes is not None else "local"
    if backend not in BACKENDS:
        raise PlanError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if num_nodes is not None and (isinstance(num_nodes, bool) or int(num_nodes) < 1):
        raise PlanError(f"num_nodes must be a positive integer, got {num_nodes!r}")
    if backend == "local" and (address is not None or num_nodes not in (None, 1)):
        raise PlanError("backend='local' runs in this process; address and num_nodes need 'ray'")
    if backend == "ray" and address not in (None, "auto"):
        probe(address)  # a dead address fails here, before the current session is touched
    with _lock:
        shutdown()
        if backend == "local":
            _session = Session("local", scheduler)
            return _session
        cluster = connect(address, num_nodes)
        machine = Machine(**calibration_probe(cluster)) if calibrate else None
        use_machine(machine)
        _session = Session("ray", scheduler, cluster, bool(measure), machine)
        return _session


def shutdown() -> None:
    """End the session: disconnect from Ray (stopping a private cluster); back to local."""
    global _session
    if _session.cluster is not None:
        disconnect(_session.cluster)
    use_machine(None)
    _session = Session("local", _session.scheduler)


def current() -> Session:
    return _session


def ray_cluster():
    """The connected Ray cluster, or an error saying how to connect."""
    if _session.cluster is None:
        raise ExecutionError(
            "no Ray cluster: call tc.init(backend='ray') (a private cluster), "
            "tc.init(address='auto') or tc.init(address='host:port') first"
        )
    import ray

    if not ray.is_initialized():
        raise ExecutionError("the Ray connection is gone (ray.shutdown was called); "
                             "call tc.init again")
    return _session.cluster
