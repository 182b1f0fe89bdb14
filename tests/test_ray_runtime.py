"""The Ray runtime against a real 4-node local cluster (one session-scoped fixture).

Results against numpy, placement against the schedule (the node each worker reports),
measured transfers against the modelled ones, LSHS against round-robin and Ray's default.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from numpy_reference import power_iteration_case

import tensorc as tc
from tensorc.placement.layout import block_cyclic_node

pytestmark = pytest.mark.usefixtures("ray_cluster")

BENCHMARKS = {
    "mttkrp_ijk_if_jf": ("ijk,if,jf->if", ["X", "B", "C"]),
    "mttkrp_ijk_jf_kf": ("ijk,jf,kf->if", ["X", "B", "C"]),
    "double_contraction": ("ijk,jkf->if", ["X", "Y"]),
}


def _operands(names, n, f, grid, seed=1):
    shapes = {"X": (n, n, n), "B": (n, f), "C": (n, f), "Y": (n, n, f)}
    grids = {"X": (grid,) * 3, "B": (grid, 1), "C": (grid, 1), "Y": (grid, grid, 1)}
    return [tc.random(shapes[k], grid=grids[k], seed=seed + i) for i, k in enumerate(names)]


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_benchmark_contractions_match_numpy(name):
    subscripts, names = BENCHMARKS[name]
    arrays = _operands(names, 32, 6, 2)
    result = tc.einsum(subscripts, *arrays)
    assert isinstance(result, tc.Array)
    expected = np.einsum(subscripts, *[a.numpy() for a in arrays], optimize=True)
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-10)
    stats = tc.last_stats()
    assert stats["backend"] == "ray" and stats["scheduler"] == "lshs"
    assert stats["nodes"] == 4
    assert stats["tasks"] > 0 and stats["run_seconds"] > 0


RANDOM_EINSUMS = [
    ("ij,jk->ik", [(12, 9), (9, 7)], [(3, 2), (2, 1)]),
    ("ij,jk->ik", [(12, 9), (9, 7)], [(3, 2), (3, 1)]),  # j cut differently: loads re-cut
    ("ii->i", [(10, 10)], [(2, 2)]),
    ("ij->", [(11, 5)], [(3, 1)]),
    ("bij,bjk->bik", [(4, 6, 5), (4, 5, 3)], [(2, 1, 1), (2, 1, 1)]),
    ("i,j->ij", [(7,), (5,)], [(2,), (1,)]),
    ("ijk,ik->j", [(6, 5, 4), (6, 4)], [(2, 2, 2), (2, 2)]),
    ("...j,j->...", [(3, 4, 5), (5,)], [(1, 2, 1), (1,)]),
    (",i->i", [(), (5,)], [(), (2,)]),  # a 0-d operand
]


@pytest.mark.parametrize("subscripts,shapes,grids", RANDOM_EINSUMS)
def test_einsums_match_numpy(subscripts, shapes, grids):
    pairs = zip(shapes, grids, strict=True)
    arrays = [tc.random(s, grid=g, seed=k) for k, (s, g) in enumerate(pairs)]
    result = tc.einsum(subscripts, *arrays)
    expected = np.einsum(subscripts, *[a.numpy() for a in arrays])
    got = result.numpy() if isinstance(result, tc.Array) else result
    np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_numpy_operands_on_ray_give_numpy():
    rng = np.random.default_rng(0)
    a, b = rng.random((40, 30)), rng.random((30, 20))
    result = tc.einsum("ij,jk->ik", a, b, backend="ray")
    assert isinstance(result, np.ndarray)
    np.testing.assert_allclose(result, a @ b, rtol=1e-10)
    assert tc.last_stats()["backend"] == "ray"
    scalar = tc.einsum("i,i", a[0], a[0], backend="ray")
    assert np.isclose(scalar, a[0] @ a[0]) and np.ndim(scalar) == 0


def test_tensordot_with_arrays():
    a = tc.random((8, 6, 5), grid=(2, 1, 1), seed=3)
    b = tc.random((6, 5, 4), grid=(1, 1, 2), seed=4)
    result = tc.tensordot(a, b, axes=2)
    assert isinstance(result, tc.Array)
    np.testing.assert_allclose(result.numpy(), np.tensordot(a.numpy(), b.numpy(), 2), rtol=1e-10)


def test_result_dtype_follows_numpy():
    a = tc.asarray(np.arange(12, dtype=np.int32).reshape(3, 4), grid=(3, 1))
    b = tc.asarray(np.ones((4, 2), dtype=np.int64), grid=(1, 1))
    result = tc.einsum("ij,jk->ik", a, b)
    expected = np.einsum("ij,jk->ik", a.numpy(), b.numpy())
    assert result.dtype == expected.dtype
    np.testing.assert_array_equal(result.numpy(), expected)


def test_creation_places_blocks_on_their_layout_nodes(ray_cluster):
    x = tc.random((16, 12, 8), grid=(4, 2, 1), seed=7)
    assert x.grid == (4, 2, 1) and x.block_shape == (4, 6, 8)
    assert x.node_grid == (2, 2, 1)  # 4 nodes factored over the block grid, largest first
    nodes = x.block_nodes()
    assert nodes == {c: block_cyclic_node(c, x.node_grid) for c in np.ndindex(4, 2, 1)}
    zeros, ones = tc.zeros((5, 3), grid=(2, 1)), tc.ones((5, 3), grid=(1, 3))
    np.testing.assert_array_equal(np.asarray(zeros), np.zeros((5, 3)))
    np.testing.assert_array_equal(np.asarray(ones), np.ones((5, 3)))
    same = tc.random((16, 12, 8), grid=(4, 2, 1), seed=7)
    np.testing.assert_array_equal(same.numpy(), x.numpy())  # seeded per block: deterministic
    data = np.arange(24.0).reshape(6, 4)
    np.testing.assert_array_equal(tc.asarray(data, block_shape=(4, 4)).numpy(), data)


def test_default_blocking_gives_every_cpu_a_block():
    x = tc.random((64, 32))
    assert x.grid == (2, 2)  # four one-CPU nodes: 2 x 2 blocks of 32 x 16
    assert sorted(x.block_nodes().values()) == [0, 1, 2, 3]


@pytest.mark.parametrize("scheduler", ["lshs", "round_robin"])
def test_each_task_ran_where_the_schedule_put_it(scheduler):
    arrays = _operands(["X", "B", "C"], 32, 6, 2)
    tc.einsum("ijk,jf,kf->if", *arrays, scheduler=scheduler)
    stats = tc.last_stats()
    assert stats["scheduler"] == scheduler
    assert stats["ran_on"], "no remote task reported its node"
    for task, node in stats["ran_on"].items():
        assert node == stats["node_of"][task], f"task {task} ran on node {node}"


@pytest.mark.parametrize("name", ["mttkrp_ijk_if_jf", "double_contraction"])
def test_measured_bytes_match_modelled(name):
    subscripts, names = BENCHMARKS[name]
    arrays = _operands(names, 48, 16, 4)
    tc.einsum(subscripts, *arrays, scheduler="round_robin")  # round-robin moves plenty
    stats = tc.last_stats()
    modelled, measured = stats["inter_node_bytes"], stats["measured_inter_node_bytes"]
    assert modelled > 0
    assert abs(measured - modelled) <= 0.2 * modelled, (modelled, measured)


PLACEMENT = {  # benchmark -> (N, F, blocks per dimension, check max-recv against ray_default)
    "mttkrp_ijk_if_jf": (64, 64, 4, True),  # blocks the plan cuts stay well above 1 KiB
    "mttkrp_ijk_jf_kf": (48, 16, 4, True),
    # with X and Y laid out block-cyclically on their own first two block dimensions, half
    # the pairs need a Y block from another node whoever schedules; LSHS keeps the total
    # under half of round-robin's but its busiest receiver gets ~1.4x ray_default's here
    # (choosing layouts that co-locate X and Y is the planner's job, not the scheduler's)
    "double_contraction": (128, 16, 4, False),
}


@pytest.mark.parametrize("name", sorted(PLACEMENT))
def test_lshs_moves_at_most_half_of_round_robin(name):
    subscripts, names = BENCHMARKS[name]
    n, f, blocks, check_busiest = PLACEMENT[name]
    moved = {}
    for scheduler in ("lshs", "round_robin", "ray_default"):
        fresh = _operands(names, n, f, blocks)  # no cached copies from an earlier call
        tc.einsum(subscripts, *fresh, scheduler=scheduler)
        stats = tc.last_stats()
        # placement only: under LSHS the planner may re-lay inputs out first (a planning
        # decision, priced and measured in test_ray_planning.py); the bytes compared here
        # are those the task graph's placement moved
        placed = [a - b for a, b in zip(stats["measured_node_recv_bytes"],
                                        stats["measured_node_repartition_bytes"], strict=True)]
        moved[scheduler] = (sum(placed), max(placed))
        if scheduler != "ray_default":  # the only unpinned one: its model is a guess
            modelled, measured = stats["inter_node_bytes"], stats["measured_inter_node_bytes"]
            assert abs(measured - modelled) <= 0.2 * max(modelled, 1), (scheduler, stats)
    assert moved["lshs"][0] <= 0.5 * moved["round_robin"][0], moved
    if check_busiest:
        assert moved["lshs"][1] <= moved["ray_default"][1], moved


def test_cached_copies_are_free_to_read():
    arrays = _operands(["X", "Y"], 32, 8, 2)
    for array in arrays:
        array.numpy()  # Ray now caches every block on the driver's node too
    tc.einsum("ijk,jkf->if", *arrays, scheduler="round_robin")
    stats = tc.last_stats()
    # Ray's object sizes include each object's serialisation header (about 190 bytes for a
    # numpy block), which the model does not count: at most 16 moved blocks' worth here
    headers = 16 * 192
    assert abs(stats["measured_inter_node_bytes"] - stats["inter_node_bytes"]) <= 0.2 * max(
        stats["inter_node_bytes"], 1) + headers, stats
    smallest_input_block = 16 * 16 * 8 * 8  # a Y block; X blocks are 16 x 16 x 16
    assert stats["node_recv_bytes"][0] < smallest_input_block  # only partial sums move there


def test_stats_keys():
    arrays = _operands(["X", "Y"], 16, 4, 2)
    tc.wait(*arrays)  # made: a program making them this small would run on the driver
    tc.einsum("ijk,jkf->if", *arrays)
    stats = tc.last_stats()
    for key in ("tasks", "inter_node_bytes", "max_node_recv_bytes", "max_node_memory_bytes",
                "lower_bound_bytes", "scheduler", "plan_seconds", "run_seconds",
                "measured_inter_node_bytes"):
        assert key in stats, key
    assert stats["lower_bound_bytes"] <= stats["max_node_recv_bytes"] * 4


def test_local_backend_refuses_arrays():
    x = tc.random((4, 4), grid=(2, 2))
    with pytest.raises(tc.PlanError, match="backend='local' cannot take tc.Array operands"):
        tc.einsum("ij->i", x, backend="local")
    with pytest.raises(tc.PlanError, match="out= takes a numpy array"):
        tc.einsum("ij->i", x, out=np.empty(4))


def test_dead_address_fails_fast_and_keeps_the_session():
    started = time.perf_counter()
    with pytest.raises(tc.ExecutionError, match="cannot reach a Ray cluster at '127.0.0.1:9'"):
        tc.init(address="127.0.0.1:9")
    assert time.perf_counter() - started < 5
    x = tc.random((4, 4), grid=(2, 2))  # the running session is untouched
    assert float(np.asarray(tc.einsum("ij->", x))) == pytest.approx(x.numpy().sum())


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_tc_program_with_distributed_inputs_keeps_results_distributed():
    a, x0, x, nrm = power_iteration_case()
    program = tc.compile(EXAMPLES / "power_iteration.tc")
    out = program.run(A=tc.asarray(a, grid=(2, 2)), x0=tc.asarray(x0, grid=(2,)))
    assert isinstance(out["x"], tc.Array) and isinstance(out["nrm"], tc.Array)
    np.testing.assert_allclose(out["x"].numpy(), x, rtol=1e-12)
    np.testing.assert_allclose(out["nrm"].numpy(), nrm, rtol=1e-12)
    assert tc.last_stats()["backend"] == "ray"


def test_tc_min_plus_on_ray_matches_numpy():
    rng = np.random.default_rng(4)
    w = rng.integers(1, 10, size=(6, 6)).astype(float)
    w[rng.random((6, 6)) < 0.5] = np.inf
    np.fill_diagonal(w, 0.0)
    program = tc.compile(EXAMPLES / "shortest_path.tc", grid={"k": 3})
    out = program.run(W=tc.asarray(w, grid=(2, 3)))
    expected = np.min(w[:, :, None] + w[None, :, :], axis=1)
    np.testing.assert_array_equal(out["step"].numpy(), expected)
