"""A block program's final blocks held in the node workers that made them until read
(``runtime/ray/held.py``), on the shared 4-node Ray cluster: held, counted and kept in the
worker after ``tc.wait``; stored in Ray at the first read, with numpy's answer; dropped
when their array dies unread; stored as before where a worker has no room; lost with their
worker as a stored block is with its node."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import tensorc as tc
from tensorc.driver.block_programs import shipped
from tensorc.runtime.ray import block_replay, held
from tensorc.runtime.ray.held import Held

pytestmark = pytest.mark.usefixtures("ray_cluster")
RNG = np.random.default_rng(23)


def spd(n: int) -> np.ndarray:
    x = RNG.random((n, n))
    return x @ x.T + n * np.eye(n)


def _kept_in_workers() -> int:
    """How many blocks the node workers keep or hold, all together."""
    import ray

    from tensorc.runtime.ray.cluster import connected

    return sum(ray.get([worker.forget.remote("no run has this prefix")
                        for worker in connected().workers]))


def _factor(a: np.ndarray):
    """The Cholesky factor of ``a`` in 4 x 4 blocks of 128 (512 KB each, far above the
    tests' inline threshold of 1 KB): its array, and how many of its blocks a statement
    writes (the lower triangle's; the upper blocks of zeros share one block)."""
    placed = tc.asarray(a, block_shape=(128, 128)).value()
    return shipped("cholesky").run(A=placed, NB=4)["L"], 10


def test_a_factor_s_blocks_stay_in_their_worker_until_read():
    a = spd(512)
    before = _kept_in_workers()
    lower, written = _factor(a)
    stats = tc.last_stats()
    assert stats["held_results"] == written and not stats["per_task"]
    assert lower.held_blocks == written
    assert _kept_in_workers() - before == written
    tc.wait(lower)  # they exist: waiting stores nothing
    assert lower.held_blocks == written
    assert sum(isinstance(ref, Held) for ref in lower._blocks.refs.values()) == written  # noqa: SLF001
    np.testing.assert_allclose(lower.numpy(), np.linalg.cholesky(a), rtol=1e-10, atol=1e-10)
    assert lower.held_blocks == 0  # released by the gather: now Ray objects
    assert not any(isinstance(ref, Held) for ref in lower.blocks.refs.values())
    assert _kept_in_workers() == before


def test_a_held_factor_read_by_a_later_program_gives_numpy_s_answer():
    a = spd(512)
    lower, _ = _factor(a)
    product = tc.einsum("ik,jk->ij", lower, lower)
    np.testing.assert_allclose(product.numpy(), a, rtol=1e-10)


def test_an_array_that_dies_unread_frees_what_it_held():
    before_bytes, before = held.held_bytes(), _kept_in_workers()
    lower, written = _factor(spd(512))
    assert held.held_bytes() - before_bytes == written * 128 * 128 * 8
    del lower
    gc.collect()
    assert held.held_bytes() == before_bytes
    held.flush_drops()  # the next run or release sends it; sent ahead of the count below
    assert _kept_in_workers() == before


def test_a_worker_without_room_stores_its_final_blocks(monkeypatch):
    a = spd(512)
    _factor(a)  # recorded with its blocks held: a replay would hold them again
    monkeypatch.setattr(held, "HELD_SHARE", 0.0)
    lower, _ = _factor(a)
    stats = tc.last_stats()
    assert stats["held_results"] == 0 and not stats["replayed"]  # run afresh, not replayed
    assert lower.held_blocks == 0
    np.testing.assert_allclose(lower.numpy(), np.linalg.cholesky(a), rtol=1e-10, atol=1e-10)


def test_a_replay_holds_its_final_blocks_too(monkeypatch):
    monkeypatch.setattr(block_replay, "RECORDINGS", block_replay.RECORDINGS.__class__())
    a = spd(512)
    first, written = _factor(a)
    assert not tc.last_stats()["replayed"]
    again, _ = _factor(a)
    stats = tc.last_stats()
    assert stats["replayed"] and stats["held_results"] == written == again.held_blocks
    for lower in (first, again):
        np.testing.assert_allclose(lower.numpy(), np.linalg.cholesky(a), rtol=1e-10,
                                   atol=1e-10)


def test_a_held_block_lost_with_its_worker_raises_node_lost_as_a_stored_one_does():
    import ray

    from tensorc.errors import NodeLostError
    from tensorc.runtime.ray.cluster import connected

    a = spd(512)
    lower, _ = _factor(a)
    holders = {ref.worker for ref in lower._blocks.refs.values() if isinstance(ref, Held)}  # noqa: SLF001
    assert holders
    for worker in holders:
        ray.kill(worker)
    with pytest.raises(NodeLostError, match=r"^a block of this \(512, 512\) array was lost "
                                            r"with the node that held it \(ActorDiedError\)$"):
        lower.numpy()
    connected().restart_workers()  # the next test's runs start new workers
