"""What runs on the Ray workers: the remote functions and the node workers.

Staged calls (:mod:`tensorc.runtime.ray.stages`) run on :class:`NodeWorker` actors,
one per node; as plain ``stage`` tasks when the schedule is not pinned (``ray_default``) or
after a node worker died. Every remote function returns two or more objects: the blocks,
then the id of the node the worker ran on, so the executor can check placement. Blocks are plain
numpy arrays; Ray stores them in the node's shared-memory object store and moves them when a
task on another node reads them, except an offered input block that a staged call on another
node reads as a :class:`~tensorc.runtime.ray.peer_blocks.PeerRead` argument: the call pulls
it from the worker of the node holding it (:meth:`NodeWorker.endpoint` starts that
worker's block server, :meth:`NodeWorker.offer` and :meth:`NodeWorker.withdraw` say what it
serves; :mod:`~tensorc.runtime.ray.peer_blocks`).

- ``generate(kind, shape, dtype, seed, value)`` — a block of ``tc.random`` (``seed`` is a
  tuple of ints; the generator is numpy's PCG64 seeded with it) or of a constant ``value``
  (``tc.zeros``, ``tc.ones``, ``.tc`` fills), made on the node;
- ``place(blocks)`` — a batch of driver blocks bound for the node the task runs on, each
  returned as its own object (``tc.asarray``, a numpy operand of a call);
- ``run(kernel, *blocks)`` — one block kernel (a cast of a result's blocks);
- ``whole(fn, op, operands, out_slices, *blocks)`` — a whole-array operation on operands
  stitched from their blocks, its result cut into blocks (all on the node it ran on);
- ``block(expr, reads, *blocks)`` — one task of a block program (a kernel expression of
  :mod:`tensorc.codegen.block_kernels` over its blocks); ``piece(shape, piece_slices, *blocks)`` —
  a block of another blocking stitched from stored blocks (a block program's input);
- ``stage(key, payload, threads, *blocks)`` — one of the staged calls
  (:mod:`tensorc.runtime.ray.stages`): the block steps of one node and stage, run in this worker
  with :func:`run_steps`; returns the exported steps' blocks, then the node's report (a
  plain tuple, :func:`wire_report`, which :func:`read_report` turns into a
  :class:`NodeReport`: the node id, carrying the call's measured peak RSS). Ray is
  told how many values it returns per call (``num_returns``). The steps, exports and the
  node's memory budget travel once per ``StagedCalls`` as an object (``payload``, a
  one-element list holding its ref, so Ray does not fetch it for every call); each worker
  keeps the last few it read by ``key``. A call made once sends its payload with it
  instead, as the tuple itself (``key`` unused), or, for a block program's wave, pickled
  (``bytes``, once per wave and kept by a recording that replays it:
  :mod:`tensorc.runtime.ray.block_replay`): no object to store and fetch. A wave's payload
  may also name results to *keep* and kept results to read (``(steps, exports, budget,
  kept_in, keep_out, held_out)``, keys relative to ``key``, the run's prefix): a result that only
  later calls on the same node read stays in this worker's memory (:data:`KEPT`,
  read-only as a Ray object is) instead of being stored and read back, its call returning
  it under a key, the last call reading it taking it back (:class:`NodeWorker` calls of
  one submitter run in submission order); an output's final block *held* there
  (:data:`HELD`, :mod:`~tensorc.runtime.ray.held`), or a block of an array
  ``tc.random``/``full`` made, which :meth:`NodeWorker.make` makes and holds, has no last
  reader: later calls of its run read it, a later program's call reads it by a
  :class:`HeldRead` argument (two or more travel as one :class:`HeldReads`; and makes an
  output block no statement wrote where a :class:`ZerosRead` argument says),
  :meth:`NodeWorker.peek` returns it for a gather, :meth:`NodeWorker.release` when
  something else reads it, :meth:`NodeWorker.drop` forgets it. An argument may be a
  :class:`~tensorc.stored.StoredArray` (passed by value, as its path): the call's read steps
  read their blocks from it, here. A wave's payload may end with the exports to *post*
  (``post_out``: ``(export, key)`` pairs): results the driver's units read, posted in this
  worker (:mod:`~tensorc.runtime.ray.posted`) by a :class:`Post` step as soon as they are
  made, and marked failed if the call fails; an argument may be a
  :class:`~tensorc.runtime.ray.peer_blocks.PostedRead`, a value the driver posts, pulled by
  a :func:`pull` step just before its first reader.

Memory in a call (:func:`run_steps`): a step's result is dropped after its last use in the
call (unless the call returns it); a block read from storage is read into a buffer of the
worker's :data:`READ_BUFFERS`, which takes it back when the call drops it. On one thread
the steps run in their order, each read just before the first step using it. On several
threads, ready steps run lowest first, computing before reading, and a read from storage
starts only when the bytes the call holds plus the block (and its decoding buffer,
:data:`~tensorc.planning.memory_fit.READ_OVERHEAD`) fit the node's budget, or nothing else
runs: the local task pool's admission rule (:mod:`tensorc.runtime.task_pool`). Each call
measures its worker's peak RSS (:class:`~tensorc.runtime.resident.PeakResident`).

Workers limit BLAS to ``TENSORC_WORKER_BLAS_THREADS`` threads (default 1: a call runs its
steps on as many threads as its node has CPUs, each step with one BLAS thread, so the node is
full without being oversubscribed), and keep freed block memory for their next blocks
(:func:`~tensorc.runtime.allocator.keep_freed_memory`: a result's pages are not faulted in
afresh in every call). A threaded call's steps run on the worker's one kept pool of threads
(:func:`~tensorc.runtime.task_pool.helper_pool`), whose allocator arenas that memory's
bound counts on. Task retries are on (``max_retries``), so Ray's lineage
reconstruction can recompute a lost block.
"""

from __future__ import annotations

import heapq
import math
import os
import pickle
from concurrent.futures import FIRST_COMPLETED, wait

import numpy as np

from tensorc.codegen.block_kernels import evaluate_block_expr
from tensorc.codegen.sparse_loops import compile_loops, csr_times_dense
from tensorc.planning.memory_fit import READ_OVERHEAD
from tensorc.runtime.allocator import keep_freed_memory
from tensorc.runtime.block_buffers import BlockBuffers, holds
from tensorc.runtime.ray import posted
from tensorc.runtime.ray.peer_blocks import (
    PostedRead,
    offer,
    pull_posted,
    pulled_args,
    reachable,
    serve,
    withdraw,
)
from tensorc.runtime.ray.stages import READ, RUN, Step
from tensorc.runtime.ray.step_threads import WORKER_ENV, StepThreads
from tensorc.runtime.resident import PeakResident
from tensorc.runtime.task_pool import blas_controller, helper_pool

MAX_RETRIES = 3

READ_BUFFERS = BlockBuffers(keep_bytes=256 * 2**20)
"""The buffers this worker's read steps read stored blocks into, reused by later reads and
later calls (:mod:`tensorc.runtime.block_buffers`): the buffer of a read block (the value
the read step made of it is the buffer or a view of it) goes back when the call drops that
value; a returned one never does. At most 256 MiB of them wait idle."""

_REMOTES: dict[str, object] = {}
_BLAS_SET = False


def _worker_setup() -> str:
    global _BLAS_SET
    import ray

    if not _BLAS_SET:
        blas_controller().limit(limits=int(os.environ.get("TENSORC_WORKER_BLAS_THREADS", "1")),
                                user_api="blas")  # kept: threaded calls lower it for a while
        keep_freed_memory()
        _BLAS_SET = True
    return ray.get_runtime_context().get_node_id()


def _generate(kind: str, shape: tuple[int, ...], dtype: str, seed: tuple[int, ...], value=0):
    node = _worker_setup()
    if kind == "full":
        return np.full(shape, value, dtype=dtype), node
    rng = np.random.default_rng(list(seed))
    return rng.random(shape, dtype=np.dtype(dtype)), node


def _place(blocks: list[np.ndarray]):
    """The blocks of one placement batch, each its own return, then the node id. They
    arrive together in one argument (one put and one transfer for the batch) and each
    return is stored in this node's object store."""
    node = _worker_setup()
    return (*blocks, node)


def _run(kernel, *blocks: np.ndarray):
    node = _worker_setup()
    return kernel(*blocks), node


def _make_many(name: str, calls: list[tuple]):
    """Blocks made on one node by the body of ``name`` (``generate`` or ``run``), one per
    entry of ``calls`` (that body's arguments), each its own return, then the node id: one
    task for a node's batch of blocks, not one each."""
    node = _worker_setup()
    body = _MAKERS[name]
    return (*(body(*args)[0] for args in calls), node)


_MAKERS = {"generate": _generate, "run": _run}
"""The bodies that make a block, by name (:func:`_make_many`, :meth:`NodeWorker.make`)."""


def _run_many(kernel, *args):
    """``kernel(*args)``'s several results, then the node id (a task with more returns)."""
    node = _worker_setup()
    return (*kernel(*args), node)


def _whole(fn, op: tuple, operands: tuple, out_slices: tuple, *blocks: np.ndarray):
    """``fn(op, *whole operands)`` cut into blocks: ``operands[k] = (shape, piece_slices, count)``
    stitches operand ``k`` from the next ``count`` blocks; returns the result's blocks at
    ``out_slices``, then the node id."""
    node = _worker_setup()
    values, at = [], 0
    for shape, piece_slices, count in operands:
        values.append(stitch(shape, piece_slices, blocks[at:at + count]))
        at += count
    result = fn(op, *values)
    return (*(np.array(result[s], order="C") for s in out_slices), node)


def _block(expr, reads: tuple, *blocks: np.ndarray):
    """One task of a block program: ``expr`` over the blocks ``reads`` name (in order);
    returns its results, then the node id."""
    node = _worker_setup()
    return (*evaluate_block_expr(expr, dict(zip(reads, blocks, strict=True))), node)


def _piece(shape: tuple[int, ...], piece_slices: tuple, *blocks: np.ndarray):
    """One block of another blocking, stitched from the stored blocks overlapping it."""
    return np.array(stitch(shape, piece_slices, blocks), order="C"), _worker_setup()


def stitch(shape: tuple[int, ...], piece_slices: tuple, pieces) -> np.ndarray:
    """One array of ``shape`` from stored blocks; ``piece_slices[k] = (into, out_of)``: the region
    slices block ``k`` fills and the slices of block ``k`` that fill them. A vector block in a
    matrix region is read as a column (a vector joined beside a matrix:
    :func:`~tensorc.runtime.ray.arrays.join_columns`)."""
    pieces = [p[:, None] if np.ndim(p) == 1 and len(shape) == 2 else p for p in pieces]
    if len(pieces) == 1:
        part = np.asarray(pieces[0][piece_slices[0][1]])  # a 0-d block indexed by () is a scalar
        if part.shape == tuple(shape):
            return part
    region = np.empty(shape, dtype=pieces[0].dtype)
    for (into, out_of), piece in zip(piece_slices, pieces, strict=True):
        region[into] = piece[out_of]
    return region


def _step_value(step, blocks: list):
    """The step's result, and the :data:`READ_BUFFERS` buffer it holds (or ``None``)."""
    if step.kind == RUN:
        return step.kernel(*blocks), None
    if step.kind == READ:  # blocks[0] is the stored array: the block is read here
        stored = blocks[0]
        extent = tuple(s.stop - s.start for s in step.read)
        buffer = READ_BUFFERS.take(extent, stored.dtype)
        block = stored.read(step.read, out=buffer)
        value = step.kernel(block, tuple(slice(0, n) for n in block.shape))
        if holds(value, buffer):
            return value, buffer
        READ_BUFFERS.give(buffer)  # the kernel copied it (a cast), or the read did not use it
        return value, None
    region = stitch(step.shape, step.piece_slices, blocks)
    return step.kernel(region, tuple(slice(0, n) for n in step.shape)), None


def run_steps(steps: tuple, args: tuple, exports: tuple[int, ...], threads: int = 1,
              budget: int | None = None, widen: bool = False) -> list:
    """Run a call's steps (``steps[j] = (step, inputs)``, inputs ``("x", i)`` an argument or
    ``("t", k)`` step ``k``'s result) and return the ``exports`` steps' results. A result is
    dropped after its last use unless exported. With ``threads > 1`` independent steps run
    on that many threads (BLAS gets the node's cores divided among them), reads from
    storage admitted within ``budget`` bytes (module docstring); ``widen``: a large step
    left alone gets all the cores' BLAS threads (a node worker's calls:
    :mod:`~tensorc.runtime.ray.step_threads`)."""
    last_use = {}
    for j, (_, inputs) in enumerate(steps):
        for kind, k in inputs:
            if kind == "t":
                last_use[k] = j
    keep = set(exports)
    results: list = [None] * len(steps)
    if threads <= 1 or len(steps) < 2:
        buffers: dict[int, np.ndarray] = {}  # step -> the read buffer its result holds
        for j, (step, inputs) in enumerate(steps):
            results[j], buffer = _step_value(step, [args[k] if kind == "x" else results[k]
                                                    for kind, k in inputs])
            if buffer is not None and j not in keep:
                buffers[j] = buffer
            for kind, k in inputs:
                if kind == "t" and last_use.get(k) == j and k not in keep:
                    results[k] = None
                    if k in buffers:
                        READ_BUFFERS.give(buffers.pop(k))
        return [results[k] for k in exports]
    return _ThreadedCall(steps, args, exports, budget, widen).run(threads)


def _nbytes(value) -> int:
    return int(getattr(value, "nbytes", 0) or 0)


def _largest(blocks) -> int:
    """The bytes of the largest of ``blocks`` (0 for what is not an array)."""
    return max(map(_nbytes, blocks), default=0)


class _ThreadedCall:
    """One call's steps on several threads (module docstring): ready steps lowest first,
    computing before reading, reads admitted within the budget, results dropped after their
    last use."""

    def __init__(self, steps: tuple, args: tuple, exports: tuple[int, ...],
                 budget: int | None, widen: bool = False) -> None:
        self.steps, self.args, self.exports, self.budget = steps, args, exports, budget
        self.widen = widen
        self.waiting_on = [sum(1 for kind, _ in inputs if kind == "t") for _, inputs in steps]
        self.consumers: list[list[int]] = [[] for _ in steps]
        for j, (_, inputs) in enumerate(steps):
            for kind, k in inputs:
                if kind == "t":
                    self.consumers[k].append(j)
        self.uses = [len(c) for c in self.consumers]
        self.keep = set(exports)
        self.results: list = [None] * len(steps)
        self.buffers: dict[int, np.ndarray] = {}  # step -> the read buffer its result holds
        self.live = 0  # bytes of the results held, plus the reads running
        self.computes: list[int] = []
        self.reads: list[int] = []
        for j, count in enumerate(self.waiting_on):
            if count == 0:
                self._ready(j)

    def _ready(self, j: int) -> None:
        heapq.heappush(self.reads if self.steps[j][0].kind == READ else self.computes, j)

    def _read_cost(self, j: int) -> int:
        step, inputs = self.steps[j]
        itemsize = self.args[inputs[0][1]].dtype.itemsize
        return int((1 + READ_OVERHEAD) * math.prod(step.shape) * itemsize)

    def _take(self, running: int) -> tuple[int, int] | None:
        """The next step to start and the bytes it reserves, or ``None`` (wait)."""
        computes, reads = self.computes, self.reads
        if computes and (not reads or computes[0] < reads[0]):
            return heapq.heappop(computes), 0
        if reads:
            cost = self._read_cost(reads[0])
            if (self.budget is None or (not running and not computes)
                    or self.live + cost <= self.budget):
                return heapq.heappop(reads), cost
        if computes:
            return heapq.heappop(computes), 0
        return None

    def _finish(self, j: int, found: tuple, reserved: int) -> None:
        value, buffer = found
        self.results[j] = value
        if buffer is not None and j not in self.keep:
            self.buffers[j] = buffer
        self.live += _nbytes(value) - reserved
        for kind, k in self.steps[j][1]:
            if kind == "t":
                self.uses[k] -= 1
                if self.uses[k] == 0 and k not in self.keep:
                    self.live -= _nbytes(self.results[k])
                    self.results[k] = None
                    if k in self.buffers:
                        READ_BUFFERS.give(self.buffers.pop(k))
        for consumer in self.consumers[j]:
            self.waiting_on[consumer] -= 1
            if self.waiting_on[consumer] == 0:
                self._ready(consumer)

    def run(self, threads: int) -> list:
        cores = os.cpu_count() or 1
        running: dict = {}  # future -> (step, bytes it reserved)
        with blas_controller().limit(limits=max(1, cores // threads), user_api="blas"):
            try:  # on the worker's kept threads (and so their allocator arenas)
                self._drive(helper_pool(threads), threads, cores, running)
            except BaseException:
                wait(running)  # a failed call's other steps end before it does, as they
                raise  # did when the call had a pool of its own
        return [self.results[k] for k in self.exports]

    def _drive(self, pool, threads: int, cores: int, running: dict) -> None:
        """Run every step, at most ``threads`` at once, on ``pool``; a large step alone
        gets all the cores' BLAS threads (:mod:`~tensorc.runtime.ray.step_threads`)."""
        blas = StepThreads(cores, threads) if self.widen else None
        try:
            while True:
                while len(running) < threads:
                    taken = self._take(len(running))
                    if taken is None:
                        break
                    j, reserved = taken
                    self.live += reserved
                    blocks = self._blocks(j)
                    if blas is not None:
                        blas.starting(self.steps[j][0], _largest(blocks),
                                      not running and self._nothing_ready())
                    running[pool.submit(_step_value, self.steps[j][0], blocks)] = (j, reserved)
                if not running:
                    return
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    j, reserved = running.pop(future)
                    self._finish(j, future.result(), reserved)
                if blas is not None and len(running) == 1 and self._nothing_ready():
                    (j, _), = running.values()
                    blas.left_alone(self.steps[j][0], _largest(self._blocks(j)))
        finally:
            if blas is not None:
                blas.done()

    def _nothing_ready(self) -> bool:
        return not self.computes and not self.reads

    def _blocks(self, j: int) -> list:
        """The blocks step ``j`` reads."""
        return [self.args[k] if kind == "x" else self.results[k]
                for kind, k in self.steps[j][1]]


_PAYLOADS: dict = {}
PAYLOADS_KEPT = 64
KEPT: dict = {}
"""Results kept in this worker for later calls on its node, by key (module docstring)."""
HELD: dict = {}
"""Final blocks held in this worker until read, by key (:mod:`~tensorc.runtime.ray.held`)."""


class NodeReport(str):
    """A staged call's report: the id of the node it ran on (a ``str``, compared and
    looked up as one) carrying the peak resident memory of the worker during the call
    (``peak_rss``, bytes; ``None`` where it cannot be measured), the bytes of input blocks
    it pulled from their holders' workers (``pulled``) and how many such blocks it read
    through Ray instead (``through_ray``; :mod:`~tensorc.runtime.ray.peer_blocks`)."""

    peak_rss: int | None = None
    pulled: int = 0
    through_ray: int = 0

    @staticmethod  # found by name when unpickled: Ray's cloudpickle sends a classmethod's
    def of(node: str, peak_rss: int | None,  # code by value (737 bytes a call)
           pulled: tuple[int, int] = (0, 0)) -> NodeReport:
        report = NodeReport(node)
        report.peak_rss = peak_rss
        report.pulled, report.through_ray = pulled
        return report

    def __reduce__(self):
        return NodeReport.of, (str(self), self.peak_rss, (self.pulled, self.through_ray))


def wire_report(node: str, peak_rss: int | None, pulled: tuple[int, int]) -> tuple:
    """A call's report as it travels: a plain tuple ``(node, peak_rss, pulled,
    through_ray)``, which Ray sends with msgpack. A :class:`NodeReport` goes through
    cloudpickle at both ends: 0.15-0.2 ms more on each call's reply here (0.51 against 0.35
    ms from a worker's return to the driver's ``ray.get``)."""
    return (node, peak_rss, *pulled)


def read_report(value) -> NodeReport | str | None:
    """The :class:`NodeReport` a call's returned report (:func:`wire_report`) stands for; a
    node id or ``None`` as it is (a task's node, a fold run in the driver)."""
    if type(value) is tuple:
        node, peak_rss, *pulled = value
        return NodeReport.of(node, peak_rss, tuple(pulled))
    return value


def _stage(key: str, payload: list | tuple | bytes, threads: int, *blocks: np.ndarray,
           widen: bool = False):
    """One staged call (module docstring); ``key`` names a payload sent as a ref, and is
    the prefix of the kept results' keys for a wave's payload sent as bytes."""
    node = _worker_setup()
    prefix = ""  # of the keys of the results this call keeps or reads kept
    if isinstance(payload, bytes):  # a block program's wave: key is the run's prefix
        found, prefix = pickle.loads(payload), key
    else:
        found = payload if isinstance(payload, tuple) else _PAYLOADS.get(key)
    if found is None:
        import ray

        found = ray.get(payload[0])
        if len(_PAYLOADS) >= PAYLOADS_KEPT:
            _PAYLOADS.pop(next(iter(_PAYLOADS)))
        _PAYLOADS[key] = found
    steps, exports, budget, *keeping = found
    kept_in, keep_out, held_out, post_out = (*keeping, (), (), (), ())[:4]
    try:
        return _staged(node, prefix, steps, exports, budget, threads, widen, blocks,
                       kept_in, keep_out, held_out)
    except BaseException:
        if post_out:  # the driver waits for these: told at once that they will not come
            posted.fail([prefix + key for _, key in post_out])
        raise


def _staged(node: str, prefix: str, steps, exports, budget, threads: int, widen: bool,
            blocks: tuple, kept_in, keep_out, held_out):
    """:func:`_stage` once its payload is read: the arguments bound, the steps run (their
    ``Post`` steps posting for the driver), the results kept and held, the exports and the
    report returned."""
    blocks, pulled = pulled_args(HeldReads.unpacked(blocks))
    if any(type(block) in _READS_HERE for block in blocks):
        blocks = tuple(b.value() if type(b) in _READS_HERE else b for b in blocks)
    if kept_in:  # kept results read, after the arguments (the last reader takes them)
        blocks = (*blocks, *(HELD[prefix + key] if prefix + key in HELD
                             else KEPT.pop(prefix + key) if last else KEPT[prefix + key]
                             for key, last in kept_in))
    _RUN_PREFIX[0] = prefix  # for its Post steps (one call at a time in a worker)
    if threads > 1 and any(step.kernel is pull for step, _ in steps):
        threads = 1  # in step order: a failing step is not kept waiting behind a pull
    with PeakResident() as resident:
        results = run_steps(steps, blocks, exports + tuple(step for step, _ in keep_out)
                            + tuple(step for step, _ in held_out), threads, budget, widen)
    kept = [(KEPT, key) for _, key in keep_out] + [(HELD, key) for _, key in held_out]
    for (into, key), value in zip(kept, results[len(exports):], strict=True):
        if isinstance(value, np.ndarray):
            value.flags.writeable = False  # as a Ray object is: no later step writes it
        into[prefix + key] = value
    report = wire_report(node, resident.peak, pulled)
    if not exports:  # the report alone (all its results kept): one value, not a 1-tuple
        return report
    return (*results[:len(exports)], report)


_RUN_PREFIX = [""]  # the prefix of the call running in this worker (_staged)


class Post:
    """A call's step that posts the result it reads for the driver
    (:mod:`~tensorc.runtime.ray.posted`), under ``key`` relative to the call's run
    prefix, as soon as it is made: the call may go on to wait for the driver's values."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    def __call__(self, value) -> None:
        posted.post(_RUN_PREFIX[0] + self.key, value)

    def __reduce__(self):
        return Post, (self.key,)


def pull(value):
    """A call's step that pulls a :class:`~tensorc.runtime.ray.peer_blocks.PostedRead`
    argument from its poster (the driver), just before the first step reading it, waiting
    for the post as long as the driver's server answers; any other argument is the value
    itself."""
    if type(value) is PostedRead:
        return pull_posted(value.endpoint, [value.key])[0]
    return value


class HeldRead:
    """A call's argument that names a final block this worker holds
    (:mod:`~tensorc.runtime.ray.held`): the call reads it here, as it is, not stored and
    fetched (its array still holds it)."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    def value(self) -> np.ndarray:
        return _held(self.key, take=False)

    def __reduce__(self):
        return HeldRead, (self.key,)


class HeldReads:
    """A call's :class:`HeldRead` arguments as its one last argument: ``keys[k]`` is the
    argument at position ``positions[k]``. One argument where a call would have one per
    held block it reads (16 for an MTTKRP's node call at N = 256): each costs Ray's
    serialisation in the driver and the worker, about 35 us for the pair here."""

    __slots__ = ("positions", "keys")

    def __init__(self, positions: tuple[int, ...], keys: tuple[str, ...]) -> None:
        self.positions, self.keys = positions, keys

    @staticmethod
    def packed(args: list) -> list:
        """``args`` with two or more :class:`HeldRead` among them as one last
        :class:`HeldReads`; else as they are."""
        positions = tuple(k for k, arg in enumerate(args) if type(arg) is HeldRead)
        if len(positions) < 2:
            return args
        taken = set(positions)
        return [*(arg for k, arg in enumerate(args) if k not in taken),
                HeldReads(positions, tuple(args[k].key for k in positions))]

    @staticmethod
    def unpacked(args: tuple) -> tuple:
        """A call's arguments as :meth:`packed` had them, the held blocks read here."""
        if not args or type(args[-1]) is not HeldReads:
            return args
        reads, rest = args[-1], iter(args[:-1])
        found = dict(zip(reads.positions, reads.keys, strict=True))
        return tuple(_held(found[k], take=False) if k in found else next(rest)
                     for k in range(len(args) - 1 + len(found)))

    def __reduce__(self):
        return HeldReads, (self.positions, self.keys)


class ZerosRead:
    """A call's argument that is an output block no statement wrote
    (:class:`~tensorc.runtime.ray.held.Unwritten`): the call makes it, zeros."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: tuple[int, ...], dtype: str) -> None:
        self.shape, self.dtype = shape, dtype

    def value(self) -> np.ndarray:
        return np.zeros(self.shape, self.dtype)

    def __reduce__(self):
        return ZerosRead, (self.shape, self.dtype)


_READS_HERE = (HeldRead, ZerosRead)
"""Arguments a call turns into blocks in its worker (``value()``), not Ray objects."""


def _held(key: str, take: bool = True) -> np.ndarray:
    """A held final block of this worker; no longer held if ``take``
    (:class:`NodeWorker.release`)."""
    try:
        return HELD.pop(key) if take else HELD[key]
    except KeyError:
        raise KeyError(f"this node worker does not hold block {key!r} (released or "
                       f"dropped already)") from None


class NodeWorker:
    """The worker that runs a node's staged calls: one Ray actor per node, pinned to it (its
    calls start in about a millisecond; a task's lease takes several). It holds the payloads
    it read, the results kept for its node's later calls and the final blocks held until
    read (:mod:`~tensorc.runtime.ray.held`). It dies with its node; the executor then
    re-runs the program as plain tasks, whose results Ray can rebuild by lineage."""

    def stage(self, key: str, payload: list, threads: int, *blocks: np.ndarray):
        return _stage(key, payload, threads, *blocks, widen=True)  # started with WORKER_ENV

    def node(self) -> str:
        return _worker_setup()

    def endpoint(self) -> tuple[str, int]:
        """The address of this worker's block server (started on the first ask)."""
        return serve()

    def offer(self, refs: list) -> int:
        """Serve the blocks ``refs`` (stored on this node) to calls on other nodes."""
        return offer(refs)

    def reaches(self, endpoint: tuple[str, int]) -> bool:
        """Whether this worker can connect to the block server at ``endpoint`` (the
        driver's: :mod:`~tensorc.runtime.ray.posted`)."""
        return reachable(endpoint)

    def withdraw(self, ids: list[bytes]) -> int:
        """Stop serving the blocks ``ids``."""
        return withdraw(ids)

    def forget(self, prefix: str) -> int:
        """Drop the kept results and held blocks whose key starts with ``prefix`` (a run
        that failed before its last readers ran); returns how many results are still kept
        for later calls."""
        for found in (KEPT, HELD):
            for key in [key for key in found if key.startswith(prefix)]:
                del found[key]
        posted.drop_run(prefix)
        return len(KEPT)

    def holding(self) -> int:
        """How many final blocks it holds until read."""
        return len(HELD)

    def make(self, name: str, made: list[tuple[str, tuple]]) -> str:
        """Make blocks of ``tc.random``/``full`` here by the body of ``name`` (``generate``
        or ``run``, as :func:`_make_many`) and hold them (:mod:`~tensorc.runtime.ray.held`):
        ``made[k] = (key, that body's arguments)``. Returns this node's id (the blocks'
        report)."""
        node = _worker_setup()
        body = _MAKERS[name]
        for key, args in made:
            block = body(*args)[0]
            block.flags.writeable = False  # as a Ray object is: no later step writes it
            HELD[key] = block
        return node

    def release(self, keys: list[str]):
        """The held final blocks ``keys`` (:mod:`~tensorc.runtime.ray.held`), each returned
        as its own object (``num_returns`` is their count) and no longer held."""
        found = tuple(_held(key) for key in keys)
        return found if len(found) > 1 else found[0]

    def peek(self, keys: list[str]) -> list:
        """The held final blocks ``keys``, still held, as one object (a gather's)."""
        return [_held(key, take=False) for key in keys]

    def drop(self, keys: list[str]) -> None:
        """Forget the held final blocks ``keys`` (their array died)."""
        for key in keys:
            HELD.pop(key, None)

    def warm(self) -> str:
        """Ready what reading a store needs (importing zarr and its first read, which starts
        its event loop and codecs, take a few tenths of a second), so that a session's
        first call does not pay it."""
        import zarr

        zarr.create_array(zarr.storage.MemoryStore(), shape=(1,), dtype="f8")[...]
        return _worker_setup()

    def host(self) -> tuple[str, int]:
        """``(this machine's identity, the cores this process may run on)``: nodes whose
        identity is equal share those cores (several Ray nodes started on one machine)."""
        import socket

        boot = ""
        if os.path.exists("/proc/sys/kernel/random/boot_id"):
            with open("/proc/sys/kernel/random/boot_id") as f:
                boot = f.read().strip()
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        return f"{socket.gethostname()}/{boot}", cores or os.cpu_count() or 1

    def sees(self, path: str) -> bool:
        """Whether ``path`` exists on this node (a file or store its calls would read)."""
        return os.path.exists(path)

    def nbytes(self, block: np.ndarray) -> int:
        """The size of a block it was sent (the calibration probe times the transfer)."""
        return int(block.nbytes)

    def relay(self, block: np.ndarray) -> np.ndarray:
        """A new copy of a block it was sent (the calibration's chain of dependent calls)."""
        return block.copy()

    def compute_probe(self, size: int = 256, repeats: int = 5, steps: int = 200):
        """``(BLAS flops per second on one core, seconds per trivial block step)`` here."""
        import time

        _worker_setup()
        a = np.random.default_rng(0).random((size, size))
        a @ a
        started = time.perf_counter()
        for _ in range(repeats):
            a @ a
        flops = 2 * size**3 * repeats / (time.perf_counter() - started)
        chain = tuple((Step(RUN, np.negative), (("x", 0),) if k == 0 else (("t", k - 1),))
                      for k in range(steps))
        started = time.perf_counter()
        run_steps(chain, (np.zeros(8),), (steps - 1,))
        return flops, (time.perf_counter() - started) / steps

    def sparse_probe(self, size: int = 4096, per_row: int = 40, width: int = 64,
                     repeats: int = 3) -> float:
        """The compiled CSR-times-dense loop's flops a second here on one thread (two per
        stored entry and dense column, as a sparse plan counts them): a ``size``² CSR with
        ``per_row`` sorted entries a row times a ``size`` × ``width`` matrix (the loops
        compiled first, untimed)."""
        import time

        import scipy.sparse as sp

        _worker_setup()
        rng = np.random.default_rng(0)
        columns = np.sort(rng.integers(0, size, (size, per_row)), axis=1).ravel()
        indptr = np.arange(0, size * per_row + 1, per_row, dtype=np.int32)  # as scipy's own
        matrix = sp.csr_array((rng.random(size * per_row), columns.astype(np.int32), indptr),
                              (size, size))
        dense = rng.random((size, width))
        compile_loops()  # both loops, the panelled one for a first large call's sake
        started = time.perf_counter()
        for _ in range(repeats):
            csr_times_dense(matrix, dense, np.float64)
        return 2 * size * per_row * width * repeats / (time.perf_counter() - started)


def node_worker(node_id: str):
    """A :class:`NodeWorker` actor on node ``node_id`` (hard affinity: Ray's soft affinity
    does not reliably place a zero-CPU actor on the node asked for)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    actor = _REMOTES.get("NodeWorker")
    if actor is None:
        actor = ray.remote(num_cpus=0)(NodeWorker)
        _REMOTES["NodeWorker"] = actor
    strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
    return actor.options(scheduling_strategy=strategy,
                         runtime_env={"env_vars": WORKER_ENV}).remote()


def remote(name: str, returns: int = 2):
    """The Ray remote function ``name`` (defined once per process, after ``ray`` is up);
    ``stage`` is returned with ``returns`` values per call."""
    fn = _REMOTES.get(name)
    if fn is None:
        import ray

        body = {"generate": _generate, "place": _place, "run": _run, "run_many": _run_many,
                "make_many": _make_many,
                "stage": _stage, "whole": _whole, "block": _block, "piece": _piece}[name]
        fn = ray.remote(num_returns=2, max_retries=MAX_RETRIES, num_cpus=1)(body)
        _REMOTES[name] = fn
    return fn if returns == 2 else fn.options(num_returns=returns)
