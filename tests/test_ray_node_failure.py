"""A node that dies mid-run does not lose the result (the shared cluster, last in the suite).

Soft node affinity lets Ray run the dead node's tasks elsewhere, and lineage reconstruction
recomputes the blocks that died with it; input blocks ``tc.random`` made, held by the node
workers that made them, are made again from their seed first.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp

import tensorc as tc
from tensorc.driver.block_programs import shipped
from tensorc.runtime.ray.calls import WorkerLost, wait_for_calls
from tensorc.runtime.ray.cluster import LOCAL_NODE_MEMORY
from tensorc.session import current


@pytest.fixture(scope="module")
def dying_cluster(ray_cluster):
    """The shared 4-node cluster, at the end of the suite (these tests run last), measuring
    off: each test kills one of its worker nodes."""
    session = current()
    session.measure = False
    return session


def _value_despite_a_node_death(session, work, after: float):
    """``work()`` run in a thread while one worker node (any but the head, the driver's)
    is removed ``after`` seconds in; its value, once checked that it finished, did not
    raise and was still running when the node died."""
    outcome: dict = {}

    def run():
        try:
            outcome["value"] = work()
            outcome["finished"] = time.monotonic()
        except Exception as err:  # noqa: BLE001 - reported below
            outcome["error"] = err

    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(after)
    cluster = session.cluster.local_cluster
    cluster.remove_node(next(iter(cluster.worker_nodes)), allow_graceful=False)
    removed = time.monotonic()
    worker.join(timeout=240)
    assert not worker.is_alive(), "the work hung after a node died"
    if "error" in outcome:
        pytest.fail(f"the work raised instead of recovering: {outcome['error']!r}")
    assert removed < outcome["finished"], "the node died after the work ended: not mid-run"
    return outcome["value"]


def _reference_and_inputs(n: int, f: int, seed: int):
    """An MTTKRP's numpy answer and its operands on the nodes, made (so a call on them is
    an immediate one): equal seeds and blocking give equal values, so the reference gathers
    a set of its own and the set under test keeps its only copies where they were made."""

    def operands():
        return (tc.random((n, n, n), grid=(4, 4, 4), seed=seed),
                tc.random((n, f), grid=(4, 1), seed=seed + 1),
                tc.random((n, f), grid=(4, 1), seed=seed + 2))

    expected = np.einsum("ijk,jf,kf->if", *[a.numpy() for a in operands()], optimize=True)
    inputs = operands()
    tc.wait(*inputs)
    return expected, inputs


@pytest.mark.last
def test_node_removed_mid_run_still_gives_the_right_answer(dying_cluster):
    session = dying_cluster
    expected, inputs = _reference_and_inputs(128, 24, seed=11)

    def calls():  # a run of calls (one takes a tenth of a second): the node dies among them
        return [tc.einsum("ijk,jf,kf->if", *inputs).numpy() for _ in range(8)]

    nodes = session.cluster.nodes
    for result in _value_despite_a_node_death(session, calls, after=0.3):
        np.testing.assert_allclose(result, expected, rtol=1e-10)
    cluster = session.cluster  # the stores counted are the live nodes' (a call's share)
    deadline = time.monotonic() + 30
    while cluster.nodes == nodes and time.monotonic() < deadline:
        time.sleep(0.2)
        cluster.refresh()
    assert cluster.nodes == nodes - 1
    assert cluster.store_bytes == cluster.nodes * LOCAL_NODE_MEMORY


def newton_steps(xp, X, y, steps: int):
    w = xp.zeros(X.shape[1], dtype=X.dtype)
    for _ in range(steps):
        p = 1.0 / (1.0 + xp.exp(-(X @ w)))
        hessian = X.T @ (X * (p * (1.0 - p))[:, None]) + 1e-6 * xp.eye(X.shape[1])
        w = w - xp.linalg.solve(hessian, X.T @ (p - y) + 1e-6 * w)
        if hasattr(w, "compute"):
            w = w.compute()
    return w


@pytest.mark.last
def test_node_removed_while_array_programs_run_loses_nothing(dying_cluster):
    """Array programs merge their statements' calls (measure is off here): a node dying
    under a batch makes the program run again, and the blocks it held are rebuilt."""
    session = dying_cluster
    assert not session.measure
    X = tc.random((400_000, 8), grid=(8, 1), seed=31)  # blocks made on the nodes, by seed
    data = X.numpy()
    chance = 1.0 / (1.0 + np.exp(-(data - 0.5) @ np.linspace(-1, 1, 8)))
    labels = (np.random.default_rng(32).random(len(data)) < chance).astype(np.float64)
    y = tc.asarray(labels, grid=(8,))
    expected = newton_steps(np, data, labels, 24)
    value = _value_despite_a_node_death(
        session, lambda: np.asarray(newton_steps(tc, X, y, 24)), after=0.5)
    np.testing.assert_allclose(value, expected, rtol=1e-8)


@pytest.mark.last
def test_node_removed_mid_cholesky_runs_it_again_task_by_task(dying_cluster):
    """A block program's calls die with their node's worker: the program runs again as one
    task per block task, and its result is still numpy's."""
    session = dying_cluster
    rng = np.random.default_rng(41)
    half = rng.random((3072, 3072))
    a = half @ half.T + 3072 * np.eye(3072)
    x = tc.asarray(a, block_shape=(384, 384)).value()

    def factor():  # round-robin: the node removed surely has calls in flight
        out = shipped("cholesky").run(A=x, NB=8, scheduler="round_robin")
        return out["L"].numpy(), tc.last_stats()

    lower, stats = _value_despite_a_node_death(session, factor, after=0.4)
    assert stats["per_task"] is True
    np.testing.assert_allclose(lower, np.linalg.cholesky(a), rtol=1e-9, atol=1e-9)


@pytest.mark.last
def test_node_removed_mid_tsqr_with_its_tree_handed_over_loses_nothing(dying_cluster):
    """A TSQR's tree runs in the driver, its values handed over directly
    (runtime/ray/posted.py): the calls waiting for the driver's values, and the driver
    waiting for theirs, are not left waiting when a node dies; every call gives numpy's
    factors."""
    session = dying_cluster
    local = session.cluster.local_cluster
    for _ in range(2):  # the tests before removed nodes: 2 nodes or more are left after
        local.add_node(num_cpus=1, object_store_memory=LOCAL_NODE_MEMORY)
    session.cluster.refresh()
    rng = np.random.default_rng(61)
    a = rng.random((32768, 8))  # R factors of 8 x 8: under the tests' inline size
    x = tc.asarray(a, block_shape=(4096, 8)).value()

    def factors():
        done, started = [], time.monotonic()
        while time.monotonic() - started < 2.0 or len(done) < 3:
            out = shipped("tsqr_q").run(A=x, MB=8)
            done.append((out["Q"].numpy(), out["R"].numpy(), tc.last_stats()))
        return done

    done = _value_despite_a_node_death(session, factors, after=0.5)
    assert session.cluster.nodes >= 2 and done[-1][2]["driver_tasks"] > 0
    for q, r, _ in done:
        np.testing.assert_allclose(q @ r, a, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(q.T @ q, np.eye(8), atol=1e-12)


@pytest.mark.last
def test_node_removed_mid_sparse_call_splits_the_work_again_over_the_nodes_left(dying_cluster,
                                                                              stated_machine):
    """A sparse einsum's node calls die with their node: the call cuts its work again over
    the nodes left (``reruns``), and its result is still scipy's."""
    session = dying_cluster
    local = session.cluster.local_cluster
    local.add_node(num_cpus=1, object_store_memory=LOCAL_NODE_MEMORY)  # the tests before
    session.cluster.refresh()  # removed one worker node each: this one dies here
    assert session.cluster.nodes >= 2
    rng = np.random.default_rng(51)
    matrix = sp.random_array((20_000, 20_000), density=0.01, format="csr", rng=rng)
    dense = rng.random((20_000, 16))
    want = matrix @ dense
    kept = tc.asarray(matrix)

    def calls():
        done = []
        for _ in range(6):
            done.append((tc.einsum("ij,jk->ik", kept, dense), tc.last_stats()["reruns"]))
        return done

    done = _value_despite_a_node_death(session, calls, after=0.3)
    for result, _ in done:
        np.testing.assert_allclose(result, want, rtol=1e-10)
    assert sum(reruns for _, reruns in done) >= 1


@pytest.mark.last
def test_a_result_lost_with_its_node_before_its_first_gather_is_made_again(dying_cluster):
    """An immediate call's result blocks live where the node calls made them, which Ray
    cannot rebuild: the first gather after their node died runs the call again. (Blocks of
    16 x 16, above the tests' inline size: a last stage of smaller ones runs in the driver,
    which keeps the result.)"""
    session = dying_cluster
    local = session.cluster.local_cluster
    local.add_node(num_cpus=1, object_store_memory=LOCAL_NODE_MEMORY)
    session.cluster.refresh()
    # the set under test has no copies on the head node: a call may run there on such
    # copies, for free, and then no result block would be on a worker
    want, inputs = _reference_and_inputs(64, 16, seed=31)
    result = tc.einsum("ijk,jf,kf->if", *inputs)
    ids = session.cluster.node_ids
    placed = result.value().block_nodes()
    holders = {ids[n] for n in placed.values()}
    victim = next((n for n in local.worker_nodes if n.node_id in holders), None)
    assert victim is not None, f"every result block is on the head node: {placed}"
    local.remove_node(victim, allow_graceful=False)
    np.testing.assert_allclose(result.numpy(), want, rtol=1e-10)


def test_a_worker_asked_for_on_a_node_gone_counts_as_a_lost_worker(ray_cluster, monkeypatch):
    """A node worker started while Ray still listed a node that then died is unschedulable
    (``ActorUnschedulableError``, not a ``RayActorError``): the run falls back as for a dead
    worker, and new workers are started, instead of failing."""
    restarted = []
    monkeypatch.setattr(ray_cluster, "restart_workers", lambda: restarted.append(True))
    with pytest.raises(WorkerLost):
        wait_for_calls(ray_cluster, [_stranded_call()])
    assert restarted


def _stranded_call():
    """A call's ref on an actor asked for on a node no one has: it is never scheduled."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=0)
    class Stranded:
        def report(self) -> str:
            return "never"

    gone = NodeAffinitySchedulingStrategy("ab" * 28, soft=False)  # no node has this id
    return Stranded.options(scheduling_strategy=gone).remote().report.remote()


def test_a_result_the_driver_waits_for_from_a_lost_worker_counts_as_a_lost_worker(
        ray_cluster, monkeypatch):
    """The driver fetching results to run a task itself (a block program's task in the
    driver) finds the worker gone: the run falls back as for a dead worker, and new workers
    are started; a task's own tensorc error comes through as it is; a result that never
    comes is an error naming the wait and the variable that lengthens it."""
    import ray

    from tensorc.runtime.ray.calls import fetch_results

    restarted = []
    monkeypatch.setattr(ray_cluster, "restart_workers", lambda: restarted.append(True))
    with pytest.raises(WorkerLost):
        fetch_results(ray_cluster, [_stranded_call()], "a test's task")
    assert restarted

    @ray.remote(num_cpus=0)
    def singular():
        raise tc.LinAlgError("Singular matrix")

    with pytest.raises(tc.LinAlgError, match="^Singular matrix$"):
        fetch_results(ray_cluster, [singular.remote()], "a test's task")

    @ray.remote(num_cpus=0)
    def slow() -> int:
        time.sleep(5)
        return 1

    monkeypatch.setenv("TENSORC_RAY_TIMEOUT", "0.2")
    with pytest.raises(tc.ExecutionError, match="^Ray returned no block for a test's task "
                       "within 0.2 s; set TENSORC_RAY_TIMEOUT to wait longer$"):
        fetch_results(ray_cluster, [slow.remote()], "a test's task")
