"""Two-level execution on the shared 4-node Ray cluster: calls per node and stage, cached
staged calls, transfers counted from arguments, re-laid-out copies kept on arrays."""

from __future__ import annotations

import numpy as np
import pytest

import tensorc as tc
from tensorc.placement.blocks import Blocks
from tensorc.placement.schedule import schedule
from tensorc.planning.plan import EINSUM_PLANS
from tensorc.runtime.ray.stages import INPUT, stage

pytestmark = pytest.mark.usefixtures("ray_cluster")


def _inputs(seed: int = 0):
    return (tc.random((48, 48, 48), grid=(4, 4, 4), seed=seed),
            tc.random((48, 8), grid=(4, 1), seed=seed + 1),
            tc.random((48, 8), grid=(4, 1), seed=seed + 2))


def test_calls_grow_with_nodes_and_stages_not_blocks():
    x, b, c = _inputs()
    result = tc.einsum("ijk,jf,kf->if", x, b, c, measure=False)
    expected = np.einsum("ijk,jf,kf->if", x.numpy(), b.numpy(), c.numpy())
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-10)
    stats = tc.last_stats()
    assert stats["tasks"] > 2 * stats["remote_calls"]
    assert stats["remote_calls"] <= stats["nodes"] * stats["stages"]
    assert set(stats["ran_on"].values()) <= set(range(4))
    folded = set(stats["folded_tasks"])  # the last stage's sums of partials, in the driver
    assert stats["driver_folds"] >= 1 and len(folded) >= stats["driver_folds"]
    assert all(stats["ran_on"][t] == (0 if t in folded else stats["node_of"][t])
               for t in stats["ran_on"])


def test_unmeasured_call_counts_transfers_from_arguments_and_never_reports_zero():
    x, b, c = _inputs(10)
    tc.einsum("ijk,jf,kf->if", x, b, c, scheduler="round_robin", measure=False)
    stats = tc.last_stats()
    assert stats["measured"] is False
    assert stats["measured_inter_node_bytes"] is None
    assert stats["transfer_bytes"] == stats["inter_node_bytes"] > 0  # what the model moved
    assert stats["measure_seconds"] is None


def test_measured_call_agrees_with_the_counted_transfers():
    x, b, c = _inputs(20)
    tc.einsum("ijk,jf,kf->if", x, b, c, scheduler="round_robin", measure=True)
    stats = tc.last_stats()
    counted, measured = stats["transfer_bytes"], stats["measured_inter_node_bytes"]
    assert abs(measured - counted) <= 0.2 * counted, (counted, measured)
    assert stats["measure_seconds"] >= 0


def test_a_repeated_call_reuses_its_staged_program():
    inputs = _inputs(30)
    tc.einsum("ijk,if,jf->if", *inputs, measure=False)
    plan = next(p for p in reversed(EINSUM_PLANS._plans.values())  # noqa: SLF001
                if p.subscripts == "ijk,if,jf->if")
    staged = len(plan.runs)
    again = _inputs(40)  # fresh arrays, same layout: the same staged calls
    tc.einsum("ijk,if,jf->if", *again, measure=False)
    stats = tc.last_stats()
    assert stats["plan_cached"] and len(plan.runs) == staged


def _two_node_layout(shape, grid, node_of):
    bounds = tuple(tuple(range(0, n, n // g)) + (n,) for n, g in zip(shape, grid, strict=True))
    return Blocks.layout(bounds, node_of, "float64")


def test_a_relayout_cuts_pieces_on_their_holder_and_stitches_on_the_target():
    plan = tc.plan("ij,jk->ik", (8, 8), (8, 8), grid={"i": 1, "j": 2, "k": 1})
    graph = plan.graph
    left = _two_node_layout((8, 8), (2, 2), {(0, 0): 0, (0, 1): 1, (1, 0): 0, (1, 1): 1})
    right = _two_node_layout((8, 8), (2, 1), {(0, 0): 0, (1, 0): 1})
    loads = {i: 0 for i, t in enumerate(graph.tasks) if t.kind == "load"}
    placed = schedule(graph, 2, "lshs", load_nodes=loads)
    # re-cut the left operand to one block per row pair ... on node 0
    target = {(0, 0): 0}
    program = stage(graph, placed, [left, right], {0: (((0, 8), (0, 8)), target)})
    relaid = program.repartition_transfers
    assert relaid and all(node == 0 for _, node, _ in relaid)
    # only the two blocks held on node 1 cross (whole: the new block needs all of each)
    assert sum(n for _, _, n in relaid) == 2 * 4 * 4 * 8
    assert {source[0] for source, _, _ in program.transfers} <= {INPUT, "out"}
    assert program.levels >= 1 and len(program.calls) <= 2 * program.levels
