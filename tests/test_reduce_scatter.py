"""A reduction ended as a reduce-scatter: its lowering, its rule and its figures.

The lowering (``tensorc.codegen.reduce_scatter``) is run in-process and compared with numpy,
its tasks counted; the rule (``tensorc.planning.reduce_scatter``) is held to its cases; the
simulation of a reduce-scattered plan must receive exactly ``1 - 1/g`` of a block per block
on every node of a group, and the closed form must equal it node by node, pieces of uneven
length included.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from planning_problems import problem

import tensorc as tc
from tensorc.codegen.blocking import Blocking
from tensorc.codegen.lower import lower_to_tasks
from tensorc.codegen.reduce_scatter import Scatter, member_pieces
from tensorc.codegen.taskgraph import KIND_CODE, LOAD
from tensorc.planning import prediction, symbolic_cost
from tensorc.planning.distribution import Candidate, candidate_arrays, model
from tensorc.planning.reduce_scatter import group_radices, scatter_for
from tensorc.planning.search import candidate_table
from tensorc.runtime.task_pool import TaskPool


def candidate(plan, grid: dict[str, int], counts: dict[str, int]) -> Candidate:
    return Candidate(tuple((i, grid.get(i, 1)) for i in plan.indices),
                     tuple((i, counts.get(i, 1)) for i in plan.indices))


def along(dim: str, axes) -> Scatter:
    """Every piece cut along ``dim``, in the rounds a plan gives a group that size."""
    group = math.prod(p for _, p in axes)
    return Scatter(((dim, group),), axes, group_radices(group))


def compute_tasks(graph) -> int:
    return int(np.count_nonzero(graph.columns().kind != KIND_CODE[LOAD]))


def lowered(subscripts, shapes, counts, scatter):
    plan = problem(subscripts, shapes, 2)
    sizes = plan.sizes
    block = tuple((i, max(1, math.ceil(sizes[i] / c))) for i, c in sorted(counts.items()))
    blocking = Blocking(sizes=tuple(sorted(sizes.items())), block=block)
    return lower_to_tasks(plan.program, blocking, scatter)


LOWERED = [
    # (subscripts, shapes, block counts, scatter): even pieces, mixed radices, several
    # partials per member (a fold first), uneven pieces and a ragged last block
    ("ijk,jkf->if", [(24, 8, 12), (8, 12, 4)], {"i": 1, "j": 1, "k": 4, "f": 1},
     along("i", (("k", 4),))),
    ("ijk,jkf->if", [(24, 8, 12), (8, 12, 4)], {"i": 2, "j": 2, "k": 6, "f": 2},
     along("i", (("j", 2), ("k", 3)))),
    ("ijk,jf,kf->if", [(16, 8, 12), (8, 4), (12, 4)], {"i": 2, "j": 4, "k": 3, "f": 1},
     along("i", (("j", 2), ("k", 2)))),
    ("ijk,jkf->if", [(13, 8, 12), (8, 12, 4)], {"i": 1, "j": 2, "k": 6, "f": 1},
     along("i", (("k", 6),))),
    ("ijk,jkf->if", [(23, 8, 12), (8, 12, 4)], {"i": 3, "j": 2, "k": 6, "f": 2},
     along("i", (("j", 2), ("k", 3)))),
    # pieces cut along two indices (i by the first rounds, then f), a ragged f block
    ("ijk,jkf->if", [(8, 8, 16), (8, 16, 9)], {"i": 2, "j": 1, "k": 8, "f": 2},
     Scatter((("i", 4), ("f", 2)), (("k", 8),), (4, 2))),
]


@pytest.mark.parametrize(("subscripts", "shapes", "counts", "scatter"), LOWERED)
def test_a_reduce_scatter_gives_numpys_answer_with_the_tasks_it_promises(
        subscripts, shapes, counts, scatter):
    graph = lowered(subscripts, shapes, counts, scatter)
    rng = np.random.default_rng(5)
    operands = [rng.random(s) for s in shapes]
    out = TaskPool(1).run(graph, None, operands)
    np.testing.assert_allclose(out, np.einsum(subscripts, *operands), rtol=1e-12)
    output = subscripts.split("->")[1]
    blocks = math.prod(counts[i] for i in output)
    summed = math.prod(counts[i] for i in set(counts) - set(output))
    radices = scatter.rounds
    folds = int(summed // scatter.group > 1)
    kinds = Counter(task.kind for task in graph.tasks)
    assert kinds["apply"] == blocks * scatter.group * sum(radices)
    assert kinds["reduce"] == blocks * scatter.group * (len(radices) + folds)
    # the output is cut g times finer along the scattered indices, and tiles it exactly
    assert len(graph.outputs) == blocks * scatter.group
    covered = np.zeros(graph.output_shape, dtype=np.int64)
    for _, slices in graph.outputs:
        covered[slices] += 1
        assert all(s.stop > s.start for s in slices)
    assert (covered == 1).all()


def test_pieces_are_cut_evenly_and_in_member_order():
    assert group_radices(4050) == (5, 5, 3, 3, 3, 3, 2)
    assert group_radices(4096) == (4,) * 6 and group_radices(8) == (4, 2)
    scatter = along("i", (("k", 6),))
    before, after, final = member_pieces({"i": 13}, scatter)  # radices 3 then 2
    lo, hi = final["i"]
    # member r = 2 d0 + d1 keeps piece d0 of the thirds, then half d1 of it: piece r
    assert lo.tolist() == [0, 2, 4, 6, 8, 10] and hi.tolist() == [2, 4, 6, 8, 10, 13]
    assert (hi - lo).max() - (hi - lo).min() <= 1
    assert (before[:, 0] == 13).all() and (after[:, -1] == hi - lo).all()
    # two indices: the first round cuts i in 4, the second f in 2
    both = Scatter((("i", 4), ("f", 2)), (("k", 8),), (4, 2))
    assert both.round_dims() == ["i", "f"]  # rounds of 4 and 2
    before, after, final = member_pieces({"i": 8, "f": 6}, both)
    assert (after[:, -1] == 2 * 3).all() and (before[:, 0] == 48).all()
    with pytest.raises(ValueError, match="cuts"):
        Scatter((("i", 2), ("f", 4)), (("k", 8),), (4, 2))  # no round cuts 2 pieces
    with pytest.raises(ValueError, match="rounds"):
        Scatter((("i", 8),), (("k", 8),), (4, 4))  # 16 is not the group of 8


def test_the_rule_scatters_only_where_a_fold_would_leave_nodes_idle():
    plan = problem("ijk,jkf->if", [(64, 64, 64), (64, 64, 16)], 8)
    # one output block per cell, 8 nodes along k: scattered along i (64 rows beat 16 cols)
    assert scatter_for(plan, candidate(plan, {"k": 8}, {"k": 8})) == along("i", (("k", 8),))
    # 8 output blocks per cell: every node of the group already folds one
    assert scatter_for(plan, candidate(plan, {"k": 8}, {"k": 8, "i": 8})) is None
    # nothing summed across nodes
    assert scatter_for(plan, candidate(plan, {"i": 8}, {"i": 8, "k": 2})) is None
    # a 4 x 4 output in 8 pieces: i cut in 4 first, then f in 2
    small = problem("ijk,jkf->if", [(4, 64, 64), (64, 64, 4)], 8)
    assert scatter_for(small, candidate(small, {"k": 8}, {"k": 8})) == Scatter(
        (("i", 4), ("f", 2)), (("k", 8),), (4, 2))
    # a 2 x 2 output cannot be cut in 8 pieces
    tiny = problem("ijk,jkf->if", [(2, 64, 64), (64, 64, 2)], 8)
    assert scatter_for(tiny, candidate(tiny, {"k": 8}, {"k": 8})) is None


def test_blocks_fixed_in_advance_are_measured_as_the_lowering_cuts_them():
    # 10 rows in blocks of 7: the last block has 3 rows, too few for 4 pieces along i
    fixed = problem("ik,kj->ij", [(10, 256), (256, 1)], 4, placed_counts={"i": 2},
                    placed_blocks={"i": 7})
    assert scatter_for(fixed, candidate(fixed, {"k": 4}, {"i": 2, "k": 4})) is None
    plan = tc.plan("ik,kj->ij", (10, 256), (256, 1), nodes=4,
                   block_shape=((7, 64), (64, 1)))
    assert all(s.stop > s.start for _, slices in plan.graph.outputs for s in slices)


@pytest.mark.parametrize(("subscripts", "shapes", "nodes", "grid", "counts"), [
    ("ijk,jkf->if", [(64, 64, 64), (64, 64, 16)], 8, {"k": 8}, {"k": 8}),
    ("ijk,jkf->if", [(64, 64, 64), (64, 64, 16)], 8, {"k": 8}, {"i": 2, "j": 2, "k": 16}),
    ("ijk,jkf->if", [(61, 64, 64), (64, 64, 16)], 12, {"j": 2, "k": 6},
     {"i": 3, "j": 2, "k": 6}),
    ("ijk,jf,kf->if", [(50, 30, 28), (30, 7), (28, 7)], 12, {"i": 2, "j": 3, "k": 2},
     {"i": 2, "j": 3, "k": 4}),
    ("ijk,if,jf->if", [(48, 32, 8), (48, 8), (32, 8)], 16, {"f": 2, "j": 8},
     {"f": 2, "j": 8}),
    # cut along two indices, ragged blocks along both
    ("ijk,jkf->if", [(7, 16, 16), (16, 16, 11)], 16, {"k": 16}, {"k": 16, "f": 2}),
])
def test_the_closed_form_equals_the_simulation_of_a_reduce_scatter(
        subscripts, shapes, nodes, grid, counts):
    plan = problem(subscripts, shapes, nodes)
    chosen = candidate(plan, grid, counts)
    assert scatter_for(plan, chosen) is not None
    modelled = model(plan, chosen, strict=True)
    found = symbolic_cost.figures(plan, chosen)
    report = modelled.report
    assert tuple(found.total_received.tolist()) == report.node_recv_bytes
    assert tuple(found.flops.tolist()) == report.node_flops
    assert tuple(found.tasks.tolist()) == report.node_tasks
    assert found.resident.tolist() == modelled.schedule.final_memory_bytes
    assert report.tasks == compute_tasks(modelled.graph)
    added = compute_tasks(modelled.graph) - compute_tasks(plan.graph(chosen.counts))
    assert prediction.scatter_tasks(plan, *_arrays(plan, chosen))[0] == added > 0
    floors = prediction.busiest_floors(plan, *_arrays(plan, chosen))
    assert floors[0] <= found.received.max()
    # LSHS keeps every task of a member on its node: the same figures
    lshs = model(plan, chosen)
    assert lshs.report.node_recv_bytes == report.node_recv_bytes


@pytest.mark.parametrize(("subscripts", "shapes", "nodes"), [
    ("ijk,jkf->if", [(12, 6, 12), (6, 12, 4)], 12),
    ("ijk,jf,kf->if", [(30, 16, 9), (16, 6), (9, 6)], 16),
    ("ik,kj->ij", [(9, 64), (64, 2)], 8),
])
def test_the_predicted_tasks_of_every_candidate_count_its_reduce_scatter(subscripts, shapes,
                                                                         nodes):
    plan = problem(subscripts, shapes, nodes)
    p, c = candidate_table(plan)
    added = prediction.scatter_tasks(plan, p, c)
    inside = np.flatnonzero(np.all(c % p == 0, axis=1))
    assert (added[inside] > 0).any()
    for k in inside.tolist():
        chosen = Candidate(tuple(zip(plan.indices, p[k].tolist(), strict=True)),
                           tuple(zip(plan.indices, c[k].tolist(), strict=True)))
        lowered_added = (compute_tasks(plan.graph_of(chosen))
                         - compute_tasks(plan.graph(chosen.counts)))
        assert added[k] == lowered_added, chosen.describe()


def test_each_node_of_a_group_receives_one_block_less_one_piece():
    plan = problem("ijk,jkf->if", [(64, 64, 64), (64, 64, 16)], 8)
    modelled = model(plan, candidate(plan, {"k": 8}, {"k": 8}))
    block = 64 * 16 * 8
    assert modelled.report.node_recv_bytes == (block * 7 // 8,) * 8
    assert modelled.report.max_node_recv_bytes == plan.lower_bound_bytes()
    # the output's pieces stay where they were summed: one on every node
    assert sorted(modelled.output_nodes) == list(range(8))


def test_a_large_plan_says_it_reduce_scatters():
    plan = tc.plan("ijk,jkf->if", (2048, 2048, 2048), (2048, 2048, 64), nodes=1024)
    assert plan.stats["reduce_scatter"] == (
        "reduce-scatter along i:1024 over k:1024 (1024 pieces a block, 5 rounds)")
    assert plan.stats["lower_bound_ratio"] == pytest.approx(1.0)
    assert ("reduce-scatter along i:1024 over k:1024 (1024 pieces a block, 5 rounds): "
            "the output's blocks are cut that finer") in plan.explain()


def _arrays(plan, chosen):
    return candidate_arrays(plan, [chosen])
