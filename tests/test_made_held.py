"""Arrays ``tc.random``, ``tc.ones`` and ``tc.full`` make on Ray, made by the node workers
and held there (``runtime/ray/arrays.py``, ``_held_made``), on the shared 4-node cluster:
held after ``tc.wait`` with the recipe's values; read in place by an einsum on their
nodes; made by tasks when their blocks travel inside messages or a worker has no room;
made again, with the same values, when a worker that made them dies."""

from __future__ import annotations

import numpy as np
import pytest

import tensorc as tc
from tensorc.runtime.ray import held
from tensorc.runtime.ray.held import Held

pytestmark = pytest.mark.usefixtures("ray_cluster")


def _random_blocks(seed: int, grid: tuple[int, int], block: tuple[int, int]) -> np.ndarray:
    """What ``tc.random(..., grid=grid, seed=seed)`` holds: block ``g`` drawn by numpy's
    PCG64 seeded with ``(seed, *g)``."""
    return np.block([[np.random.default_rng([seed, a, b]).random(block)
                      for b in range(grid[1])] for a in range(grid[0])])


def _workers_holding(array) -> set:
    return {ref.worker for ref in array.layout.refs.values() if isinstance(ref, Held)}


def test_random_blocks_are_made_and_held_by_the_node_workers():
    x = tc.random((512, 256), grid=(4, 2), seed=5)  # blocks of 128 x 128: 128 KB
    tc.wait(x)
    made = x.value()
    assert made.held_blocks == 8
    assert len(_workers_holding(made)) == 4  # block-cyclic over the 4 nodes
    assert made.makers == _workers_holding(made) and len(made.made_on) == 4
    assert len(made.making()) == 4  # one call per node made them: tc.wait waited for it
    np.testing.assert_array_equal(x.numpy(), _random_blocks(5, (4, 2), (128, 128)))
    assert made.held_blocks == 8  # a gather peeks: they stay held


def test_constant_blocks_are_held_too_and_small_blocks_are_made_by_tasks():
    ones = tc.ones((512, 256), grid=(4, 2))
    seven = tc.full((512, 256), 7.0, grid=(4, 2))
    small = tc.random((32, 16), grid=(4, 2), seed=3)  # 8 x 8 blocks travel in messages
    tc.wait(ones, seven, small)
    assert ones.value().held_blocks == seven.value().held_blocks == 8
    assert small.value().held_blocks == 0 and not small.value().made_on
    np.testing.assert_array_equal(ones.numpy(), np.ones((512, 256)))
    np.testing.assert_array_equal(seven.numpy(), np.full((512, 256), 7.0))
    np.testing.assert_array_equal(small.numpy(), _random_blocks(3, (4, 2), (8, 8)))


def test_an_einsum_reads_made_blocks_where_they_are_held():
    x = tc.random((512, 256), grid=(4, 2), seed=8)
    y = tc.random((256, 64), grid=(2, 1), seed=9)
    tc.wait(x, y)
    product = tc.einsum("ij,jk->ik", x, y)
    assert x.value().held_blocks == 8  # nothing released to the object store
    np.testing.assert_allclose(product.numpy(), x.numpy() @ y.numpy(), rtol=1e-12)


def test_an_array_a_program_makes_where_it_reads_it_is_held_and_read_in_place():
    x = tc.random((512, 256), grid=(4, 2), seed=12)
    y = tc.random((256, 64), grid=(2, 1), seed=13)
    product = tc.einsum("ij,jk->ik", x, y)  # neither made yet: made for this plan's blocks
    made = x.value()
    assert made.held_blocks == len(made.layout.refs) > 0  # read where they were made
    assert made.origin.startswith("laid out for statement")
    np.testing.assert_allclose(product.numpy(),
                               _random_blocks(12, (4, 2), (128, 128))
                               @ _random_blocks(13, (2, 1), (128, 64)), rtol=1e-12)


def test_a_worker_without_room_leaves_the_array_to_tasks(monkeypatch):
    monkeypatch.setattr(held, "HELD_SHARE", 0.0)
    x = tc.random((512, 256), grid=(4, 2), seed=6)
    tc.wait(x)
    assert x.value().held_blocks == 0 and not x.value().made_on
    np.testing.assert_array_equal(x.numpy(), _random_blocks(6, (4, 2), (128, 128)))


def test_reading_refs_stores_the_held_blocks_with_the_same_values():
    import ray

    x = tc.random((512, 256), grid=(4, 2), seed=14)
    tc.wait(x)
    refs = x.value().blocks.refs
    assert x.value().held_blocks == 0
    assert all(isinstance(ref, ray.ObjectRef) for ref in refs.values())
    np.testing.assert_array_equal(ray.get(refs[(3, 1)]),
                                  np.random.default_rng([14, 3, 1]).random((128, 128)))


def test_an_array_whose_maker_died_is_made_again_with_the_same_values():
    import ray

    from tensorc.runtime.ray.cluster import connected

    x = tc.random((512, 256), grid=(4, 2), seed=21)
    tc.wait(x)
    made = x.value()
    victim = made.layout.refs[(1, 0)].worker
    ray.kill(victim)
    try:
        np.testing.assert_array_equal(x.numpy(), _random_blocks(21, (4, 2), (128, 128)))
        assert made.held_blocks == 0 and not made.made_on  # made by tasks now
        assert made.origin.startswith("made again by tasks")
        assert all(isinstance(ref, ray.ObjectRef) for ref in made.layout.refs.values())
    finally:
        connected().restart_workers()  # the next runs start new workers


def test_an_einsum_on_an_array_whose_maker_died_makes_it_again_and_runs():
    import ray

    from tensorc.runtime.ray.cluster import connected

    before = held.held_bytes()
    x = tc.random((512, 256), grid=(4, 2), seed=31)
    y = tc.asarray(np.random.default_rng(32).random((256, 64)), grid=(2, 1))
    tc.wait(x, y)
    assert held.held_bytes() == before + 512 * 256 * 8
    ray.kill(x.value().layout.refs[(0, 0)].worker)
    try:
        product = tc.einsum("ij,jk->ik", x, y)  # its calls meet the dead worker, run again
        np.testing.assert_allclose(product.numpy(),
                                   _random_blocks(31, (4, 2), (128, 128)) @ y.numpy(),
                                   rtol=1e-12)
        assert x.value().held_blocks == 0 and not x.value().made_on
        assert held.held_bytes() == before  # its held blocks counted out
    finally:
        connected().restart_workers()


def test_a_block_program_on_an_array_whose_maker_died_makes_it_again_and_runs():
    import ray

    from tensorc.runtime.ray.cluster import connected

    x = tc.random((65536, 40), grid=(8, 1), seed=51)  # 20 MB: a block program on Ray
    tc.wait(x)
    ray.kill(x.value().layout.refs[(2, 0)].worker)
    try:
        q, r = tc.linalg.qr(x)  # its calls meet the dead worker: task by task, made again
        tc.wait(q, r)
        assert not x.value().made_on  # made again by the program's run, not by a gather
        want = _random_blocks(51, (8, 1), (8192, 40))
        np.testing.assert_allclose(q.numpy() @ r.numpy(), want, rtol=1e-10, atol=1e-12)
    finally:
        connected().restart_workers()


def test_a_node_gone_makes_its_arrays_again_even_when_their_blocks_were_stored():
    x = tc.random((512, 256), grid=(4, 2), seed=61)
    tc.wait(x)
    made = x.value()
    assert made.blocks.refs and made.held_blocks == 0  # stored: released from the workers
    gone = next(iter(made.made_on))
    live = [node for node in made.made_on if node != gone]
    assert held.make_lost_again(live) >= 1  # as a run does once it finds the node gone
    assert not made.made_on
    np.testing.assert_array_equal(x.numpy(), _random_blocks(61, (4, 2), (128, 128)))


def test_arrays_whose_makers_live_are_not_made_again():
    from tensorc.runtime.ray.cluster import connected

    x = tc.random((512, 256), grid=(4, 2), seed=71)
    tc.wait(x)
    assert held.make_lost_again(connected().node_ids) == 0
    assert x.value().held_blocks == 8 and len(x.value().made_on) == 4


def test_a_made_array_dies_with_its_last_reader_and_its_workers_drop_its_blocks():
    import gc
    import weakref

    import ray

    from tensorc.runtime.ray.calls import node_workers
    from tensorc.runtime.ray.cluster import connected

    def holding() -> int:
        return sum(ray.get([w.holding.remote() for w in node_workers(connected())]))

    before = holding()
    gc.disable()  # no cycle collection: it must die by reference counting alone
    try:
        x = tc.random((512, 256), grid=(4, 2), seed=41)
        tc.wait(x)
        made = weakref.ref(x.value())
        assert holding() == before + 8
        del x
        assert made() is None
        assert holding() == before  # the drops went with the next submission (this ask)
    finally:
        gc.enable()
