"""Planned runs on the shared 4-node Ray cluster: the plan is what runs, and it moves what
the model says.

For the mission's contractions, matmul and ``X^T X`` with numpy operands (laid out by the
plan's grid on every call): the answer matches numpy, every task ran on the node the
schedule chose, and the bytes Ray moved — in all and into the busiest node — are within
20 % of the modelled ones. A ``tc.Array`` cut against the plan is repartitioned when the
model says so (the repartition's bytes measured and modelled too), and computed in place
when it says that. The ALS program runs on Ray as one planned program.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tensorc as tc

pytestmark = pytest.mark.usefixtures("ray_cluster")

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TOLERANCE = 0.2

N, F = 64, 16
CASES = {  # name -> (subscripts, operand shapes); modest sizes, every block above 1 KiB
    "mttkrp_ijk_if_jf": ("ijk,if,jf->if", [(N, N, N), (N, F), (N, F)]),
    "mttkrp_ijk_jf_kf": ("ijk,jf,kf->if", [(N, N, N), (N, F), (N, F)]),
    "double_contraction": ("ijk,jkf->if", [(N, N, N), (N, N, F)]),
    "matmul": ("ik,kj->ij", [(256, 256), (256, 256)]),
    "xtx": ("ki,kj->ij", [(4096, 32), (4096, 32)]),
    # nine rows over four nodes: the partial products are reduce-scattered in uneven pieces
    "matvec_reduce_scatter": ("ik,kj->ij", [(9, 16384), (16384, 1)]),
}
REDUCE_SCATTERED = {  # the plans that end with a reduce-scatter on 4 nodes
    "matvec_reduce_scatter": "reduce-scatter along i:4 over k:4 (4 pieces a block, 1 round)",
}


def _operands(name: str, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    _, shapes = CASES[name]
    if name == "xtx":
        x = rng.random(shapes[0])
        return [x, x]
    return [rng.random(s) for s in shapes]


def _close(measured: int, modelled: int) -> bool:
    return abs(measured - modelled) <= TOLERANCE * max(modelled, 1)


def _check_followed_the_plan(stats: dict) -> None:
    assert stats["ran_on"], "no remote task reported its node"
    wrong = {t: n for t, n in stats["ran_on"].items() if n != stats["node_of"][t]}
    assert not wrong, f"tasks ran elsewhere than scheduled: {wrong}"
    assert _close(stats["measured_inter_node_bytes"], stats["inter_node_bytes"]), (
        stats["inter_node_bytes"], stats["measured_inter_node_bytes"])
    assert _close(stats["measured_max_node_recv_bytes"], stats["max_node_recv_bytes"]), (
        stats["max_node_recv_bytes"], stats["measured_max_node_recv_bytes"])


@pytest.mark.parametrize("name", sorted(CASES))
def test_planned_run_matches_numpy_and_moves_the_modelled_bytes(name):
    subscripts, _ = CASES[name]
    operands = _operands(name)
    result = tc.einsum(subscripts, *operands)
    np.testing.assert_allclose(result, np.einsum(subscripts, *operands), rtol=1e-10)
    stats = tc.last_stats()
    assert stats["backend"] == "ray" and stats["scheduler"] == "lshs"
    assert stats["nodes"] == 4 and stats["planner"] in ("smt", "greedy")
    assert stats["repartitioned"] == [] and stats["repartition_bytes"] == 0
    _check_followed_the_plan(stats)
    bound = stats["lower_bound_bytes"]
    assert bound > 0 and stats["lower_bound_ratio"] == stats["max_node_recv_bytes"] / bound
    assert stats["reduce_scatter"] == REDUCE_SCATTERED.get(name)


def test_heuristic_plan_also_runs_where_scheduled():
    subscripts, _ = CASES["mttkrp_ijk_jf_kf"]
    operands = _operands("mttkrp_ijk_jf_kf", seed=1)
    result = tc.einsum(subscripts, *operands, planner="heuristic")
    np.testing.assert_allclose(result, np.einsum(subscripts, *operands), rtol=1e-10)
    stats = tc.last_stats()
    assert stats["planner"] == "heuristic"
    _check_followed_the_plan(stats)


def test_an_array_cut_against_the_plan_is_repartitioned_and_measured():
    # X made in column blocks: X^T X would need every column block on every node; the plan
    # cuts X by rows, and moving it there is modelled cheaper than computing in place
    # (compute() makes it now, in its own blocking: not left for the plan to lay out)
    x = np.random.default_rng(2).random((4096, 32))
    columns = tc.asarray(x, grid=(1, 4)).compute()
    result = tc.einsum("ki,kj->ij", columns, columns)
    assert isinstance(result, tc.Array)
    np.testing.assert_allclose(result.numpy(), x.T @ x, rtol=1e-10)
    stats = tc.last_stats()
    assert stats["repartitioned"] == [0, 1]
    assert "k:4" in stats["grid"]
    assert stats["repartition_bytes"] > 0
    assert _close(stats["measured_repartition_bytes"], stats["repartition_bytes"]), stats
    per_node = zip(stats["measured_node_repartition_bytes"], stats["node_repartition_bytes"],
                   strict=True)
    assert all(_close(measured, modelled) for measured, modelled in per_node), stats
    _check_followed_the_plan(stats)  # totals include the repartition
    assert stats["inter_node_bytes"] >= stats["repartition_bytes"]


def test_an_array_in_a_good_layout_is_computed_in_place():
    # X cut along i: the second MTTKRP reads it where it is
    rng = np.random.default_rng(3)
    x, b, c = rng.random((N, N, N)), rng.random((N, F)), rng.random((N, F))
    rows = tc.asarray(x, grid=(4, 1, 1))
    result = tc.einsum("ijk,jf,kf->if", rows, b, c)
    np.testing.assert_allclose(result.numpy(), np.einsum("ijk,jf,kf->if", x, b, c),
                               rtol=1e-10)
    stats = tc.last_stats()
    assert stats["repartitioned"] == [] and stats["measured_repartition_bytes"] == 0
    _check_followed_the_plan(stats)


def test_als_program_runs_on_ray():
    rng = np.random.default_rng(4)
    r, u = rng.random((512, 512)), rng.random((512, 16))
    program = tc.compile(EXAMPLES / "als.tc")
    out = program.run(R=r, U=u)  # numpy in, numpy out; planned for the session's 4 nodes
    assert isinstance(out["W"], np.ndarray)
    np.testing.assert_allclose(out["V"], r.T @ u, rtol=1e-12)
    np.testing.assert_allclose(out["W"], r @ (r.T @ u), rtol=1e-12)
    stats = tc.last_stats()  # the whole run: every statement, and their sums
    assert stats["backend"] == "ray" and stats["nodes"] == 4
    statements = stats["statements"]
    assert [s["label"] for s in statements] == ["V@1", "W@1"]
    for statement in statements:
        _check_followed_the_plan(statement)
    for key in ("tasks", "inter_node_bytes", "measured_inter_node_bytes", "run_seconds"):
        assert stats[key] == sum(s[key] for s in statements), key
    _check_followed_the_plan({**stats, "ran_on": statements[-1]["ran_on"],
                              "node_of": statements[-1]["node_of"]})
    # R already on the cluster by rows: V@1 wants it by columns and W@1 reads the rows,
    # so V@1 works on a replica and every result stays on the cluster
    out = program.run(R=tc.asarray(r, grid=(4, 1)), U=tc.asarray(u, grid=(4, 1)))
    assert isinstance(out["W"], tc.Array)
    np.testing.assert_allclose(out["W"].numpy(), r @ (r.T @ u), rtol=1e-12)
    np.testing.assert_allclose(out["V"].numpy(), r.T @ u, rtol=1e-12)
    layouts = list(program.runner._layouts.values())[-1]  # noqa: SLF001
    assert any("reads R through a replica" in d for d in layouts.decisions), layouts.decisions
