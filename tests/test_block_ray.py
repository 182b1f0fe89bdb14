"""Block programs and ``tc.linalg`` on the shared 4-node Ray cluster: results against numpy,
tasks spread over the nodes and placed by the scheduler, blocks left where they were made."""

from __future__ import annotations

import dataclasses
import os
import time

import numpy as np
import pytest

import tensorc as tc
from tensorc.driver.block_programs import shipped
from tensorc.planning import cost
from tensorc.runtime.ray.arrays import DistributedArray
from tensorc.runtime.ray.held import Unwritten

pytestmark = pytest.mark.usefixtures("ray_cluster")
RNG = np.random.default_rng(5)


def spd(n: int) -> np.ndarray:
    x = RNG.random((n, n))
    return x @ x.T + n * np.eye(n)


def test_cholesky_on_ray_matches_numpy_and_stays_distributed():
    a = spd(2048)
    lower = tc.linalg.cholesky(tc.asarray(a, block_shape=(512, 512)))
    stats = tc.last_stats()
    assert stats["backend"] == "ray"
    (count,) = stats["block_counts"].values()  # chosen by the simulation, 512 rows or more
    assert count in (1, 2, 4)
    assert sum(stats["tasks_per_node"]) == stats["tasks"]
    value = lower.value()
    assert isinstance(value, DistributedArray) and value.grid == (count, count)
    np.testing.assert_allclose(lower.numpy(), np.linalg.cholesky(a), rtol=1e-10, atol=1e-10)


@pytest.fixture
def figures():
    """Price with the calibrated figures changed as given (``figures(call_seconds=...)``);
    the calibrated figures come back after the test."""
    calibrated = cost.machine()
    yield lambda **changes: cost.use_machine(dataclasses.replace(calibrated, **changes))
    cost.use_machine(calibrated)


def test_the_calibration_finds_the_nodes_sharing_this_machine():
    host_of, host_cores = cost.machine().hosts(4)  # the test cluster: 4 nodes here
    assert host_of == (0, 0, 0, 0)
    assert host_cores == (len(os.sched_getaffinity(0)),)
    assert "4 node(s) on 1 host(s)" in cost.machine().describe()
    # the test cluster inlines nothing above 1 KiB: no block is small enough for the small hop
    assert cost.machine().inline_bytes == 0 and cost.machine().small_call_seconds is None


def test_the_calibration_probes_the_small_hop_below_the_cluster_s_inline_threshold():
    from tensorc.runtime.ray.calibrate import INLINE_MARGIN, calibrate_cluster
    from tensorc.runtime.ray.cluster import RAY_INLINE_BYTES, connected

    found = calibrate_cluster(dataclasses.replace(connected(), inline_bytes=RAY_INLINE_BYTES))
    assert found["inline_bytes"] == RAY_INLINE_BYTES - INLINE_MARGIN
    assert found["small_call_seconds"] is not None  # (never above the hop: it is clamped)


def test_independent_work_spreads_over_separate_machines(figures):
    # separate one-core machines: the column blocks of X = L^-1 B are independent chains,
    # so they run side by side on the nodes, each block left where it was computed
    figures(host_of=(), host_cores=(), host_nodes=())
    n = 2048
    lower = np.tril(RNG.random((n, n))) + n * np.eye(n)
    rhs = RNG.random((n, 2048))
    placed = tc.asarray(lower, block_shape=(512, 512)).value()
    out = shipped("lower_solve").run(L=placed, B=tc.asarray(rhs, block_shape=(512, 512)).value(),
                                     NB=4, KB=4)
    stats = tc.last_stats()
    assert stats["tasks"] == 4 * 10 and sum(1 for t in stats["tasks_per_node"] if t) >= 2
    assert len(set(out["X"].block_nodes().values())) >= 2
    want = np.linalg.solve(lower, rhs)  # entries near zero compared on the result's scale
    np.testing.assert_allclose(out["X"].numpy(), want, rtol=1e-10, atol=1e-10 * abs(want).max())


def test_nodes_sharing_one_machine_keep_the_factorisation_on_one_node():
    # as calibrated: the 4 nodes share this machine's cores, so spreading adds no compute
    # and the factorisation stays in one call on one node (before the placer knew, it sent
    # 4 of its 20 tasks to the nodes holding their inputs); the factor's zero blocks are
    # made by no call (on the driver's node, if they are ever stored)
    a = spd(1536)
    out = shipped("cholesky").run(A=tc.asarray(a, block_shape=(384, 384)).value(), NB=4)
    stats = tc.last_stats()
    assert sorted(stats["tasks_per_node"])[-1] == stats["tasks"] == 20
    assert stats["remote_calls"] == 1
    nodes = out["L"].block_nodes()
    busy = stats["tasks_per_node"].index(20)
    assert {nodes[(i, j)] for i in range(4) for j in range(i + 1)} == {busy}
    assert all(isinstance(out["L"].layout.refs[(i, j)], Unwritten)
               for i in range(4) for j in range(i + 1, 4))
    # alone with the work on the machine, its call runs on all the machine's cores
    cores = min(cost.machine().hosts(4)[1][0], 4)  # the machine's, at most the 4 nodes' own
    assert stats["call_threads"] == [cores if n == busy else 1 for n in range(4)]
    np.testing.assert_allclose(out["L"].numpy(), np.linalg.cholesky(a), rtol=1e-10,
                               atol=1e-10)


def test_a_dear_call_boundary_keeps_a_small_factorisation_on_one_node(figures):
    # 50 ms per hop: far more than any of these 256-row tasks computes, separate machines
    figures(call_seconds=0.05, host_of=(), host_cores=(), host_nodes=())
    a = spd(1024)
    out = shipped("cholesky").run(A=tc.asarray(a, block_shape=(256, 256)).value(), NB=4)
    stats = tc.last_stats()
    assert sorted(stats["tasks_per_node"])[-1] == stats["tasks"] == 20
    assert stats["remote_calls"] == 1  # the factorisation's (its zero blocks are made by none)
    assert stats["call_threads"] == [1, 1, 1, 1]  # separate one-core machines
    np.testing.assert_allclose(out["L"].numpy(), np.linalg.cholesky(a), rtol=1e-10,
                               atol=1e-10)


def test_owner_computes_runs_each_task_on_the_node_owning_its_block(figures):
    """The placement the count choice takes at scale, run for real: each task on the node
    that owns the block it writes, block-cyclic over the nodes, and the factor's blocks
    left there."""
    from tensorc.codegen.block_dag import BlockDag
    from tensorc.codegen.block_layout import environment
    from tensorc.placement.block_placement import owner_node

    figures(host_of=(), host_cores=(), host_nodes=())
    a = spd(1536)
    out = shipped("cholesky").run(A=tc.asarray(a, block_shape=(384, 384)).value(), NB=4,
                                  scheduler="owner")
    stats = tc.last_stats()
    assert stats["scheduler"] == "owner"
    env, _ = environment(shipped("cholesky").program, {"A": (1536, 1536)}, {"NB": 4})
    dag = BlockDag(shipped("cholesky").program, env)
    owners = [owner_node(dag, dag.written(task)[0], 4) for task in dag.walk()]
    assert stats["tasks_per_node"] == [owners.count(node) for node in range(4)]
    assert stats["tasks_per_node"] == [5, 2, 5, 8]  # 20 tasks over the 2 x 2 node grid
    nodes = out["L"].block_nodes()
    assert all(nodes[(i, j)] == 2 * (i % 2) + j % 2 for i in range(4) for j in range(i + 1))
    np.testing.assert_allclose(out["L"].numpy(), np.linalg.cholesky(a), rtol=1e-10,
                               atol=1e-10)


def test_lshs_moves_fewer_bytes_than_round_robin():
    a = tc.asarray(spd(512), block_shape=(128, 128))
    moved = {}
    for scheduler in ("lshs", "round_robin"):
        out = shipped("cholesky").run(A=a.value(), NB=4, scheduler=scheduler)
        np.testing.assert_allclose(np.asarray(out["L"]), np.linalg.cholesky(a.numpy()),
                                   rtol=1e-10, atol=1e-10)
        moved[scheduler] = tc.last_stats()["inter_node_bytes"]
    assert moved["lshs"] < moved["round_robin"]


def test_an_input_cut_differently_is_re_cut_on_the_nodes(monkeypatch):
    """A block of the program's blocking that spans several stored blocks is cut inside the
    call that reads it (a placed step), not by a Ray task of its own."""
    from tensorc.runtime.ray import block_program

    tasks = []
    submit = block_program.submit
    monkeypatch.setattr(block_program, "submit",
                        lambda cluster, name, *args, **kw: tasks.append(name) or submit(
                            cluster, name, *args, **kw))
    a = spd(300)
    out = shipped("cholesky").run(A=tc.asarray(a, block_shape=(100, 100)).value(), NB=2)
    np.testing.assert_allclose(out["L"].numpy(), np.linalg.cholesky(a), rtol=1e-10, atol=1e-10)
    stats = tc.last_stats()
    assert tasks == [] and not stats["per_task"] and stats["waves"] == 1
    assert stats["tasks"] == 4  # the program's own: the 3 cut blocks are steps, not tasks
    assert sum(stats["tasks_per_node"]) == 4


def test_qr_solve_and_lstsq_on_ray():
    tall = RNG.random((4096, 16))
    q, r = tc.linalg.qr(tc.asarray(tall, block_shape=(1024, 16)))
    np.testing.assert_allclose(q.numpy() @ r.numpy(), tall, atol=1e-11)
    n = 600
    a = RNG.random((n, n)) + n * np.eye(n)
    b = RNG.random(n)
    x = tc.linalg.solve(tc.asarray(a, block_shape=(300, 300)), tc.asarray(b))
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(a, b), rtol=1e-9)
    y = tall @ np.arange(16.0)
    fit = tc.linalg.lstsq(tc.asarray(tall, block_shape=(1024, 16)), tc.asarray(y))
    np.testing.assert_allclose(np.asarray(fit[0]), np.arange(16.0), rtol=1e-8, atol=1e-8)


def test_a_matrix_and_a_vector_join_where_they_are():
    """``join_columns`` puts a vector beside a matrix cut in the same rows without a copy:
    every block of the join is a block of one of them, on its node (a driver array's cut at
    those rows, on the driver's node); other row blocks do not join."""
    from tensorc.runtime.ray.arrays import join_columns
    from tensorc.runtime.ray.tasks import stitch

    a, b = RNG.random((4096, 6)), RNG.random(4096)
    matrix = tc.asarray(a, block_shape=(1024, 6)).value()
    vector = tc.asarray(b, block_shape=(1024,)).value()
    joined = join_columns([matrix, vector])
    assert joined.shape == (4096, 7) and joined.blocks.bounds[1] == (0, 6, 7)
    for i in range(4):
        assert joined.blocks.refs[(i, 0)] is matrix.blocks.refs[(i, 0)]
        assert joined.blocks.refs[(i, 1)] is vector.blocks.refs[(i,)]
        assert joined.blocks.nodes[(i, 1)] == vector.block_nodes()[(i,)]
    on_driver = join_columns([matrix, b])
    assert set(on_driver.blocks.nodes[(i, 1)] for i in range(4)) == {0}  # the driver's node
    np.testing.assert_array_equal(on_driver.blocks.refs[(2, 1)], b[2048:3072])
    assert join_columns([matrix, tc.asarray(b, block_shape=(2048,)).value()]) is None
    assert join_columns([a, b]) is None  # nothing on the cluster: the caller concatenates
    # a row block of the join, stitched from the two blocks (the vector read as a column)
    region = (slice(0, 1024), slice(0, 7))
    pieces = joined.blocks.pieces(region)
    import ray
    block = stitch((1024, 7), tuple((into, out_of) for _, into, out_of in pieces),
                   ray.get([joined.blocks.refs[c] for c, _, _ in pieces]))
    np.testing.assert_array_equal(block, np.column_stack([a, b])[:1024])


def test_lstsq_on_ray_is_tsqr_of_a_and_b_where_they_are():
    """A tall ``lstsq`` on the cluster is TSQR without ``Q`` of ``[a | b]``, joined where the
    blocks are: numpy's answer, on the cluster, whether ``b`` is cut like ``a``, held by the
    driver, or cut otherwise (then concatenated on the nodes), and for arrays not made yet
    (the driver's data, joined there)."""
    a, b = RNG.random((65_536, 16)), RNG.random(65_536)  # past WHOLE_BYTES
    matrix = tc.asarray(a, block_shape=(8192, 16))
    made = [tc.asarray(b, block_shape=(8192,)), tc.asarray(b, block_shape=(16_384,))]
    tc.wait(matrix, *made)
    ex, eres, erank, es = np.linalg.lstsq(a, b, rcond=None)
    for left, vector in ((matrix, made[0]), (matrix, b), (matrix, made[1]),
                         (tc.asarray(a, block_shape=(8192, 16)), tc.asarray(b))):
        x, residuals, rank, s = tc.linalg.lstsq(left, vector)
        np.testing.assert_allclose(np.asarray(x), ex, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(np.asarray(residuals), eres, rtol=1e-9)
        assert rank == erank
        np.testing.assert_allclose(s, es, rtol=1e-9)
        stats = tc.last_stats()
        assert stats["backend"] == "ray" and stats["tasks"] == 2 * stats["block_counts"]["MB"]
    r = tc.linalg.qr(matrix, mode="r").numpy()  # numpy's mode="r": the same TSQR, of a alone
    stats = tc.last_stats()
    assert stats["backend"] == "ray" and stats["tasks"] == 2 * stats["block_counts"]["MB"]
    want = np.linalg.qr(a, mode="r")
    signs = np.sign(np.diagonal(r)) * np.sign(np.diagonal(want))
    np.testing.assert_allclose(signs[:, None] * r, want, rtol=1e-9, atol=1e-11)


def test_a_failing_kernel_on_a_worker_raises_the_numpy_error():
    with pytest.raises(np.linalg.LinAlgError, match="^Matrix is not positive definite$"):
        tc.linalg.cholesky(tc.asarray(-spd(256), block_shape=(128, 128)))


def test_a_block_program_runs_as_one_call_per_node_and_level():
    a = spd(1024)
    out = shipped("cholesky").run(A=tc.asarray(a, block_shape=(256, 256)).value(), NB=4)
    stats = tc.last_stats()
    assert stats["tasks"] == 20 and not stats["per_task"] and stats["waves"] == 1
    busy = sum(1 for t in stats["tasks_per_node"] if t)
    assert busy <= stats["remote_calls"] < stats["tasks"]
    assert stats["driver_seconds_per_task"] > 0
    peaks = stats["node_peak_rss_bytes"]  # each node worker's measured high-water mark
    assert len(peaks) == 4 and any(p is not None for p in peaks)
    assert stats["peak_rss_bytes"] == max(p for p in peaks if p is not None)
    refs = out["L"].blocks.refs
    assert len({refs[(i, j)] for i in range(4) for j in range(i + 1, 4)}) == 1  # 6 zero
    assert len({refs[(i, j)] for i in range(4) for j in range(i + 1)}) == 10  # blocks, 1 object
    np.testing.assert_allclose(out["L"].numpy(), np.linalg.cholesky(a), rtol=1e-10,
                               atol=1e-10)


def test_a_solve_is_placed_in_program_order_its_row_sums_after_the_factors(monkeypatch):
    """The run places tasks in the order the count choice simulates them, program order.
    Placed by readiness, the backward error's row sums of ``|A|`` (they read only ``A``)
    came right after the first factorisation, and LSHS put them on the rows' nodes while
    node 0 factored."""
    from tensorc.codegen.block_dag import BlockDag
    from tensorc.codegen.block_layout import environment
    from tensorc.runtime.ray import block_program

    placed = []
    submit = block_program._RayDagRun.submit
    monkeypatch.setattr(block_program._RayDagRun, "submit",
                        lambda self, task: placed.append(task) or submit(self, task))
    n = 1536
    a, b = RNG.random((n, n)) + n * np.eye(n), RNG.random((n, 1))
    out = shipped("lu_solve").run(A=tc.asarray(a, block_shape=(384, 384)).value(),
                                  B=tc.asarray(b, block_shape=(384, 1)).value(), NB=4, KB=1)
    env, _ = environment(shipped("lu_solve").program, {"A": (n, n), "B": (n, 1)},
                         {"NB": 4, "KB": 1})
    assert placed == list(BlockDag(shipped("lu_solve").program, env).walk())
    np.testing.assert_allclose(out["X"].numpy(), np.linalg.solve(a, b), rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("name, counts", [("lu_solve", {}), ("cholesky", {}), ("tsqr", {}),
                                          ("lu_solve", {"NB": 2, "KB": 1})])
def test_a_run_moves_the_bytes_its_count_choice_simulated(name, counts):
    """The run places its tasks as the count choice simulated them: the same order, the
    same reads a version has, the same frees (a solve's count simulation kept every block
    forever and read a block used twice by one task as two uses: 23.6 MB simulated, 14.2 MB
    placed), the same flops per task (the run priced raw flops: a solve in blocks of 768
    stitched from stored blocks of 384 moved 33.1 MB where its simulation said 37.8), with
    the counts the choice makes or others forced."""
    from tensorc.driver.block_programs import stored_layouts
    from tensorc.planning.block_counts import choose_counts

    n = 1536
    if name == "tsqr":
        arrays = {"A": RNG.random((65536, 40))}
        blocks = {"A": (8192, 40)}
    else:
        arrays = {"A": spd(n), "B": RNG.random((n, 1))}
        blocks = {"A": (384, 384), "B": (384, 1)}
        if name == "cholesky":
            del arrays["B"]
    values = {k: tc.asarray(a, block_shape=blocks[k]).value() for k, a in arrays.items()}
    out = shipped(name).run(**values, **counts)
    stats = tc.last_stats()
    choice = choose_counts(shipped(name).program, {k: v.shape for k, v in values.items()},
                           nodes=4, cores=cost.machine().cores_per_node,
                           fixed=stats["block_counts"], stored=stored_layouts(values))
    assert stats["inter_node_bytes"] == choice.chosen().moved_bytes
    assert stats["tasks"] == choice.chosen().tasks
    a = arrays["A"]
    if name == "lu_solve":
        np.testing.assert_allclose(out["X"].numpy(), np.linalg.solve(a, arrays["B"]),
                                   rtol=1e-10, atol=1e-12)
    elif name == "cholesky":
        np.testing.assert_allclose(out["L"].numpy(), np.linalg.cholesky(a), rtol=1e-10,
                                   atol=1e-10)
    else:  # R up to the signs of its rows
        r = out["R"].numpy()
        want = np.linalg.qr(a, mode="r")
        np.testing.assert_allclose(np.abs(r), np.abs(want), rtol=1e-8, atol=1e-8)


def test_waves_smaller_than_the_program_pass_blocks_between_them(monkeypatch):
    from tensorc.runtime.ray import block_program

    monkeypatch.setattr(block_program, "WINDOW", 3)
    a = spd(400)
    out = shipped("cholesky").run(A=tc.asarray(a, block_shape=(100, 100)).value(), NB=4)
    stats = tc.last_stats()
    assert stats["waves"] == 7 and stats["tasks"] == 20 and not stats["per_task"]
    np.testing.assert_allclose(out["L"].numpy(), np.linalg.cholesky(a), rtol=1e-10,
                               atol=1e-10)


@pytest.mark.parametrize(("columns", "puts"), [(2, 0), (40, 2)])  # blocks of 4.8 KB: sent
def test_a_numpy_input_beside_a_cluster_array_goes_to_the_cluster(monkeypatch, columns,
                                                                   puts):  # in calls; 96 KB
    import ray

    n = 600
    lower = np.tril(RNG.random((n, n))) + n * np.eye(n)
    rhs = RNG.random((n, columns))
    placed = tc.asarray(lower, block_shape=(300, 300)).value()
    put, made = ray.put, []
    monkeypatch.setattr(ray, "put", lambda value, **kw: made.append(value) or put(value, **kw))
    out = shipped("lower_solve").run(L=placed, B=rhs, NB=2, KB=1)
    monkeypatch.setattr(ray, "put", put)
    assert sum(1 for value in made if getattr(value, "shape", None) == (300, columns)) == puts
    assert tc.last_stats()["backend"] == "ray"
    np.testing.assert_allclose(np.asarray(out["X"]), np.linalg.solve(lower, rhs), rtol=1e-10)


def _kept_in_workers() -> list[int]:
    """How many results each node worker still keeps for a later call."""
    import ray

    from tensorc.runtime.ray.cluster import connected

    return ray.get([worker.forget.remote("no run has this prefix")
                    for worker in connected().workers])


def _check_qr(q: np.ndarray, r: np.ndarray, x: np.ndarray) -> None:
    """``q r`` is ``x``, ``q`` has orthonormal columns, ``r`` is numpy's R up to signs."""
    np.testing.assert_allclose(q @ r, x, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(q.T @ q, np.eye(x.shape[1]), atol=1e-12)
    np.testing.assert_allclose(np.abs(r), np.abs(np.linalg.qr(x, mode="r")), rtol=1e-8,
                               atol=1e-10)


def test_a_tree_s_leaf_results_stay_in_their_node_worker_for_its_last_call():
    # TSQR in 8 row blocks over 4 nodes, as tc.asarray spreads them: a leaf's tall Q
    # factor is read again only by its own node's last call, so it is kept in that worker
    # (not stored in the object store and read back), and taken back by that call
    x = RNG.random((4096, 12))
    placed = tc.asarray(x, block_shape=(512, 12)).value()
    out = shipped("tsqr_q").run(A=placed, MB=8)
    stats = tc.last_stats()
    assert stats["kept_results"] >= 4 and not stats["per_task"]
    _check_qr(out["Q"].numpy(), out["R"].numpy(), x)
    assert _kept_in_workers() == [0, 0, 0, 0]


FAILS_LATE = """
size M, N
blocks MB of M
input  A : f64[M, N]
output X : f64[M, N]
tensor K : f64
tensor G : f64
tensor S : f64
tensor F : f64
for i in 0:MB {
  K{i, 0} = A{i, 0} + A{i, 0}
  G{i, 0} = T(K{i, 0}) @ K{i, 0}
}
S{0, 0} = G{0, 0}
for i in 1:MB {
  S{0, 0} = S{0, 0} + G{i, 0}
}
F{0, 0} = chol(-S{0, 0})
for i in 0:MB {
  X{i, 0} = K{i, 0} @ F{0, 0}
}
"""


CHOLESKY_QR2 = """
size M, N
blocks MB of M
input  A : f64[M, N]
output Y : f64[M, N]
tensor G : f64
tensor S : f64
tensor F : f64
tensor X : f64
tensor H : f64
tensor P : f64
tensor E : f64
for i in 0:MB {
  G{i, 0} = T(A{i, 0}) @ A{i, 0}
}
S{0, 0} = G{0, 0}
for i in 1:MB {
  S{0, 0} = S{0, 0} + G{i, 0}
}
F{0, 0} = inv(T(chol(S{0, 0})))
for i in 0:MB {
  X{i, 0} = A{i, 0} @ F{0, 0}
  H{i, 0} = T(X{i, 0}) @ X{i, 0}
}
P{0, 0} = H{0, 0}
for i in 1:MB {
  P{0, 0} = P{0, 0} + H{i, 0}
}
E{0, 0} = inv(T(chol(P{0, 0})))
for i in 0:MB {
  Y{i, 0} = X{i, 0} @ E{0, 0}
}
"""


@pytest.mark.parametrize("handover", [True, False])
def test_two_hops_through_the_driver_in_one_call_a_node_do_not_wait_on_each_other(
        monkeypatch, handover):
    # Cholesky QR twice: each node's Gram block is summed and factored in the driver, the
    # nodes go on with that factor to a second Gram block, summed and factored in the
    # driver again. Handed over, a node's work is one call that posts G, pulls F, posts H
    # and pulls E: the driver must post F before it waits for any H
    from tensorc.runtime.ray import block_program, block_waves

    monkeypatch.setattr(block_waves, "HANDOVER", handover)
    monkeypatch.setattr(block_program, "recorded", lambda key: None)
    a = RNG.random((65536, 8))
    placed = tc.asarray(a, block_shape=(8192, 8)).value()
    started = time.monotonic()
    y = tc.compile(CHOLESKY_QR2).run(A=placed, MB=8)["Y"].numpy()
    assert time.monotonic() - started < 60
    assert tc.last_stats()["driver_tasks"] > 0
    np.testing.assert_allclose(y.T @ y, np.eye(8), atol=1e-10)
    np.testing.assert_allclose(np.abs(y), np.abs(np.linalg.qr(a)[0]), atol=1e-8)


FAILS_ON_THE_NODES = """
size M, N
blocks MB of M
input  A : f64[M, N]
output S : f64[N, N]
tensor G : f64
for i in 0:MB {
  G{i, 0} = chol(-(T(A{i, 0}) @ A{i, 0}))
}
S{0, 0} = G{0, 0}
for i in 1:MB {
  S{0, 0} = S{0, 0} + G{i, 0}
}
"""


def test_a_call_failing_before_it_posts_for_the_driver_raises_its_own_error_at_once():
    # the nodes' factors of negative definite blocks fail where they are made, before
    # the calls post them for the driver's sum: the driver hears so from the workers and
    # Ray gives the kernel's error, without waiting for a post that will not come
    from tensorc.runtime.ray import block_program

    program = tc.compile(FAILS_ON_THE_NODES)
    placed = tc.asarray(RNG.random((65536, 8)), block_shape=(8192, 8)).value()
    original = block_program.recorded
    block_program.recorded = lambda key: None
    try:
        started = time.monotonic()
        with pytest.raises(np.linalg.LinAlgError, match="^Matrix is not positive definite$"):
            program.run(A=placed, MB=8)
        assert time.monotonic() - started < 30
    finally:
        block_program.recorded = original


def test_a_run_that_fails_after_keeping_results_leaves_none_in_the_workers():
    # each tall K is kept on its node for the node's last call, which reads the Cholesky
    # factor of a negative definite matrix: that factor fails where the sum is, the last
    # calls never run and never take their K back, the error reaches the caller, and the
    # run's kept blocks are dropped
    program = tc.compile(FAILS_LATE)  # K blocks of 8 MB: each last call runs by its K
    placed = tc.asarray(RNG.random((262144, 16)), block_shape=(65536, 16)).value()
    with pytest.raises(np.linalg.LinAlgError, match="^Matrix is not positive definite$"):
        program.run(A=placed, MB=4)
    deadline = time.monotonic() + 10  # the drop is sent, not waited for
    while any(_kept_in_workers()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _kept_in_workers() == [0, 0, 0, 0]


def test_a_run_interrupted_while_its_calls_are_sent_leaves_none_in_the_workers(monkeypatch):
    # ^C after 4 of the wave's calls were sent: those calls keep their leaves' Q factors
    # for readers never sent; the interrupted run drops them
    from tensorc.runtime.ray import block_waves

    sent, submit_stage = [], block_waves.submit_stage

    def interrupted(*args, **kwargs):
        if len(sent) == 4:
            raise KeyboardInterrupt
        sent.append(1)
        return submit_stage(*args, **kwargs)

    placed = tc.asarray(RNG.random((4096, 12)), block_shape=(512, 12)).value()
    monkeypatch.setattr(block_waves, "submit_stage", interrupted)
    with pytest.raises(KeyboardInterrupt):
        shipped("tsqr_q").run(A=placed, MB=8)
    deadline = time.monotonic() + 10  # the drop is sent, not waited for
    while any(_kept_in_workers()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _kept_in_workers() == [0, 0, 0, 0]


def test_a_node_s_call_over_its_share_of_the_object_store_is_cut_into_calls(monkeypatch):
    # a 512 x 512 solve, one call on one node: with a node's budget for a call's stored
    # arguments cut to 4 blocks of 128 x 128, the node's work goes out as several calls,
    # each reading at most that, the results between them kept in the node's worker
    from tensorc.runtime.ray import block_program, block_waves
    from tensorc.runtime.ray.cluster import connected

    monkeypatch.setattr(block_program, "recorded", lambda key: None)
    a = spd(512)
    b = RNG.random((512, 1))
    placed, rhs = (tc.asarray(a, block_shape=(128, 128)).value(),
                   tc.asarray(b, block_shape=(128, 1)).value())
    shipped("lu_solve").run(A=placed, B=rhs, NB=4, KB=1)
    whole = tc.last_stats()
    block = 128 * 128 * 8
    share = 4.5 * block / (connected().store_bytes / connected().nodes)
    monkeypatch.setattr(block_waves, "CALL_STORE_SHARE", share)
    out = shipped("lu_solve").run(A=placed, B=rhs, NB=4, KB=1)
    cut = tc.last_stats()
    assert sorted(cut["tasks_per_node"]) == sorted(whole["tasks_per_node"])
    assert cut["remote_calls"] > whole["remote_calls"]
    assert cut["kept_results"] > whole["kept_results"]
    np.testing.assert_allclose(out["X"].numpy(), np.linalg.solve(a, b), rtol=1e-10)
    assert _kept_in_workers() == [0, 0, 0, 0]


def test_lshs_places_a_block_program_within_the_session_s_memory_limit(monkeypatch):
    # a 512 x 512 Cholesky LSHS keeps on one node; with a budget of half the bytes the
    # plan added to that node (its input blocks are the caller's), the factorisation
    # spreads and each node stays within it
    from tensorc.runtime.ray import block_program

    monkeypatch.setattr(block_program, "recorded", lambda key: None)
    a = spd(512)
    placed = tc.asarray(a, block_shape=(128, 128)).value()
    shipped("cholesky").run(A=placed, NB=4)
    free = tc.last_stats()
    session = tc.session.current()
    before = session.memory_limit
    session.memory_limit = free["max_node_plan_bytes"] // 2
    try:
        out = shipped("cholesky").run(A=placed, NB=4)
    finally:
        session.memory_limit = before
    capped = tc.last_stats()
    assert capped["memory_limit_bytes"] == free["max_node_plan_bytes"] // 2
    assert capped["max_node_plan_bytes"] <= capped["memory_limit_bytes"]
    assert capped["over_memory_limit_tasks"] == 0
    assert sum(1 for n in capped["tasks_per_node"] if n) > sum(
        1 for n in free["tasks_per_node"] if n)
    np.testing.assert_allclose(out["L"].numpy(), np.linalg.cholesky(a), rtol=1e-10,
                               atol=1e-10)


def _tsqr_q(x: np.ndarray, monkeypatch) -> tuple[dict, dict]:
    """``tsqr_q.tc`` on ``x`` in 8 row blocks, placed afresh (no recording replayed)."""
    from tensorc.runtime.ray import block_program

    monkeypatch.setattr(block_program, "recorded", lambda key: None)
    placed = tc.asarray(x, block_shape=(x.shape[0] // 8, x.shape[1])).value()
    out = shipped("tsqr_q").run(A=placed, MB=8)
    return out, tc.last_stats()


def test_a_tsqr_s_small_tree_runs_in_the_driver_and_its_r_stays_there(monkeypatch):
    # R factors of 8 x 8 (512 bytes, under the test cluster's 1 KiB inline size): each
    # tree task that reads a factor made on another node (or in the driver) runs in the
    # driver, between the leaves' calls and the last calls, instead of as calls of its
    # own; R, made by the tree's root, stays in the driver
    from tensorc.runtime.ray import block_program
    from tensorc.runtime.ray.cluster import connected
    from tensorc.runtime.ray.inline import Inline

    x = RNG.random((4096, 8))
    out, stats = _tsqr_q(x, monkeypatch)
    monkeypatch.setattr(block_program, "DRIVER_FLOPS", -1)  # no task runs in the driver
    _, on_nodes = _tsqr_q(x, monkeypatch)
    assert on_nodes["driver_tasks"] == 0 and stats["driver_tasks"] > 0
    assert stats["tasks"] == on_nodes["tasks"]
    assert stats["remote_calls"] < on_nodes["remote_calls"]
    assert type(out["R"].layout.refs[(0, 0)]) is Inline
    assert not out["R"].layout.refs[(0, 0)].value.flags.writeable  # as a Ray object
    assert out["R"].block_nodes() == {(0, 0): connected().driver_index}
    _check_qr(out["Q"].numpy(), out["R"].numpy(), x)
    assert _kept_in_workers() == [0, 0, 0, 0]


@pytest.mark.parametrize("handover", [True, False])
def test_the_driver_waits_for_its_tasks_inputs_without_the_submission_lock(monkeypatch,
                                                                           handover):
    # while the driver gets the leaves' R factors for the tree it runs (pulled from their
    # workers, or fetched through Ray), another thread may submit calls: the lock is let go
    import threading

    from tensorc.runtime.ray import block_waves
    from tensorc.runtime.ray.calls import SUBMITTING

    monkeypatch.setattr(block_waves, "HANDOVER", handover)
    free = []
    name = "_pulled" if handover else "fetch_results"
    owner = block_waves.Prepared if handover else block_waves
    original = getattr(owner, name)

    def fetched(*args, **kwargs):
        def other_thread():
            taken = SUBMITTING.acquire(blocking=False)
            free.append(taken)
            if taken:
                SUBMITTING.release()

        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, fetched)
    x = RNG.random((4096, 8))
    out, stats = _tsqr_q(x, monkeypatch)
    assert stats["driver_tasks"] > 0 and free and all(free)
    _check_qr(out["Q"].numpy(), out["R"].numpy(), x)


def test_the_calls_reading_the_drivers_values_are_sent_before_it_runs_them(monkeypatch):
    # handed over directly (runtime/ray/posted.py): every call of the wave is submitted
    # before the driver runs its units, the leaves' R factors are pulled from the workers
    # that posted them (none through Ray), and the calls reading the tree's factors pull
    # them from the driver (a node's leaves and its Q blocks are one call where both are
    # placed there: tests/test_block_waves.py); Q and R are numpy's
    from tensorc.runtime.ray import block_waves

    sent, sent_before, pulled, through_ray = [], [], [], []
    run_posting, pull = block_waves.Prepared._run_posting, block_waves.peer_blocks.pull_posted
    send = block_waves.Prepared._send

    def sending(self, c, *args):
        sent.append(c)
        return send(self, c, *args)

    def running(self, cluster, servers, prefix, refs, producers):
        sent_before.append((len(sent), len(self.calls)))
        return run_posting(self, cluster, servers, prefix, refs, producers)

    def pulling(endpoint, keys, timeout=None):
        pulled.extend(keys)
        return pull(endpoint, keys, timeout)

    monkeypatch.setattr(block_waves.Prepared, "_send", sending)
    monkeypatch.setattr(block_waves.Prepared, "_run_posting", running)
    monkeypatch.setattr(block_waves.peer_blocks, "pull_posted", pulling)
    monkeypatch.setattr(block_waves, "fetch_results",
                        lambda *a, **k: through_ray.append(a) or [])
    x = RNG.random((4096, 8))
    out, stats = _tsqr_q(x, monkeypatch)
    assert stats["driver_tasks"] > 0 and sent_before and not through_ray
    assert all(before == calls for before, calls in sent_before)
    assert pulled  # the leaves' factors, from their workers
    _check_qr(out["Q"].numpy(), out["R"].numpy(), x)


@pytest.mark.parametrize("handover", [True, False])
def test_a_kernel_failing_in_the_driver_raises_the_numpy_error_and_drops_what_was_kept(
        monkeypatch, handover):
    # FAILS_LATE with 4 columns: the Gram blocks (4 x 4) are summed across the nodes in
    # the driver, where the Cholesky factor of their negated sum fails; the tall K blocks
    # the nodes kept for their last calls are dropped (handed over: the calls already
    # waiting for the factor are told it will not come, and end)
    from tensorc.runtime.ray import block_waves

    monkeypatch.setattr(block_waves, "HANDOVER", handover)
    name = "_run_posting" if handover else "_run_in_driver"
    raised, run_in_driver = [], getattr(block_waves.Prepared, name)

    def recorded(self, *args):
        try:
            return run_in_driver(self, *args)
        except Exception as err:
            raised.append(err)
            raise

    monkeypatch.setattr(block_waves.Prepared, name, recorded)
    program = tc.compile(FAILS_LATE)
    placed = tc.asarray(RNG.random((4096, 4)), block_shape=(1024, 4)).value()
    with pytest.raises(np.linalg.LinAlgError, match="^Matrix is not positive definite$"):
        program.run(A=placed, MB=4)
    assert [type(err) for err in raised] == [tc.LinAlgError]  # the driver's factor failed
    deadline = time.monotonic() + 10  # the drop is sent, not waited for
    while any(_kept_in_workers()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _kept_in_workers() == [0, 0, 0, 0]


def test_a_node_worker_that_dies_while_its_node_lives_is_replaced_for_the_next_run():
    import ray

    from tensorc.runtime.ray.cluster import connected

    a = spd(512)
    placed = tc.asarray(a, block_shape=(128, 128)).value()
    shipped("cholesky").run(A=placed, NB=4)
    busy = tc.last_stats()["tasks_per_node"].index(20)  # the node of its one call
    ray.kill(connected().workers[busy])  # the worker process, not its node
    first = shipped("cholesky").run(A=placed, NB=4)  # the replay fails: task by task
    assert tc.last_stats()["per_task"] and not tc.last_stats()["replayed"]
    np.testing.assert_allclose(first["L"].numpy(), np.linalg.cholesky(a), rtol=1e-10,
                               atol=1e-10)
    again = shipped("cholesky").run(A=placed, NB=4)
    stats = tc.last_stats()
    assert not stats["per_task"] and stats["remote_calls"] < stats["tasks"]  # new workers
    np.testing.assert_allclose(again["L"].numpy(), np.linalg.cholesky(a), rtol=1e-10,
                               atol=1e-10)


@pytest.mark.parametrize("small_hop, counts", [(1.5e-3, {8}), (None, {2, 4})])
def test_a_tsqr_keeps_its_input_s_row_blocks_when_small_factors_cross_at_the_small_hop(
        figures, small_hop, counts):
    """At the figures this machine probes (7-9 ms a hop for a stored block, 1.5 ms for one
    Ray carries in its messages), a TSQR of an input in 8 row blocks keeps them: its R
    factors (12.8 KB) cross at the small hop. Priced as stored blocks (``None``), the tree's
    hops looked dearer than re-cutting 10-16 MB into 2 or 4 blocks, which ran slower."""
    from tensorc.driver.block_programs import stored_layouts
    from tensorc.planning.block_counts import choose_counts

    figures(network_bytes_per_second=450e6, task_seconds=80e-6, blas_flops_per_core=50e9,
            cores_per_node=1, call_seconds=8e-3, small_call_seconds=small_hop,
            inline_bytes=99 * 1024, host_of=(0, 0, 0, 0), host_cores=(2,))
    a = RNG.random((65536, 40))
    values = {"A": tc.asarray(a, block_shape=(8192, 40)).value()}
    choice = choose_counts(shipped("tsqr_q").program, {"A": a.shape}, nodes=4, cores=1,
                           preferred={"MB": 8}, stored=stored_layouts(values))
    assert choice.counts["MB"] in counts
    if small_hop is not None:
        made = tc.asarray(a, block_shape=(8192, 40))
        tc.wait(made)  # in 8 row blocks on the nodes (not the driver's data, cut afresh)
        out = tc.linalg.qr(made)
        assert tc.last_stats()["block_counts"] == {"MB": 8}
        q, r = np.asarray(out.Q), np.asarray(out.R)
        np.testing.assert_allclose(q @ r, a, atol=1e-10)
        np.testing.assert_allclose(q.T @ q, np.eye(40), atol=1e-10)
        np.testing.assert_array_equal(r, np.triu(r))
        np.testing.assert_allclose(np.abs(r), np.abs(np.linalg.qr(a, mode="r")), atol=1e-8)


def _no_placement(monkeypatch):
    """Fail the test if a block program's DAG is walked and placed, or a wave's payloads
    pickled (a run that replays submits a recording's calls instead)."""
    from tensorc.runtime.ray import block_program, block_waves

    def again(*args, **kwargs):
        raise AssertionError("the DAG was placed, or a payload pickled, again")

    monkeypatch.setattr(block_program._RayDagRun, "submit", again)
    monkeypatch.setattr(block_waves, "_pickled", again)


SUBMITTED = ("remote_calls", "waves", "kept_results")  # a replay counts its own calls


def test_a_second_call_on_inputs_laid_out_alike_replays_the_placed_waves(monkeypatch):
    # the same program on new values in the same blocks on the same nodes: the second call
    # binds the first's placed waves to its inputs, places nothing, and reports what the
    # first's placement promised; its answer is its own
    a, b = spd(512), spd(512)
    first = shipped("cholesky").run(A=tc.asarray(a, block_shape=(128, 128)).value(), NB=4)
    recorded = tc.last_stats()
    assert recorded["replayed"] is False
    _no_placement(monkeypatch)
    second = shipped("cholesky").run(A=tc.asarray(b, block_shape=(128, 128)).value(), NB=4)
    stats = tc.last_stats()
    assert stats["replayed"] is True and not stats["per_task"]
    assert {k: stats[k] for k in SUBMITTED} == {k: recorded[k] for k in SUBMITTED}
    np.testing.assert_allclose(second["L"].numpy(), np.linalg.cholesky(b), rtol=1e-10,
                               atol=1e-10)
    np.testing.assert_allclose(first["L"].numpy(), np.linalg.cholesky(a), rtol=1e-10,
                               atol=1e-10)
    assert second["L"].block_nodes() == first["L"].block_nodes()


def test_a_replayed_tsqr_keeps_and_takes_back_its_leaves_in_the_workers(monkeypatch):
    # kept results cross calls of one node under the replay's own key prefix
    x, y = RNG.random((4096, 12)), RNG.random((4096, 12))
    shipped("tsqr_q").run(A=tc.asarray(x, block_shape=(512, 12)).value(), MB=8)
    _no_placement(monkeypatch)
    out = shipped("tsqr_q").run(A=tc.asarray(y, block_shape=(512, 12)).value(), MB=8)
    stats = tc.last_stats()
    assert stats["replayed"] is True and stats["kept_results"] >= 4
    _check_qr(out["Q"].numpy(), out["R"].numpy(), y)
    assert _kept_in_workers() == [0, 0, 0, 0]


def test_a_replay_of_several_waves_passes_blocks_between_them(monkeypatch):
    from tensorc.runtime.ray import block_program

    monkeypatch.setattr(block_program, "WINDOW", 3)
    a, b = spd(400), spd(400)
    shipped("cholesky").run(A=tc.asarray(a, block_shape=(100, 100)).value(), NB=4)
    _no_placement(monkeypatch)
    out = shipped("cholesky").run(A=tc.asarray(b, block_shape=(100, 100)).value(), NB=4)
    stats = tc.last_stats()
    assert stats["replayed"] is True and stats["waves"] == 7
    np.testing.assert_allclose(out["L"].numpy(), np.linalg.cholesky(b), rtol=1e-10,
                               atol=1e-10)


def test_a_replay_reads_its_own_numpy_input_beside_a_cluster_array(monkeypatch):
    # the right-hand sides travel from the driver in each call: the replay cuts the new ones
    n = 600
    lower = np.tril(RNG.random((n, n))) + n * np.eye(n)
    placed = tc.asarray(lower, block_shape=(300, 300)).value()
    for columns in (2, 40):  # blocks sent inside the calls, and blocks put in Ray
        shipped("lower_solve").run(L=placed, B=RNG.random((n, columns)), NB=2, KB=1)
        rhs = RNG.random((n, columns))
        with monkeypatch.context() as patched:
            _no_placement(patched)
            out = shipped("lower_solve").run(L=placed, B=rhs, NB=2, KB=1)
        assert tc.last_stats()["replayed"] is True
        np.testing.assert_allclose(np.asarray(out["X"]), np.linalg.solve(lower, rhs),
                                   rtol=1e-10)


def test_inputs_in_other_blocks_or_on_other_nodes_are_placed_afresh():
    a = spd(512)
    factor = shipped("cholesky").run(A=tc.asarray(a, block_shape=(128, 128)).value(), NB=4)["L"]
    rhs = tc.asarray(RNG.random((512, 128)), block_shape=(128, 128)).value()
    computed = factor  # where the factorisation left its blocks
    spread = tc.asarray(factor.numpy(), block_shape=(128, 128)).value()  # block-cyclic
    assert computed.block_nodes() != spread.block_nodes()
    shipped("lower_solve").run(L=computed, B=rhs, NB=4, KB=1)
    out = shipped("lower_solve").run(L=spread, B=rhs, NB=4, KB=1)
    assert tc.last_stats()["replayed"] is False
    reblocked = tc.asarray(factor.numpy(), block_shape=(256, 256)).value()
    shipped("lower_solve").run(L=reblocked, B=rhs, NB=4, KB=1)
    assert tc.last_stats()["replayed"] is False
    shipped("lower_solve").run(L=computed, B=rhs, NB=4, KB=1)  # the first layout again
    assert tc.last_stats()["replayed"] is True
    want = np.linalg.solve(np.linalg.cholesky(a), rhs.numpy())
    np.testing.assert_allclose(np.asarray(out["X"].numpy()), want, rtol=1e-10, atol=1e-12)


def test_a_replay_cuts_its_own_input_stored_in_other_blocks(monkeypatch):
    # blocks of 100 read as 150: each program block is cut in a call from the stored
    # blocks it spans (Stitch steps), which the replay binds to the new input's blocks
    a, b = spd(300), spd(300)
    shipped("cholesky").run(A=tc.asarray(a, block_shape=(100, 100)).value(), NB=2)
    _no_placement(monkeypatch)
    out = shipped("cholesky").run(A=tc.asarray(b, block_shape=(100, 100)).value(), NB=2)
    assert tc.last_stats()["replayed"] is True
    np.testing.assert_allclose(out["L"].numpy(), np.linalg.cholesky(b), rtol=1e-10,
                               atol=1e-10)
