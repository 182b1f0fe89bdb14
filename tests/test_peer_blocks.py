"""Input blocks pulled from the node worker of the node holding them
(``runtime/ray/peer_blocks.py``): the wire format on real sockets, then block programs on the
shared 4-node Ray cluster, the pulled bytes against the placer's count, and every way a pull
falls back to Ray's own transfer."""

from __future__ import annotations

import gc
import socket
import struct
import threading
import time

import numpy as np
import pytest

import tensorc as tc
from tensorc.driver.block_programs import shipped
from tensorc.runtime.ray import peer_blocks
from tensorc.runtime.ray.peer_blocks import _HEADER, _receive_block, _send_block

RNG = np.random.default_rng(11)


def spd(n: int) -> np.ndarray:
    x = RNG.random((n, n))
    return x @ x.T + n * np.eye(n)


@pytest.mark.parametrize("value", [RNG.random((3, 5)), np.arange(7, dtype=np.int32),
                                   np.array(2.5, dtype=np.float32), np.zeros((0, 4))])
def test_a_block_crosses_the_socket_with_its_dtype_and_shape(value):
    sender, receiver = socket.socketpair()
    with sender, receiver:
        threading.Thread(target=_send_block, args=(sender, value)).start()
        got = _receive_block(receiver)
    assert got.dtype == value.dtype and got.shape == value.shape
    np.testing.assert_array_equal(got, value)
    assert not got.flags.writeable  # read-only, as a block Ray fetched is


def test_a_block_the_holder_does_not_offer_comes_back_as_none():
    sender, receiver = socket.socketpair()
    with sender, receiver:
        _send_block(sender, None)
        assert _receive_block(receiver) is None


def test_a_holder_that_hangs_up_mid_block_is_a_broken_connection():
    sender, receiver = socket.socketpair()
    with receiver:
        with sender:  # a block of 1,000 float64 announced, 100 bytes of it sent
            sender.sendall(_HEADER.pack(1, 1, 3) + b"<f8" + struct.pack("<q", 1000)
                           + bytes(100))
        with pytest.raises(ConnectionResetError, match="hung up"):
            _receive_block(receiver)


def test_a_holder_answers_a_request_with_one_reply_per_id_in_order(monkeypatch):
    # the holder's store stands in as a dict: the first id is a block, the second a miss
    served = {b"\x01" * 28: np.arange(6.0).reshape(2, 3)}
    monkeypatch.setattr(peer_blocks, "_offered_value",
                        lambda found, deadline: served.get(found))
    reader, holder = socket.socketpair()
    with reader:
        threading.Thread(target=peer_blocks._answer, args=(holder,), daemon=True).start()
        ids = [b"\x02" * 28, b"\x01" * 28]
        reader.sendall(struct.pack("<I", 2) + b"".join(bytes((28,)) + i for i in ids))
        missed, found = (_receive_block(reader) for _ in ids)
        assert missed is None
        np.testing.assert_array_equal(found, served[ids[1]])
        reader.sendall(struct.pack("<I", 1) + bytes((28,)) + ids[1])  # the connection lives on
        np.testing.assert_array_equal(_receive_block(reader), served[ids[1]])


def test_a_silent_holder_is_passed_over_and_nobody_listening_too(monkeypatch):
    monkeypatch.setattr(peer_blocks, "PULL_TIMEOUT", 0.2)
    monkeypatch.setattr(peer_blocks, "_SHUNNED", {})

    class Ref:
        def binary(self):
            return b"\x03" * 28

    silent = socket.create_server(("127.0.0.1", 0))  # accepts (the kernel does), never answers
    with silent:
        endpoint = silent.getsockname()
        read = peer_blocks.PeerRead(endpoint, [Ref()])
        assert peer_blocks._pull_from(endpoint, [read]) == [None]
        assert endpoint not in peer_blocks._PEERS  # the half-used connection is dropped
        assert peer_blocks._SHUNNED[endpoint] > 0
    closed = socket.create_server(("127.0.0.1", 0))
    gone = closed.getsockname()
    closed.close()
    assert peer_blocks._pull_from(gone, [peer_blocks.PeerRead(gone, [Ref()])]) == [None]
    assert gone in peer_blocks._SHUNNED


def _server() -> tuple[socket.socket, tuple[str, int]]:
    """A block server on this machine's loopback, served by the real accept loop."""
    listener = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=peer_blocks._accept, args=(listener,), daemon=True).start()
    return listener, listener.getsockname()


def test_a_posted_value_is_pulled_once_per_reader_and_a_late_post_is_waited_for():
    # runtime/ray/posted.py behind the block server: an array goes as a block, anything
    # else pickled; a reader asking before the post waits for it; the value is dropped
    # after its readers' pulls
    from tensorc.runtime.ray import posted

    listener, endpoint = _server()
    with listener:
        posted.post("run/a", np.arange(4.0), readers=2)
        posted.post("run/b", {"not": "an array"})
        got = peer_blocks.pull_posted(endpoint, ["run/a", "run/b"], timeout=5)
        np.testing.assert_array_equal(got[0], np.arange(4.0))
        assert got[1] == {"not": "an array"}
        assert peer_blocks.pull_posted(endpoint, ["run/a"], timeout=5)[0].shape == (4,)
        assert posted.take("run/a", time.monotonic())[1] is posted.MISSING  # used up
        later = threading.Timer(0.3, posted.post, args=("run/c", np.ones((2, 2))))
        later.start()
        started = time.monotonic()
        np.testing.assert_array_equal(
            peer_blocks.pull_posted(endpoint, ["run/c"], timeout=5)[0], np.ones((2, 2)))
        assert 0.2 < time.monotonic() - started < 5


def test_a_value_marked_failed_or_never_posted_or_unreachable_is_a_failed_hand_over(
        monkeypatch):
    from tensorc.runtime.ray import posted

    monkeypatch.setattr(peer_blocks, "HOLDER_TIMEOUT", 0.1)  # the server answers a miss
    listener, endpoint = _server()
    with listener:
        posted.fail(["run/failed"])
        started = time.monotonic()
        with pytest.raises(peer_blocks.HandOverFailed, match="will not be posted"):
            peer_blocks.pull_posted(endpoint, ["run/failed"], timeout=30)
        assert time.monotonic() - started < 5  # told at once, not at the timeout
        with pytest.raises(peer_blocks.HandOverFailed, match="not posted .* within 0.5 s"):
            peer_blocks.pull_posted(endpoint, ["run/never"], timeout=0.5)
        posted.post("run/dropped", np.ones(2))
        posted.drop_run("run/")  # a failed run's values: gone, and their readers told
        assert posted.take("run/dropped", time.monotonic()) == (False, None)
    closed = socket.create_server(("127.0.0.1", 0))
    gone = closed.getsockname()
    closed.close()
    with pytest.raises(peer_blocks.HandOverFailed, match="no answer"):
        peer_blocks.pull_posted(gone, ["run/x"], timeout=1)


def _offered_counts() -> list[int]:
    import ray

    from tensorc.runtime.ray.cluster import connected

    return ray.get([worker.withdraw.remote([]) for worker in connected().workers])


@pytest.mark.usefixtures("ray_cluster")
def test_a_call_pulls_the_input_blocks_other_nodes_hold_and_moves_what_the_plan_said():
    # as calibrated, the 1536 Cholesky is one call on one node; the 7 blocks of its lower
    # triangle that other nodes hold are pulled from their workers, none through Ray
    a = spd(1536)
    placed = tc.asarray(a, block_shape=(384, 384)).value()
    out = shipped("cholesky").run(A=placed, NB=4)
    stats = tc.last_stats()
    assert stats["remote_calls"] == 1
    assert stats["direct_bytes"] == stats["inter_node_bytes"] == 7 * 384 * 384 * 8
    assert stats["direct_through_ray"] == 0
    np.testing.assert_allclose(out["L"].numpy(), np.linalg.cholesky(a), rtol=1e-10,
                               atol=1e-10)
    again = shipped("cholesky").run(A=placed, NB=4)  # a replay pulls them again
    assert tc.last_stats()["replayed"] and tc.last_stats()["direct_bytes"] == 7 * 384**2 * 8
    np.testing.assert_allclose(again["L"].numpy(), np.linalg.cholesky(a), rtol=1e-10,
                               atol=1e-10)


@pytest.mark.usefixtures("ray_cluster")
def test_blocks_their_holders_stopped_offering_are_read_through_ray():
    import ray

    from tensorc.runtime.ray.cluster import connected

    a = spd(1536)
    placed = tc.asarray(a, block_shape=(384, 384)).value()
    ids = [ref.binary() for ref in placed.stored_refs()]
    ray.get([worker.withdraw.remote(ids) for worker in connected().workers])
    out = shipped("cholesky").run(A=placed, NB=4)
    stats = tc.last_stats()
    assert stats["direct_bytes"] == 0 and stats["direct_through_ray"] == 7
    np.testing.assert_allclose(out["L"].numpy(), np.linalg.cholesky(a), rtol=1e-10,
                               atol=1e-10)


@pytest.mark.usefixtures("ray_cluster")
def test_with_the_direct_path_off_every_block_goes_through_ray(monkeypatch):
    a = spd(1536)
    offered = tc.asarray(a, block_shape=(384, 384)).value()
    before = _offered_counts()
    monkeypatch.setattr(peer_blocks, "ENABLED", False)
    placed = tc.asarray(a, block_shape=(384, 384)).value()
    assert _offered_counts() == before  # nothing offered
    out = shipped("cholesky").run(A=placed, NB=4)
    stats = tc.last_stats()
    assert stats["direct_bytes"] == 0 and stats["direct_through_ray"] == 0
    shipped("cholesky").run(A=offered, NB=4)  # offered while on: read through Ray now
    assert tc.last_stats()["direct_bytes"] == 0
    np.testing.assert_allclose(out["L"].numpy(), np.linalg.cholesky(a), rtol=1e-10,
                               atol=1e-10)


@pytest.mark.usefixtures("ray_cluster")
def test_an_array_that_dies_is_withdrawn_from_the_workers_and_small_blocks_are_not_offered():
    from tensorc.runtime.ray.calls import node_workers
    from tensorc.runtime.ray.cluster import connected

    gc.collect()
    node_workers(connected())  # what died before is withdrawn
    before = _offered_counts()
    big = tc.asarray(RNG.random((512, 512)), block_shape=(128, 128))  # 128 KiB blocks
    small = tc.asarray(RNG.random((64, 64)), block_shape=(32, 32))  # 8 KiB: not offered
    tc.wait(big, small)
    offered = _offered_counts()
    assert sum(offered) - sum(before) == 16
    assert [n - b for n, b in zip(offered, before, strict=True)] == [4, 4, 4, 4]
    del big, small
    gc.collect()
    node_workers(connected())  # every submission asks for the workers: withdrawn then
    assert _offered_counts() == before


@pytest.mark.usefixtures("ray_cluster")
def test_blocks_of_a_holder_whose_worker_died_come_through_ray():
    import ray

    from tensorc.runtime.ray.cluster import connected

    a = spd(1536)
    placed = tc.asarray(a, block_shape=(384, 384)).value()
    shipped("cholesky").run(A=placed, NB=4)
    busy = tc.last_stats()["tasks_per_node"].index(20)  # the node of its one call
    holder = next(n for n in range(4) if n != busy)
    held_there = sum(1 for (i, j), node in placed.block_nodes().items()
                     if node == holder and i >= j)  # lower-triangle blocks it offered
    cluster = connected()
    ray.kill(cluster.workers[holder])  # the worker process: its node and store live on
    _until_dead(cluster.workers[holder])
    try:
        again = shipped("cholesky").run(A=placed, NB=4)
        stats = tc.last_stats()
        assert not stats["per_task"]  # the call on the busy node did not fail
        assert stats["direct_through_ray"] == held_there > 0
        assert stats["direct_bytes"] == (7 - held_there) * 384 * 384 * 8
        np.testing.assert_allclose(again["L"].numpy(), np.linalg.cholesky(a), rtol=1e-10,
                                   atol=1e-10)
    finally:
        cluster.restart_workers()  # the next test's calls get a live worker there
    shipped("cholesky").run(A=placed, NB=4)  # on new workers, which were offered nothing
    stats = tc.last_stats()
    assert stats["direct_bytes"] == stats["direct_through_ray"] == 0  # Ray's own path


def _until_dead(worker, seconds: float = 30.0) -> None:
    """Wait until a killed worker stops answering (``ray.kill`` is asynchronous: a call
    sent just after it may still run)."""
    import ray

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            ray.get(worker.node.remote(), timeout=5)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.05)
    pytest.fail("the killed worker still answers")
