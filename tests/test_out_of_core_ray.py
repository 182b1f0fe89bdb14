"""Stored inputs on Ray: read on the nodes by the calls that use them, within each node's budget.

On the shared 4-node cluster (the ``ray_cluster`` fixture) a ~64 MB zarr input and a numpy
memmap are contracted under a small ``memory_limit``: results equal numpy's, every block is
read once, on the node whose call uses it, and never enters Ray's object store (no bytes of
it put or moved, no read step's block returned by a call); each node reports its measured
peak RSS. A corrupt or missing chunk read on a node is a ``StorageError`` naming it, as
locally. A call running its steps on several threads admits reads within the budget.
"""

from __future__ import annotations

import math
import os
import pickle
import shutil
import threading
import time

import numpy as np
import pytest
import zarr

import tensorc as tc
from tensorc import session
from tensorc.errors import StorageError
from tensorc.lazy.evaluate import RUNNER
from tensorc.planning.memory_fit import READ_OVERHEAD
from tensorc.planning.plan import EINSUM_PLANS
from tensorc.runtime.block_buffers import BlockBuffers, holds
from tensorc.runtime.ray.arrays import DistributedArray
from tensorc.runtime.ray.stages import READ, STORED, Step
from tensorc.runtime.ray.storage_tasks import unseen_by
from tensorc.runtime.ray.tasks import run_steps
from tensorc.stored import NpyFile, ZarrArray

SHAPE, CHUNKS, F = (256, 256, 128), (64, 64, 128), 8
"""X: 64 MiB of float64 in 16 chunks of 4 MiB."""
BUDGET = 48 * 10**6
"""Each node's memory budget: under X; a block (4 MiB) fits the planner's quarter of it."""


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("ooc-ray")
    path = str(root / "x.zarr")
    value = np.random.default_rng(0).random(SHAPE)
    zarr.create_array(path, shape=SHAPE, chunks=CHUNKS, dtype="f8", compressors=None)[...] = value
    rng = np.random.default_rng(1)
    return path, value, rng.random((SHAPE[0], F)), rng.random((SHAPE[1], F))


def _staged_runs(plans) -> list:
    """The staged calls the Ray executor kept on ``plans`` (a plan cache's plans)."""
    return [staged for plan in plans for _, staged, _ in plan.runs.values()]


def _check_reads_stay_in_their_calls(runs: list) -> int:
    """Every read step reads the stored array argument and its block is never returned:
    it lives in the call that uses it. Returns how many read steps there are."""
    reads = 0
    for staged in runs:
        for call in staged.calls:
            for position, (step, inputs) in enumerate(call.steps):
                if step.kind != READ:
                    continue
                reads += 1
                assert call.args[inputs[0][1]][0] == STORED
                assert position not in call.exports
    return reads


def _check_ray_stats(stats: dict, nbytes: int, nodes: int) -> None:
    assert stats["backend"] == "ray"
    assert sum(stats["node_read_bytes"]) == nbytes  # every block read once
    assert sum(1 for b in stats["node_read_bytes"] if b) == nodes  # on every node
    assert stats["put_bytes"] < nbytes // 100  # only the small factors went to Ray
    assert stats["memory_limit_bytes"] == BUDGET
    peaks = stats["node_peak_rss_bytes"]
    assert len(peaks) == nodes and all(isinstance(p, int) and p > 0 for p in peaks)
    assert stats["peak_rss_bytes"] == max(peaks)


def test_a_zarr_input_is_read_on_the_nodes_within_the_budget(ray_cluster, store):
    path, value, b, c = store
    x = tc.from_zarr(path)
    assert isinstance(x.value(), ZarrArray)  # not read: no blocking asked for
    assert len(pickle.dumps(x.value())) < 2048  # travels to the nodes as its path
    EINSUM_PLANS.clear()
    got = np.asarray(tc.einsum("ijk,if,jf->if", x, b, c, memory_limit=BUDGET))
    np.testing.assert_allclose(got, np.einsum("ijk,if,jf->if", value, b, c), rtol=1e-10)
    stats = tc.last_stats()
    _check_ray_stats(stats, value.nbytes, ray_cluster.nodes)
    assert stats["stored_operands"] == [0]
    assert stats["transfer_bytes"] < value.nbytes // 100
    assert _check_reads_stay_in_their_calls(_staged_runs(EINSUM_PLANS._plans.values())) > 0  # noqa: SLF001


@pytest.mark.parametrize("measure", [False, True])  # calls merged and pipelined, or each waited
def test_a_program_over_a_zarr_input_reads_it_on_the_nodes(ray_cluster, store, measure):
    path, value, _, _ = store
    x = tc.from_zarr(path)
    current = session.current()
    before = current.memory_limit, current.measure
    current.memory_limit, current.measure = BUDGET, measure  # as tc.init sets them
    try:
        got = np.asarray(tc.sum(x * 2.0 + 1.0, axis=2))
    finally:
        current.memory_limit, current.measure = before
    np.testing.assert_allclose(got, (value * 2.0 + 1.0).sum(axis=2), rtol=1e-10)
    stats = tc.last_stats()
    _check_ray_stats(stats, value.nbytes, ray_cluster.nodes)
    assert stats["put_bytes"] is None or stats["put_bytes"] == 0
    assert _check_reads_stay_in_their_calls(_staged_runs(RUNNER.plans._plans.values())) > 0  # noqa: SLF001


def test_a_numpy_memmap_is_read_on_the_nodes(ray_cluster, store, tmp_path):
    _, value, b, c = store
    np.save(tmp_path / "x.npy", value)
    mapped = np.load(tmp_path / "x.npy", mmap_mode="r")
    EINSUM_PLANS.clear()
    got = tc.einsum("ijk,if,jf->if", mapped, b, c, memory_limit=BUDGET)
    np.testing.assert_allclose(got, np.einsum("ijk,if,jf->if", value, b, c), rtol=1e-10)
    stats = tc.last_stats()
    _check_ray_stats(stats, value.nbytes, ray_cluster.nodes)
    assert stats["stored_operands"] == [0]
    assert stats["put_bytes"] == b.nbytes + c.nbytes
    assert _check_reads_stay_in_their_calls(_staged_runs(EINSUM_PLANS._plans.values())) > 0  # noqa: SLF001
    loaded = tc.load(tmp_path / "x.npy")
    assert isinstance(loaded.value(), NpyFile)
    np.testing.assert_allclose(np.asarray(tc.einsum("ijk->kj", loaded)), value.sum(axis=0).T)


def test_a_blocking_keeps_the_array_in_the_cluster_memory(ray_cluster, tmp_path):
    value = np.arange(24.0).reshape(4, 6)
    path = str(tmp_path / "s.zarr")
    zarr.create_array(path, data=value, chunks=(2, 3))
    kept = tc.from_zarr(path, block_shape=(2, 3)).value()
    assert isinstance(kept, DistributedArray) and kept.grid == (2, 2)
    np.testing.assert_array_equal(kept.numpy(), value)


def _small_copy(store, tmp_path) -> str:
    copy = str(tmp_path / "copy.zarr")
    shutil.copytree(store[0], copy)
    return copy


def test_a_corrupt_or_missing_chunk_read_on_a_node_names_it(ray_cluster, store, tmp_path):
    path = _small_copy(store, tmp_path)
    with open(os.path.join(path, "c", "2", "1", "0"), "wb") as chunk:
        chunk.write(b"not a chunk")
    x = tc.from_zarr(path)
    with pytest.raises(StorageError, match=r"chunk \(2, 1, 0\) is corrupt or unreadable"):
        np.asarray(tc.einsum("ijk->i", x))
    os.remove(os.path.join(path, "c", "2", "1", "0"))
    with pytest.raises(StorageError, match=r"chunk \(2, 1, 0\) \('c/2/1/0'\) is missing"):
        np.asarray(tc.einsum("ijk->j", x))
    shutil.rmtree(path)  # the nodes open the store anew: it is gone
    with pytest.raises(StorageError, match=r"cannot open '.*copy\.zarr': .* does not exist"):
        np.asarray(tc.einsum("ijk->k", x))


def test_a_path_the_nodes_cannot_see_is_named(ray_cluster, store):
    assert unseen_by(store[0]) == []
    assert unseen_by("/no/such/store.zarr") == list(range(ray_cluster.nodes))


class _SlowStore:
    """A stored array whose reads take a while and count how many run at once."""

    dtype = np.dtype("f8")

    def __init__(self, delay: float = 0.02) -> None:
        self.lock = threading.Lock()
        self.now = self.most = 0
        self.delay = delay
        self.buffers: list = []  # each buffer a read was given (kept alive: ids stay unique)

    def read(self, slices, out=None):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.buffers.append(out)
            number = len(self.buffers)
        time.sleep(self.delay)
        with self.lock:
            self.now -= 1
        block = np.empty(tuple(s.stop - s.start for s in slices)) if out is None else out
        block[...] = number  # the read's number: a reused buffer is rewritten
        return block


def _read_then_sum(blocks: int, extent: int) -> tuple:
    read = Step(READ, lambda block, slices: block[slices], (extent,),
                read=(slice(0, extent),))
    steps = []
    for k in range(blocks):
        steps.append((read, (("x", 0),)))
        steps.append((Step("run", np.sum), (("t", 2 * k),)))
    return tuple(steps), tuple(range(1, 2 * blocks, 2))


@pytest.mark.parametrize("budget,most", [(None, 3), ("one read", 1)])
def test_a_call_on_threads_admits_reads_within_its_budget(budget, most):
    extent = 1 << 16
    if budget == "one read":  # one read's block and buffer, plus a block being summed
        budget = int((2 + READ_OVERHEAD) * extent * 8)
    stored = _SlowStore()
    steps, exports = _read_then_sum(8, extent)
    sums = run_steps(steps, (stored,), exports, threads=3, budget=budget)
    assert sorted(sums) == [float(extent * k) for k in range(1, 9)]
    assert stored.most == most


@pytest.mark.parametrize("threads", [1, 3])
def test_a_node_worker_reads_into_buffers_its_earlier_reads_left(threads):
    """A read block the call dropped goes back to the worker's pool: eight reads of one
    call (and the reads of the next call) use a few buffers, and every sum is its own
    read's, so no buffer was reused while its block was still in use."""
    extent = 1 << 16
    stored = _SlowStore(delay=0.0)
    steps, exports = _read_then_sum(8, extent)  # the read step's value: a view, as LoadBlock's
    first = run_steps(steps, (stored,), exports, threads=threads)
    second = run_steps(steps, (stored,), exports, threads=threads)
    assert sorted(first + second) == [float(extent * k) for k in range(1, 17)]
    assert len({id(b) for b in stored.buffers}) <= threads + 1


def _standardized(value: np.ndarray) -> np.ndarray:
    return (value - value.mean(axis=0)) / value.std(axis=0)


def test_to_zarr_on_ray_is_written_by_the_nodes_that_compute_it(ray_cluster, store, tmp_path):
    path, value, _, _ = store
    x = tc.from_zarr(path)
    current = session.current()
    before = current.memory_limit
    current.memory_limit = BUDGET
    try:
        out = str(tmp_path / "out.zarr")
        assert tc.to_zarr(x * 2.0 - 1.0, out) == out
        streamed = tc.last_stats()
        tc.to_zarr(_standardize(tc.from_zarr(path)), str(tmp_path / "std.zarr"))
    finally:
        current.memory_limit = before
    written = zarr.open_array(out, mode="r")
    np.testing.assert_allclose(written[...], value * 2.0 - 1.0)
    # every block was written on a node, by the call that computed it: none came back
    assert streamed["sink_bytes"] == value.nbytes
    assert sum(1 for b in streamed["node_sink_bytes"] if b) == ray_cluster.nodes
    assert not streamed["put_bytes"]
    chunks = written.chunks
    assert all(value.shape[d] % c == 0 or c == value.shape[d] for d, c in enumerate(chunks))
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]  # no temporary left
    np.testing.assert_allclose(zarr.open_array(str(tmp_path / "std.zarr"))[...],
                               _standardized(value), rtol=1e-9, atol=1e-12)


def test_chunks_the_blocks_do_not_align_with_are_written_whole(ray_cluster, store, tmp_path):
    path, value, _, _ = store
    out = str(tmp_path / "odd.zarr")
    tc.to_zarr(tc.from_zarr(path) + 1.0, out, chunks=(48, 48, 128))
    written = zarr.open_array(out, mode="r")
    assert written.chunks == (48, 48, 128)
    np.testing.assert_allclose(written[...], value + 1.0)
    assert tc.last_stats().get("sink_bytes") is None  # not written by the nodes


def _standardize(x):
    return (x - tc.mean(x, axis=0)) / tc.std(x, axis=0)


def test_a_failed_write_on_the_nodes_leaves_nothing_at_the_path(ray_cluster, store, tmp_path):
    path = _small_copy(store, tmp_path)
    os.remove(os.path.join(path, "c", "3", "3", "0"))  # the last chunk: read late
    out = str(tmp_path / "out.zarr")
    with pytest.raises(StorageError, match=r"chunk \(3, 3, 0\)"):
        tc.to_zarr(tc.from_zarr(path) + 1.0, out)
    assert not os.path.exists(out)
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]


BIG_SHAPE = (1024, 256, 128)
"""256 MiB of float64 in 64 chunks of 4 MiB (``CHUNKS``): over five times a node's budget."""
ALLOWANCE = 48 * 2**20
"""What a node worker may grow by beyond 1.5× its budget (zarr's codec pipeline and event
loop, the heap's own slack), as the local streaming tests allow."""


@pytest.fixture(scope="module")
def big_store(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("ooc-ray-big") / "x.zarr")
    array = zarr.create_array(path, shape=BIG_SHAPE, chunks=CHUNKS, dtype="f8",
                              compressors=None)
    rng = np.random.default_rng(2)
    for i in range(0, BIG_SHAPE[0], 128):  # written slab by slab, as a user's would be
        array[i:i + 128] = rng.random((128, *BIG_SHAPE[1:]))
    return path


def _worker_rss(cluster) -> list[int]:
    """Each node worker's resident memory now: the baseline its measured peak grows from."""
    import ray

    from tensorc.runtime.ray.calls import node_workers
    from tensorc.runtime.resident import resident_bytes

    return ray.get([w.__ray_call__.remote(lambda _self: resident_bytes())
                    for w in node_workers(cluster)])


@pytest.mark.parametrize("kind", ["einsum", "to_zarr"])
def test_each_node_measures_its_peak_within_its_budget(ray_cluster, big_store, tmp_path, kind):
    x = tc.from_zarr(big_store)
    rng = np.random.default_rng(3)
    b, c = rng.random((BIG_SHAPE[0], F)), rng.random((BIG_SHAPE[1], F))
    current = session.current()
    before_limit = current.memory_limit
    current.memory_limit = BUDGET
    try:
        before = _worker_rss(ray_cluster)
        if kind == "einsum":
            np.asarray(tc.einsum("ijk,if,jf->if", x, b, c))
        else:  # a result as large as the input, written by the nodes
            tc.to_zarr(x * 2.0, str(tmp_path / "out.zarr"))
        stats = tc.last_stats()
    finally:
        current.memory_limit = before_limit
    assert stats["memory_limit_bytes"] == BUDGET
    assert sum(stats["node_read_bytes"]) == math.prod(BIG_SHAPE) * 8
    growth = [peak - base for peak, base in zip(stats["node_peak_rss_bytes"], before,
                                                strict=True)]
    assert max(growth) <= 1.5 * BUDGET + ALLOWANCE, (growth, before)


def test_a_program_run_to_zarr_on_ray_is_written_by_the_nodes(ray_cluster, tmp_path):
    rng = np.random.default_rng(4)
    a, b = rng.random((512, 256)), rng.random((256, 64))
    zarr.create_array(str(tmp_path / "a.zarr"), shape=a.shape, chunks=(128, 256),
                      dtype="f8")[...] = a
    program = tc.compile("size M, N, K\ninput A : f64[M, K]\ninput B : f64[K, N]\n"
                         "output C : f64[M, N]\noutput D : f64[M, N]\n"
                         "C[i, j] += A[i, k] * B[k, j]\nD[i, j] = C[i, j] * 2.0\n")
    out = str(tmp_path / "out.zarr")
    program.run_to_zarr(out, A=tc.from_zarr(str(tmp_path / "a.zarr")), B=b)
    group = zarr.open_group(out, mode="r")
    np.testing.assert_allclose(group["C"][...], a @ b)  # read by D: written after the run
    np.testing.assert_allclose(group["D"][...], 2 * (a @ b))  # written by its nodes
    assert tc.last_stats()["sink_bytes"] == (a @ b).nbytes


def test_block_buffers_keep_at_most_their_bytes_and_know_a_view_of_a_buffer():
    pool = BlockBuffers(keep_bytes=3 * 800)
    first = pool.take((100,), "f8")
    assert holds(first, first) and holds(first[:], first) and holds(first.T, first)
    assert not holds(first.copy(), first) and not holds(np.empty(100), first)
    pool.give(first)
    assert pool.take((100,), "f8") is first
    taken = [pool.take((100,), "f8") for _ in range(5)]
    for buffer in taken:
        pool.give(buffer)
    kept = {id(pool.take((100,), "f8")) for _ in range(5)}
    assert len(kept & {id(b) for b in taken}) == 3  # 2,400 bytes idle at most
