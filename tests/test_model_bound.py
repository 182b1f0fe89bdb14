"""The SMT search prunes with ``model_bound.cost_bound``: it must never exceed the model.

Held against every legal candidate of small problems (the pruning is only sound if the
bound is below the modelled cost of every candidate with those block counts, whatever the
grid), together with the exact task counts the z3 encoding and the predictions use (a
reduce-scatter's rounds, which depend on the grid, come on top).
"""

from __future__ import annotations

import pytest

from tensorc.frontend.einsum import einsum_program
from tensorc.frontend.subscripts import parse_einsum
from tensorc.passes.pipeline import run_pipeline
from tensorc.placement.blocks import Blocks
from tensorc.planning import model_bound, prediction
from tensorc.planning.distribution import Problem, model
from tensorc.planning.pricing import planning_context
from tensorc.planning.reduce_scatter import scatter_for
from tensorc.planning.search import all_candidates, candidate_table


def _problem(subscripts: str, shapes, nodes: int, **extra) -> Problem:
    spec = parse_einsum(subscripts, shapes)
    program = einsum_program(spec, shapes, ("float64",) * len(shapes), "float64")
    ctx = planning_context(workers=2)
    final, _ = run_pipeline(program, ctx, keep_text=False)
    return Problem(subscripts, final, nodes, **extra)


CASES = [
    ("ik,kj->ij", [(32, 32), (32, 32)], 4),
    ("ik,kj->ij", [(48, 16), (16, 24)], 3),
    ("ij,ik->jk", [(256, 8), (256, 8)], 4),
    ("ijk,jf,kf->if", [(16, 16, 16), (16, 8), (16, 8)], 2),
    ("ijk,if,jf->if", [(16, 16, 16), (16, 8), (16, 8)], 3),
    ("ijk,jkf->if", [(16, 16, 16), (16, 16, 8)], 4),
    ("ij,jk,kl->il", [(16, 16), (16, 16), (16, 16)], 2),
    # degenerate: the communication lower bound itself is above some plans here (a coarse
    # blocking lets one node own whole arrays), so the cost bound must not lean on it
    ("k,j->", [(2,), (2,)], 2),
    ("kj,l,ilk->ik", [(2, 3), (32,), (8, 32, 2)], 2),
    ("ji,ki->i", [(1, 4), (2, 4)], 8),
    ("i,j->j", [(12,), (2,)], 6),
]


def _assert_bound_holds(problem: Problem) -> None:
    candidates = all_candidates(problem)
    assert candidates
    grid_table, counts_table = candidate_table(problem)
    predicted_tasks = prediction.task_totals(problem, counts_table)
    scatter_tasks = prediction.scatter_tasks(problem, grid_table, counts_table)
    for row, candidate in enumerate(candidates):
        report = model(problem, candidate).report
        counts = dict(candidate.counts)
        bound = model_bound.cost_bound(problem, counts)
        assert bound <= report.cost, (candidate.describe(), bound, report.cost)
        tasks = sum(t + r for t, r in model_bound.task_counts(problem, counts))
        # the counts' tasks, plus a reduce-scatter's rounds where the grid ends with one
        assert tasks == predicted_tasks[row], candidate.describe()
        added = scatter_tasks[row] if scatter_for(problem, candidate) is not None else 0
        assert report.tasks == tasks + added, candidate.describe()


@pytest.mark.parametrize(("subscripts", "shapes", "nodes"), CASES)
def test_cost_bound_never_exceeds_the_model(subscripts, shapes, nodes):
    _assert_bound_holds(_problem(subscripts, shapes, nodes))


def test_cost_bound_with_an_operand_already_on_one_node():
    # A is 2 x 2 blocks, all on node 0: the even-spread network bound would not hold
    on_node_0 = {(a, b): 0 for a in range(2) for b in range(2)}
    placed = {0: Blocks.layout(((0, 16, 32), (0, 16, 32)), on_node_0)}
    problem = _problem(
        "ik,kj->ij", [(32, 32), (32, 32)], 4, placed=placed, placed_counts={"i": 2, "k": 2}
    )
    _assert_bound_holds(problem)
