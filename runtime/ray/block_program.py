"""A block program's DAG on Ray: expanded ahead, placed task by task, submitted per node
and wave.

Contract: :func:`run_block_dag_on_ray` runs a
:class:`~tensorc.ir.block_program.BlockProgramIR`'s DAG
(:class:`~tensorc.codegen.block_dag.BlockDag`) on the connected cluster and returns ``(outputs
by name, stats)``. The driver expands the DAG in program order (a task's parent tasks come
before it, so each is placed after them) and places each on a node with
:class:`~tensorc.placement.block_placement.BlockPlacer` (LSHS simulating time and bytes,
owner-computes, or round-robin), the order the count choice simulates
(:func:`~tensorc.planning.block_counts.simulate`). Expanded by readiness instead, every
task reading only inputs came first, and LSHS put a solve's row sums of ``|A|`` on the
nodes holding the rows at time 0, copying blocks there while node 0 factored (n = 1536 on
4 Ray nodes: 18.9 MB moved and 4 calls, against 14.2 MB and one call). Placed tasks
gather in a :class:`~tensorc.runtime.ray.block_waves.Wave` of at most ``window`` tasks,
their arguments symbols (:mod:`~tensorc.runtime.ray.block_replay`) bound to this run's
blocks when the wave is submitted as one call per node and level on the node workers (a
chain of tasks on one node is one call, cut in parts where it would read more than
:data:`~tensorc.runtime.ray.block_waves.CALL_STORE_SHARE` of the node's object store;
cross-node edges are object refs between calls); the
driver then expands the next wave while the cluster runs, with at most two waves in flight,
so it holds the frontier, not the graph. A small task at a hop runs in the driver
(:meth:`_RayDagRun._in_driver`, :data:`~tensorc.runtime.ray.block_waves.DRIVER`): its wave
is sent only as the levels below it finish. An input stored in another blocking is cut to the
program's blocks by a placed step of the first call that reads each block
(:class:`~tensorc.runtime.ray.block_waves.Stitch`: its pieces are copied to that node, and the
block enters the object store only if a call elsewhere reads it). Outputs come back as
:class:`~tensorc.runtime.ray.arrays.DistributedArray` (blocks stay on the nodes that computed
them; a large final block stays in the memory of the node worker that made it until read:
:mod:`~tensorc.runtime.ray.held`). The frontier bookkeeping it shares with the local run is
:mod:`tensorc.runtime.block_frontier`.

A run records its placed waves (:mod:`~tensorc.runtime.ray.block_replay`); a later run
with an equal replay key (the same program and sizes, scheduler, dtype, window, cluster and
machine figures, and inputs of the same shapes, blocks and nodes) binds them to its own inputs
and submits them (:func:`_replay`) without walking or placing the DAG.

A node lost mid-run (its worker dies with it) makes the program run again task by task
(``per_task=True``: one soft-pinned Ray task per block task, each block a Ray object that
lineage reconstruction rebuilds), as einsum programs do.

Statistics: ``tasks``, ``remote_calls`` (calls submitted), ``waves``,
``driver_seconds_per_task`` (the driver's time expanding, placing and submitting, per task,
its tasks' runs included, its waits for their inputs not), ``tasks_per_node``,
``driver_tasks`` (tasks run in the driver), ``kept_results`` (results kept in their
node's worker for its later calls instead of stored,
:mod:`~tensorc.runtime.ray.block_waves`), ``held_results`` (final blocks held in their
worker until read, :mod:`~tensorc.runtime.ray.held`), ``call_threads`` (per
node, the most threads one of its calls ran its steps on: a node that runs a wave's work
alone on a machine it shares with other nodes uses the machine's cores,
:meth:`~tensorc.placement.block_placement.BlockPlacer.wave_threads`),
``inter_node_bytes`` (the placer's modelled copies),
``max_node_memory_bytes`` (the placer's modelled peak), ``max_node_plan_bytes`` (a node's
most simulated bytes beyond the input blocks it held from the start, as the budget counts
them),
``memory_limit_bytes`` (the node budget LSHS placed within, where a node had room) and
``over_memory_limit_tasks`` (tasks placed over it), ``direct_bytes`` and
``direct_through_ray`` (input bytes the calls pulled from the workers of the nodes holding
them, :mod:`~tensorc.runtime.ray.peer_blocks`, and the pulls that fell back to Ray; each
call pulls its own copy, so a block several calls on one node read counts once for each),
``node_peak_rss_bytes`` (each node worker's measured high-water mark during its calls;
``None`` after a per-task rerun) and ``peak_rss_bytes`` (the highest), ``peak_frontier``,
``run_seconds``, ``scheduler``, ``per_task`` (whether the run fell back to one task each)
and ``replayed`` (whether it submitted a recording; the placer's figures are then the
recorded run's).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import secrets
import time
from collections import Counter, deque
from functools import partial

import numpy as np

from tensorc.codegen.block_dag import BlockDag
from tensorc.codegen.block_layout import block_slices, tensor_bounds
from tensorc.errors import ExecutionError, TensorcError
from tensorc.ir.block_program import BlockProgramIR
from tensorc.placement.block_placement import BlockPlacer
from tensorc.placement.blocks import Blocks
from tensorc.placement.layout import live_node
from tensorc.planning.cost import machine
from tensorc.runtime.block_frontier import (
    _check_block_shape,
    _children,
    _flops_and_shapes,
    _Frontier,
    _output_arrays,
    _output_dtype,
)
from tensorc.runtime.ray import posted
from tensorc.runtime.ray import tasks as ray_tasks
from tensorc.runtime.ray.arrays import DistributedArray, sent_block
from tensorc.runtime.ray.block_replay import (
    INPUT,
    MADE,
    MAX_RECORDED_TASKS,
    Recording,
    forget,
    keep,
    recorded,
    replay_key,
)
from tensorc.runtime.ray.block_waves import (
    DRIVER,
    PENDING,
    REF,
    BlockKernel,
    Stitch,
    Wave,
    call_budget,
)
from tensorc.runtime.ray.calls import WorkerLost, node_workers, submit, wait_for_calls
from tensorc.runtime.ray.held import Unwritten, make_lost_again
from tensorc.runtime.ray.held import bind as bind_held
from tensorc.runtime.ray.held import drop as drop_held
from tensorc.runtime.ray.held import room as held_room
from tensorc.runtime.ray.inline import INLINE_BYTES

WINDOW = 1024
WAVES_IN_FLIGHT = 2
DRIVER_FLOPS = 32 * 2**20
"""The most flops of a block task the driver runs itself (:meth:`_RayDagRun._in_driver`)."""
_RUNS = itertools.count()
_SALT = secrets.token_hex(4)  # two drivers with one pid (in two containers) differ


def _run_token() -> str:
    """A run's key prefix, its own among every driver's on the cluster."""
    return f"{os.getpid()}.{_SALT}.{next(_RUNS)}/"


def run_block_dag_on_ray(program: BlockProgramIR, dag: BlockDag, inputs: dict, bounds, cluster,
                         scheduler: str = "lshs", window: int | None = None,
                         dtype=None, per_task: bool = False, memory_limit: int | None = None
                         ) -> tuple[dict, dict]:
    """Run on the Ray cluster (see the module docstring); ``window``: tasks per wave
    (default :data:`WINDOW`); ``memory_limit``: a node's budget, which LSHS places within
    where a node has room."""
    window = window or WINDOW
    if not per_task:
        key = replay_key(dag, inputs, scheduler, dtype, window, cluster,
                         (machine(), memory_limit, call_budget(cluster)))
        try:
            found = recorded(key)
            if found is not None and _room_for(found, cluster):
                return _replay(found, program, inputs, bounds, cluster, dtype)
            run = _RayDagRun(program, dag, inputs, bounds, cluster, scheduler, dtype,
                             record=key is not None, memory_limit=memory_limit)
            outputs, stats = run.run(window)
            keep(key, run.record)
            return outputs, stats
        except WorkerLost:
            forget(key)
            cluster.refresh()
            make_lost_again(cluster.node_ids)  # arrays a dead worker made: made again
    outputs, stats = _RayDagRun(program, dag, inputs, bounds, cluster, scheduler, dtype,
                                per_task=True, memory_limit=memory_limit).run(window)
    return outputs, stats


class _RayDagRun:
    """One block program's DAG on Ray: the frontier, what readers of each live block version
    pass (its symbol, or its ref task by task), the placer's simulated cluster and the final
    output blocks."""

    def __init__(self, program: BlockProgramIR, dag: BlockDag, inputs: dict, bounds, cluster,
                 scheduler: str, dtype, per_task: bool = False, record: bool = False,
                 memory_limit: int | None = None) -> None:
        figures = machine()
        self.program, self.dag, self.bounds = program, dag, bounds
        self.cluster, self.scheduler, self.dtype = cluster, scheduler, dtype
        self.placer = BlockPlacer(cluster.nodes, figures.cores_per_node, scheduler,
                                  flops_per_core=figures.blas_flops_per_core,
                                  bytes_per_second=figures.network_bytes_per_second,
                                  task_seconds=figures.task_seconds,
                                  hop_seconds=figures.call_seconds,
                                  small_hop_seconds=figures.small_call_seconds,
                                  inline_bytes=figures.inline_bytes,
                                  hosts=figures.hosts(cluster.nodes, cluster.node_ids),
                                  memory_cap=memory_limit if scheduler == "lshs" else None)
        self.memory_limit = self.placer.memory_cap
        self.binding = _Binding(program, inputs, bounds, cluster)
        self.source = _RayInputs(program, inputs, cluster, self.placer, dag, self.binding,
                                 None if per_task else self._stitch)
        self.frontier = _Frontier(dag)
        self.refs: dict = {}  # per live version, what readers pass: (REF, ref) or a symbol
        self.ids: dict = {}
        self.shapes: dict = {}
        self.uses: dict = {}
        self.finals: dict = {}
        self.in_flight: deque = deque()  # task by task: the refs of tasks not waited for
        self.waves_in_flight = _WavesInFlight(cluster)
        self.tasks = 0
        self.per_task = per_task
        self.wave = Wave()
        self.released: list = []  # symbols of versions the wave's units read last
        self.record = Recording() if record and not per_task else None
        self.waves = 0
        self.calls = 0
        self.threads: list[int] = []  # per node, the most threads a call of it ran on
        self.token = _run_token()  # the key prefix of its kept results
        self.kept = 0  # results kept in node workers (read only by their node's later calls)
        self.held: list = []  # final blocks held in node workers until read
        self.driver_tasks = 0  # tasks run in the driver (_in_driver)
        self.driver_waited = 0.0  # seconds the driver waited for its tasks' inputs
        self.itemsize = np.dtype(dtype or np.float64).itemsize
        # the most elements of a block a driver task reads or makes (_in_driver)
        self.driver_elements = min(cluster.inline_bytes, INLINE_BYTES) // self.itemsize

    def run(self, window: int) -> tuple[dict, dict]:
        """Expand, place and submit every task (module docstring); a run that fails
        leaves no result kept in a node worker."""
        try:
            return self._run(window)
        except BaseException:  # even mid-flush: calls already sent may have kept results
            if not self.per_task:
                _forget_kept(self.cluster, self.token, self.held)
            raise

    def _run(self, window: int) -> tuple[dict, dict]:
        started = time.perf_counter()
        waiting = 0.0
        self.frontier.start()
        tasks = self.dag.walk()
        task = next(tasks, None)
        while task is not None:
            self.submit(task)
            task = next(tasks, None)
            if self.per_task:
                while len(self.in_flight) > window:
                    waited = time.perf_counter()
                    _wait(self.in_flight.popleft())
                    waiting += time.perf_counter() - waited
            elif len(self.wave) >= window or task is None:
                self.flush()
        if self.per_task:
            waited = time.perf_counter()
            _wait(list(self.in_flight))
            waiting += time.perf_counter() - waited
        else:
            self.waves_in_flight.drain()
            waiting += self.waves_in_flight.waiting + self.driver_waited
        finished = time.perf_counter()  # every task of the walk was placed: nothing to check
        outputs = _output_arrays(self.program, self.bounds, self.finals,
                                 partial(_output, self.program, self.dtype, self.cluster))
        placer = self.placer
        stats = {"backend": "ray", "tasks": self.tasks, "scheduler": self.scheduler,
                 "tasks_per_node": list(placer.tasks_per_node),
                 "inter_node_bytes": placer.moved_bytes(),
                 "max_node_memory_bytes": max(placer.state.peak),
                 "max_node_plan_bytes": max(placer.plan_peak),
                 "memory_limit_bytes": self.memory_limit,
                 "over_memory_limit_tasks": placer.over_cap,
                 "peak_frontier": self.frontier.peak,
                 "remote_calls": self.tasks if self.per_task else self.calls,
                 "waves": self.waves, "per_task": self.per_task,
                 "kept_results": self.kept, "held_results": len(self.held),
                 "driver_tasks": self.driver_tasks,
                 "call_threads": list(self.threads),
                 "replayed": False}
        if self.record is not None:  # lists copied: the caller may change its own
            self.record.stats = {key: list(value) if isinstance(value, list) else value
                                 for key, value in stats.items()}
            self.record.tasks = self.tasks
        stats.update(_measured(self.waves_in_flight, self.tasks,
                               finished - started - waiting, started))
        return outputs, stats

    def flush(self) -> None:
        """Submit the wave, its arguments bound to this run's blocks; its results read later
        (or final output blocks) become :data:`~tensorc.runtime.ray.block_replay.MADE`."""
        wave = self.wave
        pending = [key for key, source in self.refs.items() if source[0] == PENDING]
        finals = [key for key, found in self.finals.items() if found[0][0] == PENDING]
        read_later = {self.refs[key][1:] for key in pending}
        wanted = read_later | {self.finals[key][0][1:] for key in finals}
        threads = self.placer.wave_threads(self.cluster.cpus)
        self.threads = ([max(t, u) for t, u in zip(self.threads, threads, strict=True)]
                        if len(self.threads) == len(threads) else threads)
        held = self._holdable(finals, wanted - read_later)
        prepared = wave.prepare(wanted, self.cluster, held)
        made, reports, waited = prepared.submit(self.cluster, threads,
                                                f"{self.token}{self.waves}/", self.binding)
        self.driver_waited += waited
        self.held.extend(made[result] for _, result, _, _ in prepared.held)
        self.binding.made.append(made)
        for symbol in self.released:  # the wave's calls read them last
            self.binding.release(symbol)
        self.released = []
        self.kept += prepared.kept
        if self.record is not None and self.tasks > MAX_RECORDED_TASKS:
            self.record = None  # too large to keep: the run holds its frontier, not its calls
        if self.record is not None:
            self.record.add_wave(prepared, threads)
        for key in pending:
            self.refs[key] = (MADE, self.waves, *self.refs[key][1:])
        for key in finals:
            source, node, shape = self.finals[key]
            self.finals[key] = ((REF, made[source[1:]]), node, shape)
            if self.record is not None:
                self.record.finals[key] = ((MADE, self.waves, *source[1:]), node, shape)
        for result in wanted - read_later:  # final blocks only: self.finals holds them
            del made[result]
        self.waves_in_flight.add(reports)
        self.waves += 1
        self.calls += len(prepared.calls)
        self.wave = Wave()
        self.placer.new_wave()

    def _holdable(self, finals: list, final_only: set) -> dict:
        """The wave's results that may stay in their node's worker until read
        (:mod:`~tensorc.runtime.ray.held`), with their sizes: final blocks no later wave
        reads, too large to travel in the call's reply (a small one costs no store, and
        the reply keeps it safe from its node's loss), on a node whose worker has room for
        them."""
        if self.per_task:
            return {}
        room = _room(self.cluster)
        holdable = {}
        for key in finals:
            source, node, shape = self.finals[key]
            result = source[1:]
            nbytes = math.prod(shape) * _output_dtype(self.program, key[0], self.dtype).itemsize
            if (result in final_only and node in room
                    and self.cluster.inline_bytes < nbytes <= room[node]):
                holdable[result] = nbytes
                room[node] -= nbytes
        return holdable

    def _read(self, edges) -> tuple[list, list, list, dict, list]:
        """The arguments (``(REF, ref)`` task by task, else symbols:
        :mod:`~tensorc.runtime.ray.block_replay`), reads, simulated block ids and shapes of
        a task's input edges; a version whose last reader this is is released (in a wave,
        once the wave is submitted)."""
        args, reads, inputs_ids, edge_shapes, sizes = [], [], [], {}, []
        keys = set()  # the versions read that the run counts readers of
        for edge in edges:
            if edge.task is None:
                found = self.source.block(edge.read.tensor, edge.coords)
                key = found if isinstance(found, str) else None  # a stitched block's key
            else:
                key = (edge.task, edge.result)
            if key is None:
                ref, block, shape = found
                ref = (REF, ref) if self.per_task else (INPUT, edge.read.tensor, edge.coords)
            else:
                ref, block, shape = self.refs[key], self.ids[key], self.shapes[key]
                keys.add(key)
            args.append(ref)
            reads.append(edge.read)
            inputs_ids.append(block)
            edge_shapes[edge.read] = shape
            sizes.append(self.placer.state.size[block])
        for key in keys:
            self.uses[key] -= 1
            if not self.uses[key]:
                del self.uses[key]
                source = self.refs.pop(key)  # a ref task by task: dropped here
                if source[0] == MADE:  # dropped once this wave's calls hold it
                    self.released.append(source)
        return args, reads, list(dict.fromkeys(inputs_ids)), edge_shapes, sizes

    def _in_driver(self, node: int, args: list, in_shapes, out_shapes: list,
                   flops: float) -> bool:
        """Whether a task placed on ``node`` runs in the driver instead
        (:data:`~tensorc.runtime.ray.block_waves.DRIVER`): it reads only results of this
        wave's tasks, one of them made on another node or in the driver (a hop: such a
        result comes back to the driver inside its call's reply, and the reading call would
        have been sent from here), every block it reads or makes is at most the cluster's
        inline size and :data:`~tensorc.runtime.ray.inline.INLINE_BYTES`, and it does at
        most :data:`DRIVER_FLOPS`. A TSQR's tree above its leaves runs here: its small
        factors would otherwise hop from node to node, a call each."""
        if flops > DRIVER_FLOPS or not args or any(arg[0] != PENDING for arg in args):
            return False
        if any(math.prod(shape) > self.driver_elements for shape in (*in_shapes, *out_shapes)):
            return False
        return any(self.wave.node[arg[1]] != node for arg in args)

    def _stitch(self, name: str, coords: tuple, shape: tuple, piece_slices: tuple,
                pieces: list, nbytes: int, uses: int) -> str:
        """An input block cut from the stored blocks ``pieces`` (``(stored coords,
        version)`` each), placed like a task (the placer copies the pieces to its node) and
        run as a :class:`~tensorc.runtime.ray.block_waves.Stitch` step of that node's call;
        returns the key its readers find it under."""
        node, made = self.placer.stitch([version for _, version in pieces], nbytes, uses)
        unit = self.wave.add(node, Stitch(shape, piece_slices),
                             [(INPUT, name, stored) for stored, _ in pieces],
                             [self.placer.state.size[version] for _, version in pieces])
        key = f"input {name}{list(coords)}"
        self.refs[key], self.ids[key], self.shapes[key] = (PENDING, unit, 0), made, shape
        self.uses[key] = uses
        return key

    def submit(self, task) -> None:
        """Place and submit ``task`` (its parents were placed before it); its children
        learn that it was (:meth:`~tensorc.runtime.block_frontier._Frontier.finished`)."""
        dag, program, placer = self.dag, self.program, self.placer
        edges = self.frontier.edges.pop(task, None)
        if edges is None:  # a parent task comes later, or a read no statement writes
            dag.parents(task)  # raises E-unwritten at that read
            raise ExecutionError(f"block task {task} comes before a task it reads")
        args, reads, inputs_ids, edge_shapes, sizes = self._read(edges)
        out_shapes, flops = _flops_and_shapes(dag, task, edge_shapes)
        per_result, distinct = _children(dag, task)
        written = dag.written(task)
        itemsize = self.itemsize
        out_ids = []
        for j, ((readers, final), shape) in enumerate(zip(per_result, out_shapes, strict=True)):
            keep = final and program.tensors[written[j][0]].kind == "output"
            out_ids.append(placer.add_version(math.prod(shape) * itemsize, len(readers),
                                              retained=keep))
        node = placer.place(inputs_ids, sum(placer.state.size[b] for b in out_ids), flops,
                            placer.home(dag, written[0]))
        placer.run(out_ids, inputs_ids, node, flops)
        expr = dag.sites[task[0]].assign.value
        if self.per_task:
            made = submit(self.cluster, "block", node, expr, tuple(reads),
                          *(ref for _, ref in args), returns=len(out_shapes) + 1)
            self.in_flight.append(made[-1])
            made = [(REF, ref) for ref in made[:-1]]
        else:
            if self._in_driver(node, args, edge_shapes.values(), out_shapes, flops):
                node = DRIVER
                self.driver_tasks += 1
            unit = self.wave.add(node, BlockKernel(expr, tuple(reads), len(out_shapes)), args,
                                 sizes)
            made = [(PENDING, unit, j) for j in range(len(out_shapes))]
            if node == DRIVER:
                node = self.cluster.driver_index  # where its blocks are recorded
        for j, ((readers, final), shape) in enumerate(zip(per_result, out_shapes, strict=True)):
            key = (task, j)
            tensor, coords = written[j]
            if final and program.tensors[tensor].kind == "output":
                self.finals[(tensor, coords)] = (made[j], node, shape)
            if readers:
                self.refs[key], self.ids[key], self.shapes[key] = made[j], out_ids[j], shape
                self.uses[key] = len(readers)
        self.tasks += 1
        self.frontier.finished(distinct)


def _output(program, dtype, cluster, name, edges, blocks) -> DistributedArray:
    """Output ``name`` from its final blocks; a block no statement wrote is zeros made by
    no call (:class:`~tensorc.runtime.ray.held.Unwritten`, one per shape, on the driver's
    node if it is ever put in Ray)."""
    kind = _output_dtype(program, name, dtype)
    placed = Blocks(tuple(e[-1] for e in edges), kind, edges)
    unwritten: dict = {}
    for coords, found in blocks.items():
        region = block_slices(edges, coords)
        if found is None:
            want = tuple(s.stop - s.start for s in region)
            ref = unwritten.setdefault(want, Unwritten(want, kind.str))
            node = 0
        else:
            (_, ref), node, shape = found
            _check_block_shape(name, coords, shape, region)
        placed.refs[coords] = ref
        placed.nodes[coords] = node
    return DistributedArray(placed, tuple(min(g, cluster.nodes) for g in placed.grid))


def _highest(known: list | None, measured: list) -> list:
    """Each node's highest peak RSS: ``known`` so far and the ``measured`` of calls just
    waited for (``None`` where a node measured none)."""
    known = known or [None] * len(measured)
    return [a if b is None else b if a is None else max(a, b)
            for a, b in zip(known, measured, strict=False)]


def _measured(in_flight: _WavesInFlight, tasks: int, driver_seconds: float,
              started: float) -> dict:
    """A run's statistics measured on the clock and on the nodes (not recorded)."""
    peaks = in_flight.peaks
    return {"node_peak_rss_bytes": peaks,
            "direct_bytes": in_flight.pulled[0], "direct_through_ray": in_flight.pulled[1],
            "peak_rss_bytes": max((p for p in peaks or () if p is not None), default=None),
            "driver_seconds_per_task": driver_seconds / max(1, tasks),
            "run_seconds": time.perf_counter() - started}


def _replay(recording: Recording, program: BlockProgramIR, inputs: dict, bounds, cluster,
            dtype) -> tuple[dict, dict]:
    """Submit a recorded run's waves bound to these ``inputs`` (the module docstring of
    :mod:`~tensorc.runtime.ray.block_replay`): no DAG walk, no placement, no call formed
    or pickled. A run that fails leaves no result kept in a node worker."""
    started = time.perf_counter()
    token = _run_token()
    binding = _Binding(program, inputs, bounds, cluster)
    in_flight = _WavesInFlight(cluster)
    held = []
    driver_waited = 0.0  # seconds the driver waited for its tasks' inputs
    try:
        for w, (wave, released) in enumerate(zip(recording.waves, recording.drops,
                                                 strict=True)):
            made, reports, waited = wave.prepared.submit(cluster, wave.threads, f"{token}{w}/",
                                                         binding)
            driver_waited += waited
            held.extend(made[result] for _, result, _, _ in wave.prepared.held)
            binding.made.append(made)
            for symbol in released:  # its last readers were just submitted
                binding.release(symbol)
            in_flight.add(reports)
        in_flight.drain()
    except BaseException:  # calls already sent may have kept results
        _forget_kept(cluster, token, held)
        raise
    finished = time.perf_counter()
    finals = {key: ((REF, binding(symbol)), node, shape)
              for key, (symbol, node, shape) in recording.finals.items()}
    outputs = _output_arrays(program, bounds, finals, partial(_output, program, dtype, cluster))
    stats = {key: list(value) if isinstance(value, list) else value
             for key, value in recording.stats.items()}
    stats.update(replayed=True, waves=len(recording.waves),
                 remote_calls=sum(len(wave.prepared.calls) for wave in recording.waves),
                 kept_results=sum(wave.prepared.kept for wave in recording.waves),
                 held_results=len(held))
    stats.update(_measured(in_flight, recording.tasks,
                           finished - started - in_flight.waiting - driver_waited, started))
    return outputs, stats


def _room(cluster) -> dict[int, int]:
    """Per node with a worker, the bytes of final blocks it may still hold."""
    share = cluster.node_store_bytes
    return {node: held_room(worker, share) for node, worker in enumerate(node_workers(cluster))}


def _room_for(recording: Recording, cluster) -> bool:
    """Whether the node workers have room for the final blocks ``recording`` holds."""
    wanted: Counter = Counter()
    for wave in recording.waves:
        for node, _, _, nbytes in wave.prepared.held:
            wanted[node] += nbytes
    room = _room(cluster)
    return all(node in room and nbytes <= room[node] for node, nbytes in wanted.items())


class _WavesInFlight:
    """The report refs of submitted waves: at most :data:`WAVES_IN_FLIGHT` are left unwaited
    for; ``waiting`` is the time spent waiting, ``peaks`` each node's highest peak RSS
    the calls measured (``None`` until one was waited for)."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.waves: deque = deque()
        self.waiting = 0.0
        self.peaks: list | None = None
        self.pulled = [0, 0]  # bytes pulled from peers, blocks read through Ray instead

    def add(self, reports: list) -> None:
        self.waves.append(reports)
        while len(self.waves) > WAVES_IN_FLIGHT:
            self._wait(self.waves.popleft())

    def drain(self) -> None:
        self._wait([report for wave in self.waves for report in wave])
        self.waves.clear()

    def _wait(self, reports: list) -> None:
        waited = time.perf_counter()
        self.peaks = _highest(self.peaks, _wait_calls(self.cluster, reports, self.pulled))
        self.waiting += time.perf_counter() - waited


def _forget_kept(cluster, token: str, held: list) -> None:
    """Tell every node worker to drop the results a failed run kept under ``token``, and
    forget the final blocks it held (``held``: their workers may have been replaced since);
    not waited for (a dead worker is fine)."""
    for worker in cluster.workers:
        with contextlib.suppress(Exception):  # the error that failed the run matters more
            worker.forget.remote(token)
    posted.drop_run(token)  # the driver's values the run handed over
    drop_held(held)


class _Binding:
    """What a run's symbolic arguments (:mod:`~tensorc.runtime.ray.block_replay`) are bound
    to when its calls are submitted: an input block (of a numpy input, cut here once for
    every call that reads it, by value when small, else put in Ray; of an array on the
    cluster, its ref, or where a call reads it in the worker holding it, its key), or a
    result an earlier
    wave returned (``made[wave]``, dropped by :meth:`release` after its last readers were
    submitted)."""

    def __init__(self, program: BlockProgramIR, inputs: dict, bounds, cluster) -> None:
        self.inputs, self.cluster = inputs, cluster
        self.edges = {name: tensor_bounds(program, name, bounds) for name in program.inputs()}
        self.made: list[dict] = []  # per wave, {(unit, j): ref} of the results it returned
        self.cut: dict = {}

    def __call__(self, symbol, node: int | None = None):
        """The value of ``symbol`` for a call on ``node``: a block an input array holds in
        that node's worker is its :class:`~tensorc.runtime.ray.held.Held` (the submission
        reads it there if it is still held once the call's every argument is bound:
        :meth:`~tensorc.runtime.ray.block_waves.Prepared.submit`); read from any other
        node, the array's held blocks are stored."""
        if symbol[0] == MADE:
            return self.made[symbol[1]][symbol[2:]]
        _, name, coords = symbol
        value = self.inputs[name]
        if not isinstance(value, np.ndarray):
            zeros = value.unwritten(coords)
            if zeros is not None:  # made by the call, even once put in Ray for others
                return ray_tasks.ZerosRead(zeros.shape, zeros.dtype)
            workers = self.cluster.workers  # the submission's (it asked for them)
            return bind_held(value.layout.refs[coords], workers, node)  # zeros: above
        if symbol not in self.cut:
            self.cut[symbol] = sent_block(value, self.edges[name], coords)
        return self.cut[symbol]

    def release(self, symbol) -> None:
        """Drop the ref of an earlier wave's result (a :data:`MADE` symbol)."""
        del self.made[symbol[1]][symbol[2:]]


def _wait(refs) -> None:
    """``ray.get`` that raises a task's own tensorc error (``LinAlgError`` from a kernel)
    rather than Ray's wrapper around it."""
    import ray

    try:
        ray.get(refs)
    except ray.exceptions.RayTaskError as err:
        cause = getattr(err, "cause", None)
        if isinstance(cause, TensorcError):
            raise cause from None
        raise


def _wait_calls(cluster, reports, pulled: list) -> list:
    """:func:`~tensorc.runtime.ray.calls.wait_for_calls` (the peak RSS each node measured;
    the calls' pulled counts added into ``pulled``), raising a kernel's own tensorc error
    (``LinAlgError``) rather than the execution error wrapping it."""
    try:
        return wait_for_calls(cluster, reports, pulled)
    except ExecutionError as err:
        cause = getattr(err.__cause__, "cause", None)
        if isinstance(cause, TensorcError):
            raise cause from None
        raise


class _RayInputs:
    """The input blocks on Ray, cut to the program's bounds on first use: ``block`` returns
    ``(ref, version, shape)`` (a numpy input's block cut by the run's ``binding``, once), or,
    for a block cut from several stored blocks when the run
    gives a ``stitcher`` (waves, not one task each), the key ``stitcher`` registered it under
    (it runs as a step of the call that places it); without one, a Ray task cuts it on the
    node of its first element."""

    def __init__(self, program, inputs, cluster, placer, dag, binding, stitcher=None) -> None:
        self.program, self.inputs, self.cluster, self.placer = program, inputs, cluster, placer
        self.binding = binding
        self.edges = binding.edges
        self.made: dict = {}
        self.stored: dict = {}  # (input, stored block) -> its version in the placer
        self.dag = dag
        self.stitcher = stitcher

    def block(self, name: str, coords: tuple[int, ...]):
        key = (name, coords)
        if key not in self.made:
            self.made[key] = self._make(name, coords)
        return self.made[key]

    def _stored_version(self, name: str, stored: Blocks, coords: tuple) -> int:
        """The placer's version of stored block ``coords`` of input ``name`` (on its node)."""
        key = (name, coords)
        if key not in self.stored:
            nbytes = math.prod(s.stop - s.start for s in stored.block_slices(coords)) * \
                np.dtype(stored.dtype).itemsize
            node = live_node(stored.nodes.get(coords), self.placer.nodes)  # read by any
            self.stored[key] = self.placer.add_version(nbytes, 1 << 30, node=node,  # stitch
                                                       retained=True)
        return self.stored[key]

    def _make(self, name, coords):
        edges = self.edges[name]
        region = block_slices(edges, coords)
        shape = tuple(s.stop - s.start for s in region)
        value = self.inputs[name]
        uses = len(self.dag.input_readers(name, coords))
        nbytes = math.prod(shape) * value.dtype.itemsize
        if isinstance(value, np.ndarray):  # a small block travels inside the calls
            return (self.binding((INPUT, name, coords)),  # sent by the run: not given
                    self.placer.add_version(nbytes, uses, node=0, retained=True,
                                            given=False), shape)
        stored = value.blocks if self.stitcher is None else value.layout  # task by task: refs
        if stored.bounds == edges:
            node = live_node(stored.nodes.get(coords), self.placer.nodes)
            if value.unwritten(coords) is not None:  # zeros: made by the call, no copy
                nbytes = 0
            block = self.placer.add_version(nbytes, uses, node=node, retained=True)
            return stored.refs[coords], block, shape
        pieces = stored.pieces(region)
        piece_slices = tuple((into, out_of) for _, into, out_of in pieces)
        if self.stitcher is not None:
            found = [(c, self._stored_version(name, stored, c)) for c, _, _ in pieces]
            return self.stitcher(name, coords, shape, piece_slices, found, nbytes, uses)
        node = live_node(stored.first_node(region), self.placer.nodes)
        ref, _ = submit(self.cluster, "piece", node, shape, piece_slices,
                        *(stored.refs[c] for c, _, _ in pieces))
        return ref, self.placer.add_version(nbytes, uses, node=node, retained=True,
                                            given=False), shape  # made by the run


