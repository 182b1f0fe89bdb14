"""Input blocks moved from node worker to node worker over a connection of their own.

Contract: the blocks of an array ``tc.asarray`` placed on the nodes are *offered* to the
:class:`~tensorc.runtime.ray.tasks.NodeWorker` of the node that stores each
(:func:`offer_blocks`: one ``offer`` call per node, the refs passed nested, so Ray moves
nothing). Arrays a plan makes are made where it reads them and offer nothing: an offered
block costs its worker a borrowed ref, and the driver the messages that go with it, when
it is offered and when it is withdrawn. A block program's call on another node that reads
an offered block gets a :class:`PeerRead` in place of its ref (:func:`direct`): the ref
nested, so Ray does not fetch it before the call starts, and the address of the holder's
block server. The call asks each holder for its blocks over one TCP connection (kept open
between calls) and receives them straight into arrays of its own (:func:`pull`); the
holder reads each from its node's object store (no copy) and writes it to the socket.

Why: Ray's object manager moves a block between two nodes through both raylets, in
chunks, and on this machine took 8.8 ms for 7 blocks of 1.2 MB (26 core-ms of raylet
CPU); a socket between the two workers moves the same bytes in 1-2 ms. Dask's workers
send each other their data the same way.

Nothing is lost to it: the block stays in Ray's object store, owned and kept for lineage
as before, and the call still holds its ref. A block the holder cannot serve (not offered
there, withdrawn, not a plain numpy array, its worker or node gone, a connection that
fails or stalls for :data:`PULL_TIMEOUT` seconds) is read with ``ray.get`` instead, which
rebuilds a lost block by lineage as a call's argument would. The offer lives as long as
the array that made it: an array that dies has its blocks withdrawn at the next
submission (:func:`flush_withdraws`), so the workers' borrowed refs keep a dead array's
blocks in the object store until then, no longer. An offer is read only while the worker
it was made to runs its node: after a worker restarts, reads of blocks offered before go
through Ray.

Each call counts what it pulled and what went through Ray instead (:func:`pulled_args`,
reported back in :class:`~tensorc.runtime.ray.tasks.NodeReport`). ``TENSORC_RAY_DIRECT=0`` turns
the path off (every block through Ray, as before).

The same server answers pulls of *posted* values by key (:mod:`~tensorc.runtime.ray.posted`:
a request id of :data:`POSTED_ID` and the key), waiting for the post: a block program's
driver units and the calls around them hand small values over this way
(:func:`pull_posted`, :class:`PostedRead`); a value that is not a
number array travels pickled, between processes of the cluster's own, as Ray's do. The
driver serves its own values on a server of its own.

The block server binds the node's IP address (Ray's own for the node) on a port the
system picks; like Ray's own ports, it asks for no credentials.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import pickle
import socket
import struct
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tensorc.runtime.ray import posted

DIRECT_BYTES = 64 * 2**10
"""Smallest block offered, where the cluster's inline size is lower (blocks at most that
size, 100 KiB by default, are never in an object store and are not offered): below it
Ray's own fixed costs are small."""

PULL_TIMEOUT = 30.0
"""Seconds a pull waits on a silent holder before reading its blocks through Ray; the
holder is then passed over (its blocks read through Ray) for :data:`SHUNNED_SECONDS`."""
POSTED_WAIT = 1.0
"""Seconds a server waits for a value to be posted before answering that it has none yet
(the reader asks again: a driver looks between asks whether the call that posts it still
runs)."""
HOLDER_TIMEOUT = 10.0
"""Seconds a holder waits for an offered block to be made before answering that it has
none (shorter than :data:`PULL_TIMEOUT`: the reader hears the answer)."""
SHUNNED_SECONDS = 60.0
SENT_KINDS = "biufc"
"""The dtype kinds sent (booleans and numbers); any other block is read through Ray."""

ENABLED = os.environ.get("TENSORC_RAY_DIRECT", "1") != "0"

_MISS, _FOUND, _PICKLED, _FAILED = 0, 1, 2, 3
_HEADER = struct.Struct("<BBB")  # status, ndim, length of the dtype's text
_LENGTH = struct.Struct("<Q")  # a pickled value's length, after its header
POSTED_ID = b"P:"
"""How a request names a posted value (:mod:`~tensorc.runtime.ray.posted`): this, then its
key; any other id is an offered block's object id."""

# -- the holder's side (in a node worker) --------------------------------------------------

OFFERED: dict[bytes, object] = {}
"""Object id -> the ObjectRef offered to this worker (a borrowed ref)."""
_SERVER: list = []  # [(host, port)] once the server runs
_SERVER_LOCK = threading.Lock()


def serve() -> tuple[str, int]:
    """Start this worker's block server (once) and return its ``(host, port)``."""
    with _SERVER_LOCK:
        if not _SERVER:
            import ray

            host = ray.util.get_node_ip_address()
            listener = socket.create_server((host, 0))
            threading.Thread(target=_accept, args=(listener,), daemon=True,
                             name="tensorc-block-server").start()
            _SERVER.append((host, listener.getsockname()[1]))
        return _SERVER[0]


def offer(refs: list) -> int:
    """Serve ``refs`` (blocks in this node's object store) by their ids; returns how many
    this worker offers now."""
    for ref in refs:
        OFFERED[ref.binary()] = ref
    return len(OFFERED)


def withdraw(ids: list[bytes]) -> int:
    """Stop serving the blocks ``ids`` (their array died); returns how many are still offered."""
    for found in ids:
        OFFERED.pop(found, None)
    return len(OFFERED)


def _accept(listener: socket.socket) -> None:
    """Serve every peer that connects, each on a thread of its own; an error accepting one
    (too many open files, a peer gone at once) is that peer's, not the server's."""
    while True:
        try:
            connection, _ = listener.accept()
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=_answer, args=(connection,), daemon=True,
                             name="tensorc-block-sender").start()
        except OSError:
            time.sleep(0.01)


def _answer(connection: socket.socket) -> None:
    """Answer one peer's requests until it hangs up: each a count, then object ids; each
    block goes back as a header (found or not, its dtype and shape) and its bytes. A peer
    that hangs up mid-answer ends this thread, not the server."""
    with connection, contextlib.suppress(OSError):
        while True:
            head = _receive_exactly(connection, 4)
            if head is None:
                return
            (count,) = struct.unpack("<I", head)
            ids = []
            for _ in range(count):
                length = _receive_exactly(connection, 1)
                found = _receive_exactly(connection, length[0]) if length else None
                if found is None:
                    return
                ids.append(found)
            deadline = time.monotonic() + HOLDER_TIMEOUT  # for the whole request
            posted_by = time.monotonic() + POSTED_WAIT
            for found in ids:
                if found.startswith(POSTED_ID):
                    _send_posted(connection, *posted.take(found[len(POSTED_ID):].decode(),
                                                          posted_by))
                else:
                    _send_block(connection, _offered_value(found, deadline))


def _offered_value(found: bytes, deadline: float):
    """The offered block ``found`` as a C-ordered numpy array, or ``None`` (not offered,
    not made by ``deadline``, or not a block this path sends)."""
    ref = OFFERED.get(found)
    if ref is None:
        return None
    import ray

    try:
        value = ray.get(ref, timeout=max(0.0, deadline - time.monotonic()))
    except Exception:  # noqa: BLE001 - the reader falls back to Ray, which says why
        return None
    if (not isinstance(value, np.ndarray) or value.dtype.kind not in SENT_KINDS
            or not value.flags.c_contiguous):
        return None
    return value


def _send_block(connection: socket.socket, value) -> None:
    if value is None:
        connection.sendall(_HEADER.pack(_MISS, 0, 0))
        return
    dtype = value.dtype.str.encode()
    connection.sendall(_HEADER.pack(_FOUND, value.ndim, len(dtype)) + dtype
                       + struct.pack(f"<{value.ndim}q", *value.shape))
    if value.nbytes:
        connection.sendall(memoryview(value.reshape(-1)).cast("B"))


def _send_posted(connection: socket.socket, found: bool, value) -> None:
    """A posted value as a block (a number array, C-ordered) or pickled; a key marked
    failed, or not posted in time, as its status alone."""
    if not found:
        connection.sendall(_HEADER.pack(_MISS if value is posted.MISSING else _FAILED, 0, 0))
        return
    if (isinstance(value, np.ndarray) and value.dtype.kind in SENT_KINDS
            and value.flags.c_contiguous):
        _send_block(connection, value)
        return
    data = pickle.dumps(value, protocol=5)
    connection.sendall(_HEADER.pack(_PICKLED, 0, 0) + _LENGTH.pack(len(data)) + data)


def _receive_exactly(connection: socket.socket, count: int) -> bytes | None:
    """``count`` bytes, or ``None`` if the peer hung up first."""
    chunks, left = [], count
    while left:
        chunk = connection.recv(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# -- the reader's side (in the worker running the call) -------------------------------------

_PEERS: dict[tuple[str, int], socket.socket] = {}  # open connections, by holder address
_SHUNNED: dict[tuple[str, int], float] = {}  # holder address -> passed over until then


class PeerRead:
    """A call's argument that is an input block offered by the worker at ``endpoint``
    (``holder``: a one-element list with its ref, nested so Ray does not fetch it)."""

    __slots__ = ("endpoint", "holder")

    def __init__(self, endpoint: tuple[str, int], holder: list) -> None:
        self.endpoint, self.holder = endpoint, holder

    def __reduce__(self):
        return PeerRead, (self.endpoint, self.holder)


def pulled_args(blocks: tuple) -> tuple[tuple, tuple[int, int]]:
    """``blocks`` with every :class:`PeerRead` replaced by the block its holder sent, each
    holder asked once for all of its blocks, the holders at once; a block a holder did not
    send is read through Ray (module docstring). The blocks are read-only, as Ray's are.
    Returns them and ``(bytes pulled, blocks read through Ray)``."""
    by_holder: dict[tuple[str, int], list[int]] = {}
    for k, block in enumerate(blocks):
        if type(block) is PeerRead:
            by_holder.setdefault(block.endpoint, []).append(k)
    if not by_holder:
        return blocks, (0, 0)
    jobs = [(endpoint, found, [blocks[k] for k in found])
            for endpoint, found in by_holder.items()]
    later = [(found, _pullers().submit(_pull_from, endpoint, reads))
             for endpoint, found, reads in jobs[1:]]
    endpoint, found, reads = jobs[0]  # the first holder in this thread, meanwhile
    done = [(found, _pull_from(endpoint, reads))]
    done += [(found, future.result()) for found, future in later]
    args = list(blocks)
    for found, values in done:
        for k, value in zip(found, values, strict=True):
            args[k] = value
    asked = [k for found in by_holder.values() for k in found]
    missing = [k for k in asked if args[k] is None]
    pulled = sum(args[k].nbytes for k in asked if args[k] is not None)
    if missing:
        import ray

        for k, value in zip(missing, ray.get([blocks[k].holder[0] for k in missing]),
                            strict=True):
            args[k] = value
    return tuple(args), (pulled, len(missing))


@functools.cache
def _pullers() -> ThreadPoolExecutor:
    """This worker's threads for pulls from several holders at once."""
    return ThreadPoolExecutor(8, thread_name_prefix="tensorc-pull")


def _pull_from(endpoint: tuple[str, int], reads: list[PeerRead]) -> list:
    """The blocks one holder sends (``None`` for each it did not). Any failure drops the
    connection (a reply half read is never read as the next one's) and reads the holder's
    blocks through Ray; a holder that did not answer in time is passed over for
    :data:`SHUNNED_SECONDS`."""
    if _SHUNNED.get(endpoint, 0.0) > time.monotonic():
        return [None] * len(reads)
    try:
        connection = _connection(endpoint, PULL_TIMEOUT)
    except OSError:  # nobody listens there (a worker gone): passed over for a while
        _SHUNNED[endpoint] = time.monotonic() + SHUNNED_SECONDS
        return [None] * len(reads)
    try:
        got = _exchange(connection, [read.holder[0].binary() for read in reads])
    except Exception as err:  # noqa: BLE001 - any failure is read through Ray
        if isinstance(err, TimeoutError):
            _SHUNNED[endpoint] = time.monotonic() + SHUNNED_SECONDS
        with contextlib.suppress(OSError):
            connection.close()
        return [None] * len(reads)
    _PEERS[endpoint] = connection
    return got


def _connection(endpoint: tuple[str, int], timeout: float) -> socket.socket:
    """This worker's kept connection to the server at ``endpoint`` (taken out of
    :data:`_PEERS` until its answers are read whole: the caller puts it back), or a new
    one; replies wait at most ``timeout`` seconds. Raises ``OSError`` when none opens."""
    connection = _PEERS.pop(endpoint, None)
    if connection is None:
        connection = socket.create_connection(endpoint, timeout=timeout)
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    connection.settimeout(timeout)
    return connection


def _exchange(connection: socket.socket, ids: list[bytes]) -> list:
    """Ask a server for ``ids`` (a count, then each id after its length) and read its
    answers, one each, in order (:func:`_receive_block`)."""
    request = [struct.pack("<I", len(ids))]
    for found in ids:
        request += [bytes((len(found),)), found]
    connection.sendall(b"".join(request))
    return [_receive_block(connection) for _ in ids]


def _receive_block(connection: socket.socket) -> np.ndarray | None:
    head = _receive_exactly(connection, _HEADER.size)
    if head is None:
        raise ConnectionResetError("the holder hung up")
    status, ndim, length = _HEADER.unpack(head)
    if status == _MISS:
        return None
    if status == _FAILED:
        return _NEVER
    if status == _PICKLED:
        size = _receive_exactly(connection, _LENGTH.size)
        data = _receive_exactly(connection, _LENGTH.unpack(size)[0]) if size else None
        if data is None:
            raise ConnectionResetError("the holder hung up")
        return pickle.loads(data)  # from a process of this cluster's own, as Ray's are
    if status != _FOUND:
        raise ValueError(f"a block server answered with status {status}")
    rest = _receive_exactly(connection, length + 8 * ndim)
    if rest is None:
        raise ConnectionResetError("the holder hung up")
    dtype = np.dtype(rest[:length].decode())
    if dtype.kind not in SENT_KINDS:
        raise ValueError(f"a block server sent a block of dtype {dtype}")
    shape = struct.unpack(f"<{ndim}q", rest[length:])
    block = np.empty(shape, dtype)
    view, got = memoryview(block.reshape(-1)).cast("B"), 0
    while got < len(view):
        received = connection.recv_into(view[got:])
        if not received:
            raise ConnectionResetError("the holder hung up")
        got += received
    block.flags.writeable = False
    return block


# -- posted values (:mod:`~tensorc.runtime.ray.posted`) ---------------------------------------

_NEVER = object()  # what a pull of a key marked failed receives


class PostedRead:
    """A call's argument that is a value another process posts under ``key`` (a block
    program's driver unit, :mod:`~tensorc.runtime.ray.block_waves`), pulled from the block
    server at ``endpoint`` when the call starts, waiting for it to be posted."""

    __slots__ = ("endpoint", "key")

    def __init__(self, endpoint: tuple[str, int], key: str) -> None:
        self.endpoint, self.key = endpoint, key

    def __reduce__(self):
        return PostedRead, (self.endpoint, self.key)


class HandOverFailed(Exception):
    """Posted values not handed over: ``failed``, their poster said they will not come;
    ``waiting``, not posted within the wait (asked again, they may come); neither, the
    server could not be reached or answered wrongly."""

    def __init__(self, message: str, failed: bool = False, waiting: bool = False) -> None:
        super().__init__(message)
        self.failed, self.waiting = failed, waiting


def pull_posted(endpoint: tuple[str, int], keys: list[str], timeout: float | None = None
                ) -> list:
    """The values posted under ``keys`` at ``endpoint``, asking again (every
    :data:`POSTED_WAIT` seconds) while they are not posted yet, for at most ``timeout``
    seconds (``None``: while the server answers); raises :class:`HandOverFailed`."""
    deadline = None if timeout is None else time.monotonic() + timeout
    values: dict[str, object] = {}
    while len(values) < len(keys):
        left = [key for key in keys if key not in values]
        connection = None
        try:
            connection = _connection(endpoint, POSTED_WAIT + PULL_TIMEOUT)
            got = _exchange(connection, [POSTED_ID + key.encode() for key in left])
        except Exception as err:  # noqa: BLE001 - the caller says what it was for
            with contextlib.suppress(OSError, AttributeError):
                connection.close()
            raise HandOverFailed(f"no answer from {endpoint[0]}:{endpoint[1]}: "
                                 f"{type(err).__name__}: {err}") from err
        _PEERS[endpoint] = connection
        for key, value in zip(left, got, strict=True):
            if value is _NEVER:
                raise HandOverFailed(f"the value {key!r} will not be posted (its poster "
                                     "failed)", failed=True)
            if value is not None:
                values[key] = value
        if (len(values) < len(keys) and deadline is not None
                and time.monotonic() >= deadline):
            raise HandOverFailed(f"{len(keys) - len(values)} value(s) not posted at "
                                 f"{endpoint[0]}:{endpoint[1]} within {timeout:g} s",
                                 waiting=True)
    return [values[key] for key in keys]


def reachable(endpoint: tuple[str, int], timeout: float = 2.0) -> bool:
    """Whether a connection to the block server at ``endpoint`` opens."""
    try:
        socket.create_connection(endpoint, timeout=timeout).close()
    except OSError:
        return False
    return True


# -- the driver's side ---------------------------------------------------------------------

_OFFERS: dict[bytes, tuple[bytes, int]] = {}  # object id -> (its worker's actor id, node)
_WITHDRAWN: list = []  # [{actor id: object ids}] of arrays that died, not yet sent
_WITHDRAW_LOCK = threading.Lock()


def offering(cluster) -> bool:
    """Whether arrays made on ``cluster`` offer their blocks (several nodes, path on)."""
    return ENABLED and cluster.nodes > 1


def worker_id(worker) -> bytes:
    """The actor id of a node worker's handle: what an offer remembers, so that it keeps
    no handle (a replaced worker ends with its last handle, and its borrowed refs with it)."""
    return worker._actor_id.binary()


def offer_blocks(cluster, workers_of, blocks, array) -> None:
    """Offer ``blocks``' stored blocks over the cluster's inline size and of at least
    :data:`DIRECT_BYTES` to the workers of the nodes they were placed on (``workers_of()``:
    the node workers, asked for only when a block is offered), until ``array`` dies."""
    if not offering(cluster) or np.dtype(blocks.dtype).kind not in SENT_KINDS:
        return
    smallest = max(DIRECT_BYTES, cluster.inline_bytes + 1)
    itemsize = np.dtype(blocks.dtype).itemsize
    by_node: dict[int, list] = {}
    for coords, ref in blocks.refs.items():
        node = blocks.nodes.get(coords)
        extent = (s.stop - s.start for s in blocks.block_slices(coords))
        if (node is not None and hasattr(ref, "binary")
                and itemsize * math.prod(extent) >= smallest):
            by_node.setdefault(node, []).append(ref)
    if not by_node:
        return
    workers = workers_of()
    ids = {}
    for node, refs in by_node.items():
        if not 0 <= node < len(workers):
            continue
        with contextlib.suppress(Exception):  # a worker gone: its blocks go through Ray
            workers[node].offer.remote(refs)
            actor = worker_id(workers[node])
            ids[actor] = [ref.binary() for ref in refs]
            for found in ids[actor]:
                _OFFERS[found] = (actor, node)
    weakref.finalize(array, _withdrawn, ids)


def _withdrawn(ids: dict) -> None:
    """An offering array died (the garbage collector may call this: it only appends)."""
    _WITHDRAWN.append(ids)


def flush_withdraws(workers: list) -> None:
    """Tell the node workers (``workers``, the live set) to forget the blocks of offering
    arrays that died: one call per worker, not waited for (every submission asks first,
    as it drops held blocks). A worker replaced since needs none: it ends with its last
    handle, and its borrowed refs with it."""
    if not _WITHDRAWN:
        return
    by_actor: dict[bytes, list[bytes]] = {}
    with _WITHDRAW_LOCK:
        while _WITHDRAWN:
            for actor, found in _WITHDRAWN.pop().items():
                for one in found:
                    _OFFERS.pop(one, None)
                by_actor.setdefault(actor, []).extend(found)
    for worker in workers:
        found = by_actor.get(worker_id(worker))
        if found:
            with contextlib.suppress(Exception):  # a dead worker holds nothing
                worker.withdraw.remote(found)


def direct(value, node: int, workers: list, endpoints: list | None):
    """``value`` as a call on ``node`` takes it: a :class:`PeerRead` for a block offered to
    the worker another node runs now (module docstring; ``workers`` and ``endpoints``: the
    node workers and their block servers, in node order), else ``value``."""
    if endpoints is None or not _OFFERS or not hasattr(value, "binary"):
        return value
    offered = _OFFERS.get(value.binary())
    if offered is None:
        return value
    actor, holder = offered
    if (holder == node or holder >= len(workers) or holder >= len(endpoints)
            or endpoints[holder] is None or worker_id(workers[holder]) != actor):
        return value
    return PeerRead(endpoints[holder], [value])


def offered_any() -> bool:
    """Whether any live array offers blocks (a submission need not ask where to pull)."""
    return bool(_OFFERS)


def forget_offers() -> None:
    """Forget every offer (the session ended: its workers are gone)."""
    _OFFERS.clear()
    _WITHDRAWN.clear()
