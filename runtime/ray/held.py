"""Final blocks held in the node worker that made them, stored in Ray only when read; and
blocks no statement wrote, made by no call (:class:`Unwritten`).

Held blocks are of two kinds: a block program's final blocks (below), and the blocks of an
array ``tc.random``, ``zeros``, ``ones`` or ``full`` made (:func:`made_by_workers`: the node
workers made them, :meth:`~tensorc.runtime.ray.tasks.NodeWorker.make`). Both are read,
peeked, released and dropped alike. Only the second kind outlives its worker:
:func:`make_lost_again` (a run that met a dead worker calls it before it runs again) has
every such array one of whose makers died make itself again by tasks, from its recipe.

Contract: a block program's final output block that no later call reads may stay in the
memory of the :class:`~tensorc.runtime.ray.tasks.NodeWorker` whose call made it (under a key
in its ``HELD``, as results read by later calls on that node are kept in its ``KEPT``),
instead of being returned by the call and stored in the object store: the call then ends
when its arithmetic does (a call's stores are 8-10 ms of a Cholesky at n = 1536 on this
machine's 4 nodes), as a Dask worker keeps the results it computed. The output's
:class:`~tensorc.placement.blocks.Blocks` holds a :class:`Held` for such a block where an
ObjectRef would be:

- a later call on the holding node, a block program's, an einsum's or a block-by-block
  operation's, reads a held block in place (:func:`bind` binds the block itself for a
  call its holder runs, and :func:`read_in_place` passes a
  :class:`~tensorc.runtime.ray.tasks.HeldRead` once the call's every argument is bound;
  the block stays held); a call on any other node, a plain task, or a block passed
  through unchanged into another array (an einsum's output, a re-laid-out copy) binds its
  ref, the array's held blocks released first (two arrays never share a held block);
- :func:`peek` is a gather's: each worker returns its blocks as one object (one store
  instead of one per block) and keeps holding them;
- :func:`release` turns an array's held blocks into ObjectRefs, one call per worker that
  returns each block as its own object (Ray stores them then, on the node that made them);
  the array does so the first time anything else reads its blocks' refs
  (:attr:`~tensorc.runtime.ray.arrays.DistributedArray.blocks`: a store to disk, say, or
  :func:`bind` for a call elsewhere). The store is not saved there, only moved to that read;
  one that never comes, or comes later, is not waited for;
- :func:`drop` is what an array that dies unreleased does: it only marks and appends (the
  garbage collector may call it with any lock held); the bytes are counted out and the
  workers told at the next :func:`flush_drops` (every submission asks for the node
  workers, and every release and gather, first);
- a worker holds at most :data:`HELD_SHARE` of its node's share of the object store
  (:func:`room`, counted in this process: what was reserved and not yet released or
  dropped); a run holds what fits and returns the rest as before.

A held block dies with its worker, as a block a dead node stored does (unlike a stored
block, it also dies with a worker killed on a living node, by Ray's memory monitor say,
and lineage cannot rebuild it). A block program's: a gather then raises
:class:`~tensorc.errors.NodeLostError`; a later program reading it fails as one whose
input block was lost does (its calls fall back to tasks, which raise Ray's error). A made
array's: it is made again (:func:`make_lost_again`, and a gather that meets a dead maker).
Room is counted per worker: a node whose worker was replaced may hold its old worker's
blocks beside the new one's share. A block program's blocks small enough to travel in a
call's reply are never held: they cost no store, and the reply keeps them in the driver,
safe from their node's loss; a made array is held whole when its largest block is above
the inline size (its small edge blocks too).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections import defaultdict

import numpy as np

from tensorc.runtime.ray.inline import Inline
from tensorc.runtime.ray.tasks import HeldRead

HELD_SHARE = 0.5
"""Share of a node's object store its worker may hold in final blocks."""

_HELD_BYTES: dict = defaultdict(int)  # worker handle -> bytes held, in this process's count
_DROPPED: list = []  # Helds whose arrays died unreleased, their bytes not yet counted out
_UNSENT: dict = defaultdict(list)  # worker handle -> keys to drop, counted out, not yet sent
_LOCK = threading.Lock()
_MADE: weakref.WeakSet = weakref.WeakSet()  # arrays node workers made: made_by_workers


class Held:
    """A final block held in ``worker`` (a NodeWorker handle) under ``key``: ``nbytes``
    long, until released (``ref``: the ObjectRef it was stored as; the handle is let go)
    or dropped. ``owner``: a weak reference to what releases the held blocks of the array
    it is a block of (set by that array when it takes the block)."""

    __slots__ = ("worker", "key", "nbytes", "ref", "dropped", "owner")

    def __init__(self, worker, key: str, nbytes: int) -> None:
        self.worker, self.key, self.nbytes = worker, key, nbytes
        self.ref = None
        self.dropped = False
        self.owner = None
        with _LOCK:
            _HELD_BYTES[worker] += nbytes

    def __repr__(self) -> str:
        state = "released" if self.ref is not None else "dropped" if self.dropped else "held"
        return f"Held({self.key!r}, {self.nbytes} bytes, {state})"


def _count_out(block: Held) -> None:
    """Its bytes leave its worker's count (``_LOCK`` held)."""
    left = _HELD_BYTES[block.worker] - block.nbytes
    if left > 0:
        _HELD_BYTES[block.worker] = left
    else:
        del _HELD_BYTES[block.worker]


def _settle_dropped() -> None:
    """Count out the dropped blocks and queue their keys (``_LOCK`` held)."""
    while _DROPPED:
        block = _DROPPED.pop()  # atomic: the collector may append meanwhile
        _count_out(block)
        _UNSENT[block.worker].append(block.key)


class Unwritten:
    """An output block no statement wrote: zeros, made by no call. A gather fills its region
    with zeros; a block program's call reads it as a
    :class:`~tensorc.runtime.ray.tasks.ZerosRead` (made in that call); any other reader of
    refs has it put in Ray once (``ref``), from the driver. The blocks of one shape of an
    output share one."""

    __slots__ = ("shape", "dtype", "ref")

    def __init__(self, shape: tuple[int, ...], dtype) -> None:
        self.shape, self.dtype = shape, dtype
        self.ref = None

    def stored(self):
        """Its ref, put in Ray the first time it is asked for."""
        if self.ref is None:
            import ray

            self.ref = ray.put(np.zeros(self.shape, self.dtype))
        return self.ref


def room(worker, store_bytes_per_node: float) -> int:
    """Bytes ``worker`` may still take into its held blocks."""
    with _LOCK:
        _settle_dropped()
        return int(HELD_SHARE * store_bytes_per_node) - _HELD_BYTES.get(worker, 0)


def held_bytes() -> int:
    """Bytes held in all workers, in this process's count."""
    with _LOCK:
        _settle_dropped()
        return sum(_HELD_BYTES.values())


def release(held) -> None:
    """Store every block of ``held`` not released yet in Ray and set its ``ref``: one call
    per worker, not waited for. Callers release an array's blocks once (under its lock)."""
    flush_drops()
    unreleased = (b for b in held if b.ref is None and not b.dropped)
    for worker, blocks in _by_worker(unreleased).items():
        refs = worker.release.options(num_returns=len(blocks)).remote(
            [b.key for b in blocks])
        with _LOCK:
            for block, ref in zip(blocks, refs if len(blocks) > 1 else [refs], strict=True):
                block.ref = ref
                _count_out(block)
                block.worker = None  # a worker replaced since is freed with its last handle


def bind(value, workers: list | None, node: int | None):
    """``value`` (a block's ref, or a :class:`Held`) as a call on ``node`` binds it
    (``workers``: the node workers, ``None`` for plain tasks; ``node`` ``None`` for a
    reader that is no call; a node index out of the workers' range, a node lost since, has
    none). A held block is the block itself while the node's worker holds it (the call
    reads it in place: :func:`read_in_place`, once all the call's arguments are bound),
    else its ObjectRef, its array's held blocks released first (once); an
    :class:`~tensorc.runtime.ray.inline.Inline` block is its value for a call (it travels
    inside the call's message); anything else is bound as it is. The ``HeldRead`` that
    :func:`read_in_place` makes is made and submitted under the submission lock
    (``calls.SUBMITTING``), which releases take too: no release falls between them."""
    if type(value) is not Held:
        return value.value if type(value) is Inline and node is not None else value
    if value.ref is None:
        known = workers is not None and node is not None and 0 <= node < len(workers)
        if known and value.worker == workers[node]:
            return value
        release_array = value.owner() if value.owner is not None else None
        if release_array is None:  # its array died, and only its array's readers bind it
            raise KeyError(f"held block {value.key!r} belongs to no live array")
        release_array()
    return value.ref


def read_in_place(value):
    """A bound argument as its call is submitted with it: a :class:`Held` still held is
    read by key in its worker (:class:`~tensorc.runtime.ray.tasks.HeldRead`); one released
    since (by another argument of the same call, read elsewhere) by its ref; anything else
    as it is."""
    if type(value) is not Held:
        return value
    return HeldRead(value.key) if value.ref is None else value.ref


def peek(held) -> list[tuple[list, object]]:
    """Ask each worker for its blocks of ``held`` (not released) as one object (one store,
    not one per block; the blocks stay held): ``[(its Helds, the ref of their values)]``,
    not waited for."""
    flush_drops()
    return [(blocks, worker.peek.remote([b.key for b in blocks]))
            for worker, blocks in _by_worker(held).items()]


def _by_worker(held) -> dict:
    """``held``'s blocks, each once, by the worker holding them."""
    grouped: dict = defaultdict(list)
    for block in dict.fromkeys(held):
        grouped[block.worker].append(block)
    return grouped


def drop(held) -> None:
    """Forget ``held``'s blocks not released (their array died). Safe inside the garbage
    collector: it takes no lock, only marks and appends; :func:`flush_drops` does the rest."""
    for block in held:
        if block.ref is None and not block.dropped:
            block.dropped = True
            _DROPPED.append(block)


def flush_drops() -> None:
    """Tell the workers to drop the held blocks of arrays that died (not waited for; a dead
    worker is fine: its blocks died with it)."""
    if not _DROPPED and not _UNSENT:
        return
    with _LOCK:
        _settle_dropped()
        unsent = dict(_UNSENT)
        _UNSENT.clear()
    for worker, keys in unsent.items():
        with contextlib.suppress(Exception):  # a worker gone holds nothing
            worker.drop.remote(keys)


DEAD_TIMEOUT = 10.0
"""Seconds :func:`make_lost_again` waits for a holder's answer; one still busy after that
(it answers after the calls queued before the question) counts as alive."""


def made_by_workers(array) -> None:
    """Record ``array`` (a :class:`~tensorc.runtime.ray.arrays.DistributedArray` whose
    blocks the workers ``array.makers``, of the nodes ``array.made_on``, made and hold) as
    one to make again if one of them dies (:func:`make_lost_again`)."""
    _MADE.add(array)


def make_lost_again(live_nodes) -> int:
    """Every array recorded by :func:`made_by_workers` that a node no longer in
    ``live_nodes`` (node ids) made, or a worker that died, makes itself again
    (``made_again``: by tasks, the same values), in place: a run that met a dead worker
    calls this before it runs again, so its calls read blocks Ray can rebuild (a held block
    dies with its worker, and so does one it was asked to store after it died; one stored
    before, an actor's result, dies with its node). Returns how many arrays were made
    again."""
    arrays = list(_MADE)
    live = set(live_nodes)
    dead = _dead({worker for array in arrays for worker in array.makers})
    again = [array for array in arrays if array.made_on - live or array.makers & dead]
    for array in again:
        array.made_again()
        _MADE.discard(array)
    return len(again)


def _dead(workers) -> set:
    """Those of ``workers`` (node worker handles) that died: each is asked a question, all
    at once, and one that fails it is dead (a worker still busy after
    :data:`DEAD_TIMEOUT` is not)."""
    if not workers:
        return set()
    import ray

    asked = {worker.holding.remote(): worker for worker in workers}
    answered, _ = ray.wait(list(asked), num_returns=len(asked), timeout=DEAD_TIMEOUT)
    gone = set()
    for ref in answered:
        try:
            ray.get(ref)
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnschedulableError):
            gone.add(asked[ref])
    return gone


def forget_all() -> None:
    """Forget every count (the session ended: its workers are gone)."""
    with _LOCK:
        _HELD_BYTES.clear()
        _DROPPED.clear()
        _UNSENT.clear()
        _MADE.clear()
