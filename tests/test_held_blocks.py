"""A block program's final blocks held in the node workers that made them until read
(``runtime/ray/held.py``), on the shared 4-node Ray cluster: held, counted and kept in the
worker after ``tc.wait``; stored in Ray at the first read, with numpy's answer; dropped
when their array dies unread; stored as before where a worker has no room; lost with their
worker as a stored block is with its node; read in place by a later call on the holder's
node, a block program's or an einsum's."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import tensorc as tc
from tensorc.driver.block_programs import shipped
from tensorc.runtime.ray import held
from tensorc.runtime.ray.held import Held

pytestmark = pytest.mark.usefixtures("ray_cluster")
RNG = np.random.default_rng(23)


def spd(n: int) -> np.ndarray:
    x = RNG.random((n, n))
    return x @ x.T + n * np.eye(n)


def _kept_or_held_in_workers() -> int:
    """How many blocks the node workers keep or hold, all together (asked as a submission
    asks for the workers: the drops of arrays that died are sent first)."""
    import ray

    from tensorc.runtime.ray.calls import node_workers
    from tensorc.runtime.ray.cluster import connected

    gc.collect()  # arrays left to the collector die first, and their drops are sent
    workers = node_workers(connected())
    return sum(ray.get([worker.forget.remote("no run has this prefix") for worker in workers]
                       + [worker.holding.remote() for worker in workers]))


def _factor(a: np.ndarray):
    """The Cholesky factor of ``a`` in 4 x 4 blocks of 128 (512 KB each, far above the
    tests' inline threshold of 1 KB): its array, and how many of its blocks a statement
    writes (the lower triangle's; the upper blocks of zeros share one block)."""
    placed = tc.asarray(a, block_shape=(128, 128)).value()
    return shipped("cholesky").run(A=placed, NB=4)["L"], 10


def test_a_factor_s_blocks_stay_in_their_worker_until_read():
    import ray

    a = spd(512)
    before = _kept_or_held_in_workers()
    lower, written = _factor(a)
    stats = tc.last_stats()
    assert stats["held_results"] == written and not stats["per_task"]
    assert lower.held_blocks == written
    ran = [n for n, count in enumerate(stats["tasks_per_node"]) if count]
    assert all(stats["node_peak_rss_bytes"][n] for n in ran)  # a call returning no block too
    assert _kept_or_held_in_workers() - before == written
    tc.wait(lower)  # they exist: waiting stores nothing
    assert lower.held_blocks == written
    assert sum(isinstance(ref, Held) for ref in lower._blocks.refs.values()) == written  # noqa: SLF001
    for _ in range(2):  # a gather reads them, one object per worker, and leaves them held
        np.testing.assert_allclose(lower.numpy(), np.linalg.cholesky(a), rtol=1e-10,
                                   atol=1e-10)
        assert lower.held_blocks == written and _kept_or_held_in_workers() - before == written
    lower.blocks  # noqa: B018 - a reader of refs releases them: now Ray objects
    assert lower.held_blocks == 0
    assert all(isinstance(ref, ray.ObjectRef) for ref in lower.layout.refs.values())
    assert _kept_or_held_in_workers() == before
    np.testing.assert_allclose(lower.numpy(), np.linalg.cholesky(a), rtol=1e-10, atol=1e-10)


def test_a_held_factor_read_by_a_later_program_gives_numpy_s_answer():
    a = spd(512)
    lower, written = _factor(a)
    assert lower.held_blocks == written
    layout = lower.layout.bounds
    assert tc.asarray(lower, block_shape=(128, 128)).value() is lower  # its layout, read
    assert lower.held_blocks == written and lower.layout.bounds == layout
    product = tc.einsum("ik,jk->ij", lower, lower)
    np.testing.assert_allclose(product.numpy(), a, rtol=1e-10)


def test_an_array_that_dies_unread_frees_what_it_held():
    before = _kept_or_held_in_workers()
    before_bytes = held.held_bytes()
    lower, written = _factor(spd(512))
    assert held.held_bytes() - before_bytes == written * 128 * 128 * 8
    del lower
    gc.collect()
    assert held.held_bytes() == before_bytes
    held.flush_drops()  # the next run or release sends it; sent ahead of the count below
    assert _kept_or_held_in_workers() == before


def test_a_worker_without_room_stores_its_final_blocks(monkeypatch):
    a = spd(512)
    _factor(a)  # recorded with its blocks held: a replay would hold them again
    monkeypatch.setattr(held, "HELD_SHARE", 0.0)
    lower, _ = _factor(a)
    stats = tc.last_stats()
    assert stats["held_results"] == 0 and not stats["replayed"]  # run afresh, not replayed
    assert lower.held_blocks == 0
    np.testing.assert_allclose(lower.numpy(), np.linalg.cholesky(a), rtol=1e-10, atol=1e-10)


def test_a_replay_holds_its_final_blocks_too():
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


FAILS_AFTER_ITS_FIRST_WAVE = """
size M, N
blocks MB of M
input  A : f64[M, N]
output X : f64[M, N]
output F : f64[N, N]
tensor G : f64
for i in 0:MB {
  X{i, 0} = A{i, 0} + A{i, 0}
}
G{0, 0} = T(A{0, 0}) @ A{0, 0}
for i in 1:MB {
  G{0, 0} = G{0, 0} + T(A{i, 0}) @ A{i, 0}
}
F{0, 0} = chol(-G{0, 0})
"""


def test_a_run_that_fails_after_holding_blocks_holds_none(monkeypatch):
    # waves of 4 tasks: X's blocks are final and held in the first waves, the Cholesky of a
    # negative definite matrix fails in the last; what the run held is counted out and
    # dropped from the workers
    from tensorc.runtime.ray import block_program

    monkeypatch.setattr(block_program, "WINDOW", 4)
    program = tc.compile(FAILS_AFTER_ITS_FIRST_WAVE)
    placed = tc.asarray(RNG.random((8192, 16)), block_shape=(1024, 16)).value()
    before = _kept_or_held_in_workers()
    before_bytes = held.held_bytes()
    held_before_failing = []
    hold = held.Held.__init__

    def counted(self, *args):
        hold(self, *args)
        held_before_failing.append(self)

    monkeypatch.setattr(held.Held, "__init__", counted)
    with pytest.raises(np.linalg.LinAlgError, match="^Matrix is not positive definite$"):
        program.run(A=placed, MB=8)
    assert held_before_failing  # X's blocks were held, and then
    assert held.held_bytes() == before_bytes
    assert _kept_or_held_in_workers() == before


def test_two_threads_reading_a_held_array_release_it_once(monkeypatch):
    import threading
    import time

    from tensorc.runtime.ray import arrays

    a = spd(512)
    lower, written = _factor(a)
    sent, release = [], arrays.release

    def slow(blocks):  # the second thread arrives while the first releases
        blocks = list(blocks)
        sent.append(len(blocks))
        time.sleep(0.2)
        release(blocks)

    monkeypatch.setattr(arrays, "release", slow)
    read: list = []
    threads = [threading.Thread(target=lambda: read.append(lower.blocks)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sent == [written] and len(read) == 2 and read[0] is read[1]
    np.testing.assert_allclose(lower.numpy(), np.linalg.cholesky(a), rtol=1e-10, atol=1e-10)


def test_a_later_program_on_the_holding_node_reads_the_blocks_there_unstored():
    a = spd(512)
    lower, written = _factor(a)
    b = RNG.random((512, 3))
    x = shipped("lower_solve").run(L=lower, B=b, NB=4, KB=1)["X"]
    assert tc.last_stats()["tasks_per_node"][1:] == [0, 0, 0]  # where L is, node 0
    assert lower.held_blocks == written  # read in its worker, still held
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(np.linalg.cholesky(a), b),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(lower.numpy(), np.linalg.cholesky(a), rtol=1e-10, atol=1e-10)


def test_a_call_on_another_node_reads_a_held_block_stored_first():
    import ray

    from tensorc.runtime.ray import block_program
    from tensorc.runtime.ray.calls import node_workers
    from tensorc.runtime.ray.cluster import connected
    lower, written = _factor(spd(512))
    holder = lower.layout.refs[(1, 1)].worker
    workers = node_workers(connected())
    here = workers.index(holder)
    program = shipped("lower_solve").program
    edges = (0, 128, 256, 384, 512)
    binding = block_program._Binding(  # noqa: SLF001 - the binding under test
        program, {"L": lower, "B": RNG.random((512, 3))}, {"N": edges, "K": (0, 3)},
        connected())
    symbol = (block_program.INPUT, "L", (1, 1))
    assert binding(symbol, here) is lower.layout.refs[(1, 1)]  # read there, if still held
    assert lower.held_blocks == written
    elsewhere = binding(symbol, (here + 1) % len(workers))
    assert isinstance(elsewhere, ray.ObjectRef) and lower.held_blocks == 0


GRAM_OF_ROWS = """
size M, N, K
blocks MB of M
input  Q : f64[M, N]
input  B : f64[M, K]
output C : f64[N, K]
C{0, 0} = T(Q{0, 0}) @ B{0, 0}
for i in 1:MB {
  C{0, 0} = C{0, 0} + T(Q{i, 0}) @ B{i, 0}
}
"""


def test_one_call_reading_blocks_held_on_several_workers_reads_each_as_it_can():
    # TSQR's Q is held in 8 row blocks on the 4 workers; one chain of tasks on one node
    # reads them all: those held elsewhere are stored first, and so the ones held on the
    # chain's own node, released by the same binding, are read by ref, not by key
    x = RNG.random((65536, 16))  # blocks of 1 MB, each Q block made on its row block's node
    placed = tc.asarray(x, block_shape=(8192, 16)).value()
    q = shipped("tsqr_q").run(A=placed, MB=8, scheduler="owner")["Q"]
    holders = {ref.worker for ref in q.layout.refs.values() if isinstance(ref, Held)}
    assert len(holders) > 1
    b = RNG.random((65536, 3))
    c = tc.compile(GRAM_OF_ROWS).run(Q=q, B=b, MB=8)["C"]
    np.testing.assert_allclose(c.numpy(), q.numpy().T @ b, rtol=1e-10, atol=1e-12)


TIMES = """
size N, K
blocks NB of N
input  L : f64[N, N]
input  B : f64[N, K]
output C : f64[N, K]
for i in 0:NB {
  C{i, 0} = L{i, 0} @ B{0, 0}
  for j in 1:NB {
    C{i, 0} = C{i, 0} + L{i, j} @ B{j, 0}
  }
}
"""


def test_blocks_no_statement_wrote_are_made_by_no_call_and_read_as_zeros():
    a = spd(512)
    lower, _ = _factor(a)
    assert tc.last_stats()["remote_calls"] == 1  # the factorisation's alone
    upper = [(i, j) for i in range(4) for j in range(i + 1, 4)]
    assert all(isinstance(lower.layout.refs[c], held.Unwritten) for c in upper)
    assert lower.layout.refs[(0, 1)] is lower.layout.refs[(2, 3)]  # one per shape
    b = RNG.random((512, 2))
    c = tc.compile(TIMES).run(L=lower, B=b, NB=4)["C"]  # reads every block of L
    np.testing.assert_allclose(c.numpy(), np.linalg.cholesky(a) @ b, rtol=1e-10)
    assert isinstance(lower.layout.refs[(0, 1)], held.Unwritten)  # made in the calls
    np.testing.assert_allclose(lower.numpy(), np.linalg.cholesky(a), rtol=1e-10, atol=1e-10)
    refs = lower.blocks.refs  # stored once asked for by ref: one object
    assert len({refs[c] for c in upper}) == 1
    np.testing.assert_array_equal(np.triu(lower.numpy(), 1), 0)  # gathered from Ray now
    again = tc.compile(TIMES).run(L=lower, B=b, NB=4)["C"]  # still made by the calls
    np.testing.assert_allclose(again.numpy(), np.linalg.cholesky(a) @ b, rtol=1e-10)


def test_unwritten_blocks_keep_the_output_s_dtype():
    a = spd(512).astype(np.float32)
    placed = tc.asarray(a, block_shape=(128, 128)).value()
    lower = shipped("cholesky").run(A=placed, NB=4, dtype=np.float32)["L"]
    assert lower.layout.refs[(0, 1)].dtype == np.dtype(np.float32).str
    value = lower.numpy()
    assert value.dtype == np.float32 and not np.triu(value, 1).any()
    stored = lower.blocks.refs[(0, 1)]
    import ray

    assert ray.get(stored).dtype == np.float32 and not ray.get(stored).any()


def _tsqr_q():
    """TSQR's Q of a 65,536 x 16 matrix, held in 8 row blocks of 1 MB on the 4 workers, row
    block ``i`` on node ``i % 4`` (as ``tc.asarray`` lays a column of blocks out), and the
    matrix."""
    x = RNG.random((65536, 16))
    placed = tc.asarray(x, block_shape=(8192, 16)).value()
    q = shipped("tsqr_q").run(A=placed, MB=8, scheduler="owner")["Q"]
    assert q.held_blocks == 8
    assert q.layout.nodes == {(i, 0): i % 4 for i in range(8)}
    return q, x


def test_an_einsum_reads_held_blocks_in_place_on_their_nodes():
    q, _ = _tsqr_q()
    before = _kept_or_held_in_workers()
    b = tc.asarray(RNG.random((65536, 3)), block_shape=(8192, 3)).value()  # Q's nodes
    product = tc.einsum("ij,ik->jk", q, b)
    assert q.held_blocks == 8  # read in their workers: nothing released, nothing stored
    assert _kept_or_held_in_workers() == before
    np.testing.assert_allclose(product.numpy(), q.numpy().T @ b.numpy(), rtol=1e-10,
                               atol=1e-12)
    assert q.held_blocks == 8


def _batched_arguments(monkeypatch) -> list[str]:
    """The type names of the arguments every batched call is submitted with, from now on,
    with the session's runs unmeasured (a measured run is not batched)."""
    from tensorc.runtime.ray import call_batch
    from tensorc.runtime.ray.cluster import connected

    sent, submit = [], call_batch.submit_stage

    def counted(cluster, workers, node, key, payload, args, *rest, **options):
        sent.extend(type(a).__name__ for a in args)
        return submit(cluster, workers, node, key, payload, args, *rest, **options)

    monkeypatch.setattr(call_batch, "submit_stage", counted)
    monkeypatch.setattr(connected(), "measure", False)
    return sent


def test_a_lazy_program_s_batched_calls_read_held_blocks_in_place(monkeypatch):
    q, _ = _tsqr_q()
    b = RNG.random((65536, 3))
    placed = tc.asarray(b, block_shape=(8192, 3))
    sent = _batched_arguments(monkeypatch)
    lazy = tc.asarray(q)
    found = np.asarray((lazy.T @ placed) * 2 + 1)  # one program: its calls batched
    assert sent.count("HeldRead") == 8 and q.held_blocks == 8  # each read in its worker
    np.testing.assert_allclose(found, (q.numpy().T @ b) * 2 + 1, rtol=1e-10)


def test_block_by_block_operations_read_held_blocks_in_place_and_never_share_one():
    q, _ = _tsqr_q()
    lazy = tc.asarray(q)
    narrowed = np.asarray(lazy.astype(np.float32))  # a step on each block's own node
    assert narrowed.dtype == np.float32 and q.held_blocks == 8
    np.testing.assert_array_equal(narrowed, q.numpy().astype(np.float32))
    rows = lazy[:16384].value()  # blocks 0 and 1 whole: passed through, so stored first
    assert q.held_blocks == 0 and rows.held_blocks == 0
    np.testing.assert_array_equal(rows.numpy(), q.numpy()[:16384])


def test_one_program_reading_a_held_array_in_place_and_passing_it_through_stores_it(
        monkeypatch):
    # in one batch, a product binds Q's blocks to read in place, and a slice passes two of
    # them through into its own array: Q is stored, and the product reads the stored copies
    q, _ = _tsqr_q()
    b = RNG.random((65536, 3))
    sent = _batched_arguments(monkeypatch)
    lazy = tc.asarray(q)
    product, rows = tc.compute(lazy.T @ tc.asarray(b, block_shape=(8192, 3)), lazy[:16384])
    assert sent and "HeldRead" not in sent and q.held_blocks == 0
    np.testing.assert_allclose(np.asarray(product), q.numpy().T @ b, rtol=1e-10)
    np.testing.assert_array_equal(np.asarray(rows), q.numpy()[:16384])


def test_an_einsum_passing_a_held_block_through_releases_its_array():
    import ray

    q, _ = _tsqr_q()
    same = tc.einsum("ij->ij", q)  # its blocks are q's: never held by two arrays
    assert q.held_blocks == 0 and same.held_blocks == 0
    assert all(isinstance(ref, ray.ObjectRef) for ref in same.layout.refs.values())
    np.testing.assert_array_equal(same.numpy(), q.numpy())


def test_a_held_block_binds_in_place_for_its_worker_and_by_ref_elsewhere():
    import ray

    from tensorc.runtime.ray.calls import node_workers
    from tensorc.runtime.ray.cluster import connected

    q, _ = _tsqr_q()
    block = q.layout.refs[(1, 0)]
    workers = node_workers(connected())
    assert held.bind(block, workers, 1) is block  # its holder reads it as it is
    assert type(held.read_in_place(block)).__name__ == "HeldRead" and q.held_blocks == 8
    stored = held.bind(block, workers, 2)  # any other reader: the array is released
    assert isinstance(stored, ray.ObjectRef) and q.held_blocks == 0
    assert held.bind(block, workers, 1) is stored is held.read_in_place(block)
    assert all(isinstance(ref, ray.ObjectRef) for ref in q.layout.refs.values())  # all of them


def test_an_einsum_reading_a_held_block_lost_with_its_worker_raises_ray_s_error():
    import ray

    from tensorc.errors import ExecutionError
    from tensorc.runtime.ray.cluster import connected

    q, _ = _tsqr_q()
    b = tc.asarray(RNG.random((65536, 3)), block_shape=(8192, 3)).value()
    ray.kill(q.layout.refs[(1, 0)].worker)
    with pytest.raises(ExecutionError, match=r"^Ray failed running the call on node \d \(stage "
                                             r"\d, \d+ block step\(s\)\): RayTaskError\("
                                             r"ActorDiedError\): .*; an input block was lost "
                                             r"with the node worker that made or held it$"):
        tc.einsum("ij,ik->jk", q, b)  # its worker is dead; as plain tasks, the block is lost
    connected().restart_workers()  # the next test's runs start new workers
    np.testing.assert_allclose(tc.einsum("ij,ik->jk", b, b).numpy(), b.numpy().T @ b.numpy(),
                               rtol=1e-10)
