"""Submitting staged calls: one Ray call per node and stage.

Contract: ``CallRunner(cluster).run(staged, inputs, pinned=..., measure=...)`` takes a
:class:`~tensorc.runtime.ray.stages.StagedCalls` and one :class:`~tensorc.placement.blocks.Blocks`
per operand (Ray refs bound), submits every call without waiting between stages, waits for
them, and returns the result's ``Blocks`` (each block stays on the node that computed it, or
in the driver when a fold made it there: below) and the new layouts of repartitioned
operands. Statistics are in ``executor.last_run``.

Policy:

- each call is ``stage(key, payload, threads, *argument_refs)`` on the node's
  :class:`~tensorc.runtime.ray.tasks.NodeWorker` actor when the schedule is pinned (a plain
  task that Ray places for ``ray_default``); it runs its steps on ``threads`` threads (the
  node's CPUs). Arguments are ObjectRefs, so Ray moves blocks between nodes and frees them
  (a block kept in the driver, :class:`~tensorc.runtime.ray.inline.Inline`, travels by value
  inside the call's message); the executor keeps no other block in the driver. Calls are
  submitted under one process-wide lock in stage order, so every worker's queue follows
  one topological order of all calls in flight (an actor runs its calls in the order they
  were submitted: no cycle can form);
- tensorc trusts the affinity it asked for (a live node runs what it is offered): the nodes
  of result blocks are known without asking Ray. Every call also returns the id of the node
  it ran on; ``ran_on`` in the statistics comes from those, read after the wait;
- a run that waits for its calls (not batched, not measured, no ``pending``) runs the
  *folds* (:attr:`~tensorc.runtime.ray.stages.StagedCalls.folds`: the calls that finish a
  reduction across nodes, adding up other calls' results and multiplying them by operand
  blocks, into result blocks no call reads: a contraction's last stage) in the driver, when
  every block they read or make (a product's intermediates too) is at most the cluster's
  inline size and :data:`~tensorc.runtime.ray.inline.INLINE_BYTES`, their arguments take at most
  :data:`FOLD_BYTES` and their products at most :data:`FOLD_MULTIPLIES`. Ray returns such
  results inside the calls' replies, and keeps such blocks made by tasks in the driver, so
  they are here already; a stage of calls costs a round of messages (2-5 ms on this
  machine's 4 nodes) where the folds cost well under a millisecond. The result's blocks
  stay in the driver (:class:`~tensorc.runtime.ray.inline.Inline`, recorded on the
  driver's node); ``remote_calls`` counts the calls Ray ran, ``driver_folds`` those run
  here, and ``ran_on`` gives their tasks the driver's node; an operand block only they
  read is not recorded as copied to their node (``transfer_bytes`` still counts the plan's
  transfers). Spark's ``reduce`` merges its partitions' results in the driver the same way;
- input blocks read on another node are recorded as copies there (``Blocks.copies``);
- an argument ``("st", position)`` of a call is bound to that operand itself, a
  :class:`~tensorc.stored.StoredArray` (``stored=``), passed by value (as its path): the
  call reads its blocks from the store on its node (:mod:`tensorc.runtime.ray.stages`);
- every call reports the peak RSS its worker measured
  (:class:`~tensorc.runtime.ray.tasks.NodeReport`); ``node_peak_rss_bytes`` in
  ``last_run`` is the highest per node (``None`` until the calls were waited for);
- the executor waits in short polls, re-reading the live nodes; a Ray failure, or no progress
  for ``TENSORC_RAY_TIMEOUT`` seconds (default 600), raises
  :class:`~tensorc.errors.ExecutionError` naming the call's tasks and any node that died.
  A :class:`~tensorc.errors.StorageError` a call raised (a missing or corrupt chunk, a
  store the node cannot open) is raised as it is, naming the path and chunk, not wrapped.
  Soft affinity lets Ray run a call elsewhere when its node is gone, and lineage
  reconstruction (task retries are on) recomputes blocks lost with a node; a run that
  meets a dead node worker runs its calls again as plain tasks, after the arrays the node
  workers made and held whose worker or node died are made again by tasks
  (:func:`~tensorc.runtime.ray.held.make_lost_again`);
- a submission binds every call's operand blocks before it submits any call: a held block
  read on another node is released (stored by its holder) before a call is queued on that
  holder, where it would wait for the call to end. A call's held-block reads travel as
  one argument (:class:`~tensorc.runtime.ray.tasks.HeldReads`);
- transfers are always counted from the calls' arguments (``transfer_bytes``, free: the
  staged calls know them). With ``measure=True`` the executor also reads Ray's object
  directory before and after the run (``ray.experimental.get_object_locations``): a copy on a
  node other than the block's producer, not there before, was moved by Ray. An argument Ray
  inlined into the task message has no location; it is counted from the arguments. That
  reading is not part of ``run_seconds`` (it is ``measure_seconds``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence

from tensorc.errors import ExecutionError, StorageError, TensorcError, first_line
from tensorc.placement.blocks import Blocks
from tensorc.runtime.ray import peer_blocks
from tensorc.runtime.ray import tasks as ray_tasks
from tensorc.runtime.ray.cluster import RayCluster
from tensorc.runtime.ray.held import Held, flush_drops, make_lost_again, read_in_place
from tensorc.runtime.ray.held import bind as bind_held
from tensorc.runtime.ray.inline import INLINE_BYTES, Inline, made_here
from tensorc.runtime.ray.stages import INPUT, STORED, StagedCalls

POLL_SECONDS = 1.0

ENDPOINT_WAIT = 5.0
"""Seconds after node workers start within which a submission waits for them to say where
their block servers listen (a worker starting takes a second or two here); after that, a
worker that has not answered yet is passed over, not waited for, until it answers."""

IN_NO_STORE = (Held, Inline)
"""Blocks no object store holds: a block held in its worker, and one kept in the driver
(which travels inside the messages of the calls that read it)."""

FOLD_BYTES = 4 * 2**20
"""A run's folds are run in the driver (module docstring) only while their arguments
together take at most this many bytes ..."""
FOLD_MULTIPLIES = 16 * 2**20
"""... and their products at most this many multiplications (a few milliseconds of numpy
at worst; a block of 64³ multiply-adds is 262,144)."""

SUBMITTING = threading.RLock()
"""Held while calls are submitted (every worker's queue in one global order), and while an
array's held blocks are released: a call binding a held block by key cannot be sent after
another thread's release of it. Reentrant: a submission's binding may release."""


def node_workers(cluster: RayCluster) -> list:
    """The :class:`~tensorc.runtime.ray.tasks.NodeWorker` of every live node, started once
    per cluster membership (a node that died takes its worker's place in the order with
    it). Every submission asks for them: the held blocks of arrays that died are dropped
    first (:func:`~tensorc.runtime.ray.held.flush_drops`), and their offers withdrawn
    (:func:`~tensorc.runtime.ray.peer_blocks.flush_withdraws`)."""
    flush_drops()
    if cluster.workers_epoch != cluster.epoch or len(cluster.workers) != cluster.nodes:
        cluster.workers = [ray_tasks.node_worker(node) for node in cluster.node_ids]
        cluster.workers_epoch = cluster.epoch
        cluster.endpoints = ([worker.endpoint.remote() for worker in cluster.workers]
                             if peer_blocks.offering(cluster) else [])
        cluster.endpoints_by = time.monotonic() + ENDPOINT_WAIT
    peer_blocks.flush_withdraws(cluster.workers)
    return cluster.workers


def peer_endpoints(cluster: RayCluster, offered_only: bool = True) -> list | None:
    """The addresses of the node workers' block servers, in node order (``None`` for a
    worker that has not answered yet, or died; :mod:`~tensorc.runtime.ray.peer_blocks`),
    or ``None`` when the node workers are not started, the direct path is off or no array
    offers blocks. Asked once per set of workers, at their start (only where arrays offer
    their blocks: several nodes, the path on); read here when a call needs them.
    ``offered_only=False``: whether or not an array offers blocks (a block program's
    driver hands values over through them, :mod:`~tensorc.runtime.ray.posted`)."""
    import ray

    if (not peer_blocks.ENABLED or (offered_only and not peer_blocks.offered_any())
            or not cluster.endpoints
            or cluster.workers_epoch != cluster.epoch):
        return None
    asked = [found for found in cluster.endpoints if isinstance(found, ray.ObjectRef)]
    if asked:  # answered by now, unless a worker is still starting: looked at again later
        wait = max(0.0, cluster.endpoints_by - time.monotonic())
        ready, _ = ray.wait(asked, num_returns=len(asked), timeout=wait)
        answered = set(ready)
        endpoints = []
        for found in cluster.endpoints:
            if isinstance(found, ray.ObjectRef) and found in answered:
                try:
                    found = ray.get(found)
                except ray.exceptions.RayError:  # a worker dead at once serves nothing
                    found = None
            endpoints.append(found)
        cluster.endpoints = endpoints
    return [None if isinstance(found, ray.ObjectRef) else found
            for found in cluster.endpoints]


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
                   existing: dict) -> tuple[dict, set]:
    """The copies Ray made between nodes of each of ``refs``: ``{ref: [(node index, bytes)]}``
    for every copy on a node other than the block's producer (``producer_of[ref]``, a hex
    node id) that ``existing`` (:func:`object_copies` before) did not list; and the refs Ray
    has a location for (the others were inlined into task messages)."""
    unique = list(dict.fromkeys(refs))
    locations = _settled_locations(unique)
    copied: dict = {}
    located = set()
    for ref in unique:
        info = locations.get(ref) or {}
        holders = set(info.get("node_ids") or ())
        if holders:
            located.add(ref)
        size = int(info.get("object_size") or 0)
        for node in holders - {producer_of.get(ref)} - existing.get(ref, set()):
            index = cluster.index_of(node)
            if index is not None:
                copied.setdefault(ref, []).append((index, size))
    return copied, located


def submit(cluster: RayCluster, name: str, node: int | None, *args, returns: int = 2):
    """Call remote function ``name`` on node index ``node`` (soft affinity; ``None`` or a
    node no longer live: Ray decides); returns its ``returns`` refs."""
    if node is None or not 0 <= node < len(cluster.node_ids):
        strategy = "DEFAULT"
    else:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        strategy = NodeAffinitySchedulingStrategy(cluster.node_ids[node], soft=True)
    options = {"scheduling_strategy": strategy}
    if returns != 2:
        options["num_returns"] = returns
    return ray_tasks.remote(name).options(**options).remote(*args)


def worker_lost_errors() -> tuple[type, ...]:
    """Ray's errors that say a node worker is gone: it died (with its node, or alone), a
    block it made died with it, or it was started on a node that died before it ran
    (``ActorUnschedulableError``: a worker asked for while Ray still listed the node)."""
    import ray

    return (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError,
            ray.exceptions.ActorUnschedulableError)


def wait_for_calls(cluster: RayCluster, reports: list, pulled: list | None = None
                   ) -> list[int | None]:
    """Wait for calls submitted without waiting (``CallRunner.run(pending=...)``) and return
    the peak RSS measured on each node (:func:`node_peaks`), adding the calls' bytes pulled
    from peers and blocks read through Ray instead into ``pulled`` (``[bytes, blocks]``)
    when given: raises :class:`WorkerLost` when
    a node worker died (the caller runs again, waiting each time), a call's
    :class:`~tensorc.errors.StorageError` as it is, and
    :class:`~tensorc.errors.ExecutionError` for any other failure."""
    import ray

    try:
        reported = [ray_tasks.read_report(r) for r in ray.get(reports)]
    except worker_lost_errors() as err:
        cluster.refresh()
        cluster.restart_workers()  # a worker whose node lives may have died
        raise WorkerLost from err
    except ray.exceptions.RayError as err:
        raise_storage_error(err)
        raise ExecutionError(f"a call of the program failed on Ray: {err}") from err
    if pulled is not None:
        for report in reported:
            pulled[0] += getattr(report, "pulled", 0)
            pulled[1] += getattr(report, "through_ray", 0)
    return node_peaks(cluster, reported)


def fetch_results(cluster: RayCluster, refs: list, what: str, timed: bool = True) -> list:
    """``ray.get`` of the call results the driver computes on (``what`` names that work in
    errors), waiting at most ``TENSORC_RAY_TIMEOUT`` seconds when ``timed`` (results of
    calls already waited for; a block program's driver tasks wait for calls still running,
    as its waits for calls do, untimed): raises :class:`WorkerLost` when a node worker died
    (as :func:`wait_for_calls` does), a call's own tensorc error (``LinAlgError`` from a
    kernel) or :class:`~tensorc.errors.StorageError` as it is, and
    :class:`~tensorc.errors.ExecutionError` for any other failure."""
    import ray

    limit = float(os.environ.get("TENSORC_RAY_TIMEOUT", "600")) if timed else None
    try:
        return ray.get(refs, timeout=limit)
    except ray.exceptions.GetTimeoutError as err:
        raise ExecutionError(f"Ray returned no block for {what} within {limit:g} s; set "
                             "TENSORC_RAY_TIMEOUT to wait longer") from err
    except worker_lost_errors() as err:
        cluster.refresh()
        cluster.restart_workers()  # a worker whose node lives may have died
        raise WorkerLost from err
    except ray.exceptions.RayError as err:
        cause = getattr(err, "cause", None)
        if isinstance(cause, TensorcError):
            raise cause from err
        raise ExecutionError(f"Ray failed returning a block for {what}: "
                             f"{type(err).__name__}: {first_line(err)}") from err


def raise_storage_error(err: BaseException) -> None:
    """Raise the :class:`~tensorc.errors.StorageError` a remote call raised (Ray wraps it in
    a ``RayTaskError``), unchanged: its message names the path and the chunk."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, StorageError):
        raise cause from err


def node_peaks(cluster: RayCluster, reported: Sequence) -> list[int | None]:
    """The highest peak RSS the calls' reports (:class:`~tensorc.runtime.ray.tasks.NodeReport`)
    measured on each node, in node order (``None`` for a node with no measured call)."""
    peaks: list[int | None] = [None] * cluster.nodes
    for report in reported:
        node = cluster.index_of(report)
        peak = getattr(report, "peak_rss", None)
        if node is not None and peak is not None:
            peaks[node] = max(peak, peaks[node] or 0)
    return peaks


def put_payloads(contents) -> list[tuple[str, list]]:
    """Each call's ``(steps, exports)`` put in Ray once: ``(key, [ref])`` per call, the key
    the workers cache it by, the ref in a list so Ray does not fetch it for every call."""
    import ray

    refs = [ray.put(content) for content in contents]
    return [(ref.hex(), [ref]) for ref in refs]


def submit_stage(cluster: RayCluster, workers, node: int, key: str, payload: list | tuple,
                 args: Sequence, returns: int, pinned: bool = True,
                 threads: int | None = None) -> list:
    """One staged call on node ``node``'s worker (``workers[node]``), or as a ``stage`` task
    (soft-pinned when ``pinned`` and the node is live; Ray decides otherwise) when there is
    no such worker; returns its ``returns`` refs, the reported node id last. The call runs
    its steps on ``threads`` threads (default: the node's CPUs)."""
    live = node < cluster.nodes
    if threads is None:
        threads = max(1, int(cluster.cpus[node])) if live else 1
    args = ray_tasks.HeldReads.packed(args)  # the held blocks it reads: one argument
    if workers is not None and node < len(workers):
        refs = workers[node].stage.options(num_returns=returns).remote(
            key, payload, threads, *args)
    else:
        refs = submit(cluster, "stage", node if live and pinned else None, key, payload,
                      threads, *args, returns=returns)
    return [refs] if returns == 1 else list(refs)


def _read_by_folds_only(staged: StagedCalls, folds) -> set[tuple]:
    """``(operand block, node)`` of the blocks that only ``folds`` (run in the driver) read
    on a node: the plan's transfer there never happened."""
    if not folds:  # every run asks: no pass over the calls' arguments without folds
        return set()
    reads: dict[bool, set] = {True: set(), False: set()}
    for c, call in enumerate(staged.calls):
        reads[c in folds].update((arg, call.node) for arg in call.args if arg[0] == INPUT)
    return reads[True] - reads[False]


class WorkerLost(Exception):
    """A node worker died during a run (its node did)."""


class CallRunner:
    """Submit staged calls to Ray; see the module docstring."""

    def __init__(self, cluster: RayCluster) -> None:
        self.cluster = cluster
        self.last_run: dict = {}

    def run(self, staged: StagedCalls, inputs: Sequence[Blocks], *, pinned: bool = True,
            measure: bool = False, pending: list | None = None, batch=None,
            stored: dict | None = None) -> tuple[Blocks, dict[int, Blocks]]:
        """Submit ``staged`` and wait for it (``stored``: the operands read from storage,
        by position, that its read steps read); with a ``pending`` list (and no ``measure``)
        return as soon as it is submitted, its calls' report refs appended to ``pending``
        for the caller to wait on (:func:`wait_for_calls`) after later calls that read
        its results are submitted too. With a ``batch``
        (:class:`~tensorc.runtime.ray.call_batch.CallBatch`, pinned and no ``measure``) the
        calls join the batch instead: the returned ``Blocks`` hold stand-ins, made real refs
        when the caller flushes the batch."""
        import ray

        cluster = self.cluster
        started = time.perf_counter()
        dead_before = set(cluster.dead_nodes)
        existing = self._input_copies(inputs) if measure else {}
        measure_seconds = time.perf_counter() - started
        started = time.perf_counter()
        batched = batch is not None and pinned and not measure
        stored = stored or {}
        folds = (self._driver_folds(staged)
                 if not batched and pending is None and not measure else frozenset())
        if batched:
            returned = batch.add(staged, inputs, stored)
        else:
            payloads = self._payloads(staged)
            workers = node_workers(cluster) if pinned else None
            returned = self._submit(staged, inputs, payloads, workers, pinned, stored, folds)
        submitted = time.perf_counter()
        reports = [refs[-1] for refs in returned]  # None for a fold run here
        peaks = None
        if batched:
            finished = submitted
            ran_on_call = [call.node for call in staged.calls]  # what was asked for
        elif pending is not None and not measure:
            pending.extend(reports)
            finished = submitted
            ran_on_call = [call.node for call in staged.calls]  # what was asked for
        else:
            try:
                self._wait(staged, reports, dead_before, workers is not None)
                self._fold(staged, folds, inputs, returned)
            except WorkerLost:
                # a node (and its worker) died mid-run: run the calls again as plain
                # tasks, soft-pinned, which Ray can rebuild by lineage when a block is lost
                # (arrays the dead worker made are made again by tasks first)
                cluster.refresh()
                make_lost_again(cluster.node_ids)
                returned = self._submit(staged, inputs, payloads, None, pinned, stored, folds)
                reports = [refs[-1] for refs in returned]
                self._wait(staged, reports, dead_before, False)
                try:
                    self._fold(staged, folds, inputs, returned)
                except WorkerLost as err:
                    raise ExecutionError(
                        "a block the driver's last stage reads was lost with its node, run "
                        f"again as tasks too: {first_line(err.__cause__)}") from err
            finished = time.perf_counter()
            reported = [ray_tasks.read_report(r)
                        for r in ray.get([ref for ref in reports if ref is not None])]
            nodes = iter(reported)
            driver = self.cluster.driver_index  # where the folds ran
            ran_on_call = [driver if ref is None else cluster.index_of(next(nodes))
                           for ref in reports]
            peaks = node_peaks(cluster, reported)
        ran_on = {task: ran_on_call[c] for c, call in enumerate(staged.calls)
                  for task in call.tasks}
        folded_only = _read_by_folds_only(staged, folds)
        for source, node, _ in staged.transfers:
            if source[0] == INPUT and (source, node) not in folded_only:
                inputs[source[1]].add_copies(source[2], (node,))
        result = self._blocks(staged.outputs, staged.output_bounds, staged.output_nodes,
                              inputs, returned, dtype=staged.dtype,
                              shape=staged.output_shape)
        relaid = {}
        for position, sources in staged.relaid.items():
            layout = staged.relaid_layouts[position]
            relaid[position] = self._blocks(sources, layout.bounds, layout.nodes, inputs,
                                            returned, dtype=inputs[position].dtype,
                                            shape=layout.shape)
        if batched:
            batch.track(result)
            for blocks in relaid.values():
                batch.track(blocks, keep=True)
        measured = relaid_measured = None
        if measure:
            begun = time.perf_counter()
            measured, relaid_measured = self._measure(staged, inputs, returned, ran_on_call,
                                                      existing)
            measure_seconds += time.perf_counter() - begun
        self.last_run = {
            "run_seconds": finished - started,
            "submit_seconds": submitted - started,
            "ran_on": ran_on,
            "remote_calls": len(staged.calls) - len(folds),
            "driver_folds": len(folds),
            "folded_tasks": sorted(t for c in folds for t in staged.calls[c].tasks),
            "stages": staged.levels,
            "measured_node_recv_bytes": measured,
            "measured_node_repartition_bytes": relaid_measured,
            "measure_seconds": measure_seconds if measure else None,
            "node_peak_rss_bytes": peaks,
        }
        return result, relaid

    def _submit(self, staged: StagedCalls, inputs, payloads, workers,
                pinned: bool, stored: dict, folds=frozenset()) -> list[list]:
        """Submit every call but the ``folds`` (on the node workers, or as tasks when
        ``workers`` is None, soft-pinned when ``pinned``); returns each call's refs, the
        reported node id last (a fold's are ``None``, until :meth:`_fold` runs it)."""
        cluster = self.cluster
        returned: list[list] = []

        def bind(source: tuple, node: int):
            if source[0] == STORED:
                return stored[source[1]]
            if source[0] == INPUT:  # an inline block is its value: it travels in the call
                return bind_held(inputs[source[1]].refs[source[2]], workers, node)
            return returned[source[1]][source[2]]

        with SUBMITTING:  # every worker's queue stays in one global topological order
            # operand blocks bound first: a held block read on another node is released
            # before any call queues on its holder (a release after its holder's call
            # would wait for that call to end); one released since is read by its ref
            inputs_bound = {(c, k): bind(source, call.node)
                            for c, call in enumerate(staged.calls) if c not in folds
                            for k, source in enumerate(call.args) if source[0] == INPUT}
            for c, (call, (key, payload)) in enumerate(zip(staged.calls, payloads,
                                                           strict=True)):
                if c in folds:
                    returned.append([None] * (len(call.exports) + 1))
                    continue
                args = [inputs_bound[c, k] if source[0] == INPUT else bind(source, call.node)
                        for k, source in enumerate(call.args)]  # then held blocks read here
                returned.append(submit_stage(
                    cluster, workers, call.node, key, payload,
                    [read_in_place(a) for a in args], len(call.exports) + 1, pinned))
        return returned

    def _driver_folds(self, staged: StagedCalls) -> frozenset[int]:
        """The folds of ``staged`` (:attr:`StagedCalls.folds`) this run does in the driver:
        all of them when every block they read or make is at most the cluster's inline
        size and :data:`INLINE_BYTES` (Ray brings such results back inside the calls'
        replies, and keeps such blocks of tasks in the driver: they are here already),
        their arguments take at most :data:`FOLD_BYTES` and their products at most
        :data:`FOLD_MULTIPLIES` multiplications; else none. (A block held in a worker is
        larger than the inline size: no fold reads one.)"""
        limit = min(self.cluster.inline_bytes, INLINE_BYTES)
        folds = staged.folds
        if (not folds or any(largest > limit for largest, _, _ in folds.values())
                or sum(total for _, total, _ in folds.values()) > FOLD_BYTES
                or sum(work for _, _, work in folds.values()) > FOLD_MULTIPLIES):
            return frozenset()
        return frozenset(folds)

    def _fold(self, staged: StagedCalls, folds, inputs, returned: list[list]) -> None:
        """Run the ``folds`` in this process on the results (waited for) and operand blocks
        they read, and put each fold's results in ``returned`` as
        :class:`~tensorc.runtime.ray.inline.Inline` blocks."""
        if not folds:
            return
        order = sorted(folds)
        refs = [bind_held(inputs[arg[1]].refs[arg[2]], None, None) if arg[0] == INPUT
                else returned[arg[1]][arg[2]] for c in order for arg in staged.calls[c].args]
        remote = [ref for ref in refs if type(ref) is not Inline]
        fetched = iter(fetch_results(self.cluster, remote, "the driver's last stage"))
        values = iter([ref.value if type(ref) is Inline else next(fetched) for ref in refs])
        for c in order:
            call = staged.calls[c]
            args = tuple(next(values) for _ in call.args)
            results = ray_tasks.run_steps(call.steps, args, call.exports)
            returned[c] = [made_here(result) for result in results] + [None]

    def _payloads(self, staged: StagedCalls) -> list[tuple[str, list]]:
        """Each call's steps as an object in Ray, put once per ``StagedCalls`` and session."""
        kept = staged.payloads
        if kept is None or kept[0] is not self.cluster:
            kept = (self.cluster, put_payloads((c.steps, c.exports, c.budget)
                                               for c in staged.calls))
            staged.payloads = kept
        return kept[1]

    def _blocks(self, sources: dict, bounds, nodes: dict, inputs, returned, *,
                dtype=None, shape=None) -> Blocks:
        out = Blocks(tuple(shape) if shape is not None else tuple(b[-1] for b in bounds),
                     dtype, tuple(bounds), epoch=self.cluster.epoch)
        for coords, source in sources.items():
            out.nodes[coords] = nodes[coords]
            if source[0] == INPUT:  # an input block passed through: never held by two
                stored = inputs[source[1]]
                out.refs[coords] = bind_held(stored.refs[source[2]], None, None)
                if source[2] in stored.reported:
                    out.reported[coords] = stored.reported[source[2]]
            elif returned[source[1]][-1] is None:  # folded here: the block is in the driver
                out.refs[coords] = returned[source[1]][source[2]]
                out.nodes[coords] = self.cluster.driver_index
            else:
                out.refs[coords] = returned[source[1]][source[2]]
                out.reported[coords] = returned[source[1]][-1]
        return out

    def _wait(self, staged: StagedCalls, pending: list, dead_before,
              on_workers: bool) -> None:
        import ray

        limit = float(os.environ.get("TENSORC_RAY_TIMEOUT", "600"))
        call_of = {ref: c for c, ref in enumerate(pending) if ref is not None}
        waiting = list(call_of)
        last_progress = time.monotonic()
        while waiting:
            ready, waiting = ray.wait(
                waiting, num_returns=len(waiting), timeout=POLL_SECONDS, fetch_local=False
            )
            if ready:
                last_progress = time.monotonic()
                try:
                    ray.get(ready)
                except worker_lost_errors() as err:
                    if on_workers:  # a worker died, or a block it made died with it
                        self.cluster.restart_workers()  # its node may live
                        raise WorkerLost from err
                    raise self._failure(staged, call_of, ready, err, dead_before) from err
                except ray.exceptions.RayError as err:
                    raise_storage_error(err)
                    raise self._failure(staged, call_of, ready, err, dead_before) from err
            if waiting:
                self.cluster.refresh()
            if waiting and time.monotonic() - last_progress > limit:
                died = self._died(dead_before)
                raise ExecutionError(
                    f"Ray made no progress for {limit:.0f} s with {len(waiting)} call(s) "
                    f"outstanding{died}; set TENSORC_RAY_TIMEOUT to wait longer"
                )

    def _died(self, dead_before) -> str:
        dead = [n for n in self.cluster.dead_nodes if n not in dead_before]
        return f"; node(s) died during the run: {', '.join(dead)}" if dead else ""

    def _failure(self, staged, call_of, ready, err, dead_before) -> ExecutionError:
        import ray

        where = "a call"
        for ref in ready:
            try:
                ray.get(ref, timeout=0)
            except ray.exceptions.RayError:
                if ref in call_of:
                    call = staged.calls[call_of[ref]]
                    where = (f"the call on node {call.node} (stage {call.level}, "
                             f"{len(call.steps)} block step(s))")
                break
        self.cluster.refresh()
        lost = ("; an input block was lost with the node worker that made or held it"
                if isinstance(err, ray.exceptions.RayActorError) else "")  # as plain tasks
        return ExecutionError(
            f"Ray failed running {where}: {type(err).__name__}: {first_line(err)}{lost}"
            f"{self._died(dead_before)}"
        )

    def _input_copies(self, inputs) -> dict:
        """The nodes holding a copy of each input block before the run: what Ray's object
        directory lists, and the copies the driver tracks (``Blocks.copies``: a directory
        entry can lag behind a fetch that already finished, on a loaded machine)."""
        stored = [(blocks, coords, ref) for blocks in inputs
                  for coords, ref in blocks.refs.items()
                  if type(ref) not in IN_NO_STORE]
        found = object_copies(self.cluster, [ref for _, _, ref in stored])
        ids = self.cluster.node_ids
        for blocks, coords, ref in stored:
            tracked = {ids[n] for n in blocks.copies.get(coords, ()) if 0 <= n < len(ids)}
            if tracked:
                found[ref] = found.get(ref, set()) | tracked
        return found

    def _measure(self, staged, inputs, returned, ran_on_call,
                 existing) -> tuple[list[int], list[int]]:
        """Bytes each node received, in all and to re-lay operands out, read from Ray's
        object directory (module docstring)."""
        ids = self.cluster.node_ids
        producer_of: dict = {}
        refs = []
        for blocks in inputs:
            for coords, ref in blocks.refs.items():
                if type(ref) in IN_NO_STORE:  # read in place or sent by value: never copied
                    continue
                node = blocks.nodes.get(coords)
                producer_of[ref] = ids[node] if node is not None and node < len(ids) else None
                refs.append(ref)
        for c, call_refs in enumerate(returned):
            node = ran_on_call[c]
            for ref in call_refs[:-1]:
                producer_of[ref] = ids[node] if node is not None and node < len(ids) else None
                refs.append(ref)
        copied, located = measure_copies(self.cluster, refs, producer_of, existing)

        def ref_of(source):
            return (inputs[source[1]].refs[source[2]] if source[0] == INPUT
                    else returned[source[1]][source[2]])

        per_node = [0] * self.cluster.nodes
        for copies in copied.values():
            for node, size in copies:
                per_node[node] += size
        for source, node, nbytes in staged.transfers:  # inlined: counted from the arguments
            if ref_of(source) not in located:
                per_node[node] += nbytes
        relaid = [0] * self.cluster.nodes
        for source, node, nbytes in staged.repartition_transfers:
            ref = ref_of(source)
            if ref not in located:
                relaid[node] += nbytes
            for holder, size in copied.get(ref, ()):
                if holder == node:
                    relaid[node] += size
        return per_node, relaid
