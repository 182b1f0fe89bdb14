"""Lazy ``tc.Array`` programs on the shared 4-node Ray cluster: the same code as locally,
results against numpy, intermediates kept on the nodes (for later programs too), whole-array
operations placed."""

from __future__ import annotations

import numpy as np
import pytest

import tensorc as tc
from tensorc.runtime.ray.arrays import DistributedArray

pytestmark = pytest.mark.usefixtures("ray_cluster")


def newton_step(xp, X, y, w):
    """One Newton step of logistic regression, written for any array API namespace."""
    p = 1.0 / (1.0 + xp.exp(-(X @ w)))
    gradient = X.T @ (p - y)
    hessian = X.T @ (X * (p * (1.0 - p))[:, None])
    return w - xp.linalg.solve(hessian, gradient)


def test_a_program_runs_on_ray_and_matches_numpy() -> None:
    rng = np.random.default_rng(3)
    X, y = rng.random((64, 5)), (rng.random(64) > 0.5).astype(float)
    x = tc.asarray(X, grid=(4, 1))
    w = newton_step(tc, x, tc.asarray(y, grid=(4,)), tc.zeros(5))
    expected = newton_step(np, X, y, np.zeros(5))
    np.testing.assert_allclose(w.numpy(), expected, rtol=1e-10)
    stats = tc.last_stats()
    assert stats["backend"] == "ray"
    assert stats["tasks"] >= 8
    # the 5 x 5 Hessian update, the solve and the step are smaller than a round of calls
    # to the nodes is worth: they ran on the driver, and w is a numpy array there
    assert stats["statements_on_driver"] >= 3
    assert isinstance(w.value(), np.ndarray)


def test_values_stay_on_the_nodes_and_feed_later_programs() -> None:
    x = tc.random((512, 32), grid=(4, 2), seed=4)  # 128 KiB: more than the driver takes
    centred = (x - tc.mean(x, axis=0)).compute()
    assert isinstance(centred.value(), DistributedArray)
    nodes = set(centred.block_nodes().values())
    assert len(nodes) > 1  # spread over the cluster, not gathered on the driver
    total = tc.sum(centred * centred, axis=0)
    data = x.numpy()
    np.testing.assert_allclose(total.numpy(), ((data - data.mean(0)) ** 2).sum(0),
                               rtol=1e-10)


def test_a_statement_value_stays_on_the_nodes_for_the_next_program_reading_it() -> None:
    rng = np.random.default_rng(5)
    X, v = rng.random((4096, 8)), rng.random(8)
    x = tc.asarray(X, grid=(4, 1))
    raw = x @ tc.asarray(v)  # a contraction statement inside the first program
    loss = tc.sum(tc.log1p(tc.exp(raw)))
    np.testing.assert_allclose(float(loss), np.log1p(np.exp(X @ v)).sum(), rtol=1e-12)
    assert raw.evaluated and isinstance(raw.value(), DistributedArray)  # kept on the nodes
    gradient = x.T @ (1.0 / (1.0 + tc.exp(-raw)))  # reads raw's value, not X @ v again
    np.testing.assert_allclose(gradient.numpy(), X.T @ (1.0 / (1.0 + np.exp(-(X @ v)))),
                               rtol=1e-12)
    assert tc.last_stats()["statements_run"] == 2  # the element-wise part, then X^T @ it


def test_whole_array_operations_run_on_one_node() -> None:
    x = tc.random((32, 8), grid=(4, 1), seed=9)
    picked = tc.argmax(x[3:20], axis=1)
    np.testing.assert_array_equal(picked.numpy(), x.numpy()[3:20].argmax(1))
    whole = [s for s in tc.last_stats()["statements"] if s.get("whole_array")]
    assert [s["whole_array"] for s in whole] == ["getitem", "argmax"]


def test_einsum_on_evaluated_arrays_runs_at_once() -> None:
    a = tc.random((48, 48), grid=(2, 2), seed=1)
    b = tc.random((48, 48), grid=(2, 2), seed=2)
    product = tc.einsum("ij,jk->ik", a, b)
    assert product.evaluated
    assert tc.last_stats()["backend"] == "ray"
    np.testing.assert_allclose(product.numpy(), a.numpy() @ b.numpy(), rtol=1e-10)


def test_scalars_and_one_element_arrays_run_on_the_driver_without_a_node_plan() -> None:
    data = np.arange(10.0)
    a = tc.asarray(data)
    assert float(tc.mean(a)) == 4.5
    np.testing.assert_allclose(np.asarray(tc.sqrt(tc.sum(a * a))), np.sqrt((data**2).sum()))
    assert np.asarray(tc.sum(a) * 2) == 90.0
    np.testing.assert_array_equal(np.asarray(tc.asarray([3.0]) + 1), [4.0])
    ones = tc.random((1,), seed=3)
    np.testing.assert_array_equal(np.asarray(ones * 2), ones.numpy() * 2)


def test_asarray_of_a_lazy_array_re_cuts_its_blocks_on_the_nodes(monkeypatch) -> None:
    """``asarray(lazy, block_shape=...)`` stays lazy, and its evaluation re-cuts the
    distributed value where it is: nothing is gathered to the driver."""
    data = np.arange(512 * 32, dtype=float).reshape(512, 32)
    x = tc.asarray(data, grid=(4, 2)) * 2.0
    blocked = tc.asarray(x, block_shape=(100, 7))
    assert not x.evaluated and not blocked.evaluated

    def no_gather(self):
        raise AssertionError("gathered to the driver")

    with monkeypatch.context() as patched:
        patched.setattr(DistributedArray, "numpy", no_gather)
        value = blocked.value()
    assert isinstance(value, DistributedArray)
    assert blocked.block_shape == (100, 7) and blocked.grid == (6, 5)
    np.testing.assert_array_equal(blocked.numpy(), data * 2.0)


def test_an_array_made_on_its_own_is_made_by_one_task_per_node_and_batch(monkeypatch):
    from tensorc.runtime.ray import arrays

    x = tc.random((64, 64), grid=(8, 4), seed=7)
    made = x.value().blocks
    # blocks of one task share its report; every node made its blocks in one task
    tasks = {}
    for coords, report in made.reported.items():
        tasks.setdefault(report, set()).add(made.nodes[coords])
    assert len(tasks) == len(set(made.nodes.values())) == 4
    assert all(len(nodes) == 1 for nodes in tasks.values())
    expected = np.vstack([np.hstack([
        np.random.default_rng([7, a, b]).random((8, 16)) for b in range(4)]) for a in range(8)])
    np.testing.assert_array_equal(x.numpy(), expected)
    # a node's batch holds at most PLACE_BATCH_BYTES of blocks: 1 KiB blocks, 4 KiB batches
    monkeypatch.setattr(arrays, "PLACE_BATCH_BYTES", 4096)
    y = tc.zeros((64, 64), grid=(8, 4)).value().blocks
    counts = {}
    for report in y.reported.values():
        counts[report] = counts.get(report, 0) + 1
    assert sorted(counts.values()) == [4] * 8
    np.testing.assert_array_equal(tc.zeros((64, 64), grid=(8, 4)).numpy(), 0)
    # a node of two CPUs gets its blocks in two tasks at least
    monkeypatch.setattr(arrays, "PLACE_BATCH_BYTES", 64 * 2**20)
    recipe = arrays.recipe("full", (64, 64), grid=(8, 4))  # reads the cluster's CPUs
    cluster = arrays.ray_cluster()
    monkeypatch.setattr(cluster, "cpus", [2.0] * cluster.nodes)
    z = arrays.generate(recipe, recipe.chunks).blocks
    assert len(set(z.reported.values())) == 2 * cluster.nodes


def test_small_blocks_of_the_drivers_node_are_placed_in_a_batch_too(monkeypatch):
    from tensorc.runtime.ray import arrays

    data = np.arange(64.0).reshape(8, 8)
    bounds = ((0, 2, 4, 6, 8), (0, 8))
    placed = arrays.place(data, bounds).blocks
    assert len(placed.reported) == 4 and len(set(placed.reported.values())) == 4
    np.testing.assert_array_equal(arrays.DistributedArray(placed, (4, 1)).numpy(), data)
    monkeypatch.setattr(arrays, "DIRECT_PUT_BYTES", 0)  # every block put where it is
    driver = arrays.ray_cluster().index_of(arrays.ray_cluster().driver_node)
    put = arrays.place(data, bounds).blocks
    assert driver in put.nodes.values()
    assert [c for c in put.refs if c not in put.reported] == [
        c for c, node in put.nodes.items() if node == driver]
