"""Distributed planning: plans as data, the checker, the searches against the exhaustive
oracle and the communication lower bound (pure compiler: no Ray, coordinates only).

Every search is priced by the one model (:func:`tensorc.planning.distribution.model`), so
costs are compared exactly across planners: on small contractions ``exhaustive`` is the
oracle, ``smt`` must reach its cost and never lose to ``greedy``.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tensorc.codegen.reduce_scatter import PieceBlock
from tensorc.codegen.taskgraph import LOAD, REDUCE
from tensorc.errors import PlanError
from tensorc.frontend.einsum import einsum_program
from tensorc.frontend.subscripts import parse_einsum
from tensorc.passes.pipeline import run_pipeline
from tensorc.planning import model_bound
from tensorc.planning.distribution import (
    Candidate,
    Modelled,
    Problem,
    check,
    model,
    smooth_below,
)
from tensorc.planning.lower_bound import communication_lower_bound
from tensorc.planning.planners import PLANNERS, search
from tensorc.planning.pricing import planning_context
from tensorc.planning.search import all_candidates

# costs of two different candidates may tie up to the order of float additions
SAME_COST = 1e-12


def problem(subscripts: str, shapes: list[tuple[int, ...]], nodes: int, **kwargs) -> Problem:
    """The contraction after the compiler's passes, to plan over ``nodes`` nodes."""
    spec = parse_einsum(subscripts, shapes)
    program = einsum_program(spec, shapes, ("float64",) * len(shapes), "float64")
    context = planning_context(workers=2)
    final, _ = run_pipeline(program, context, keep_text=False)
    return Problem(subscripts, final, nodes, **kwargs)


def candidate(grid: dict[str, int], counts: dict[str, int]) -> Candidate:
    return Candidate(tuple(sorted(grid.items())), tuple(sorted(counts.items())))


def _largest_share(graph, node_of, tasks) -> float:
    held: dict[int, int] = defaultdict(int)
    for task in tasks:
        held[node_of[task]] += graph.tasks[task].nbytes
    total = sum(held.values())
    return max(held.values()) / total if total else 1.0


def _last_stage_tasks(graph, finals: list[int]) -> list[int]:
    """The last stage's compute tasks: behind the final blocks, through the folds and a
    reduce-scatter's cuts."""
    found, todo, seen = [], list(finals), set()
    while todo:
        task = todo.pop()
        if task in seen:
            continue
        seen.add(task)
        record = graph.tasks[task]
        if record.kind == REDUCE or isinstance(graph.kernels[record.kernel], PieceBlock):
            todo.extend(record.inputs)
        else:
            found.append(task)
    return sorted(found)


def held_fractions(plan: Problem, modelled: Modelled) -> list[float]:
    """Per array of the planned contraction (its operands, then its output): the largest
    fraction of the array's bytes one node holds in the modelled schedule — an input where
    its loads sit, an intermediate where the task making each final block ran, the output
    where its final blocks were computed (they stay there)."""
    graph, node_of = modelled.graph, modelled.schedule.node_of
    operands, _ = plan.contraction()
    finals = [task for task, _ in graph.outputs]
    if graph.tasks[finals[0]].kind == LOAD:  # nothing computed: the output is a view
        return [_largest_share(graph, node_of, finals)] * (len(operands) + 1)
    last_stage = _last_stage_tasks(graph, finals)
    slots: list[set[int]] = [set() for _ in operands]
    for task in last_stage:
        inputs = graph.tasks[task].inputs
        assert len(inputs) == len(operands), (graph.tasks[task], operands)
        for slot, source in zip(slots, inputs, strict=True):
            slot.add(source)
    shares = [_largest_share(graph, node_of, slot) for slot in slots]
    return [*shares, _largest_share(graph, node_of, finals)]


def layout_bound(plan: Problem, modelled: Modelled) -> int:
    """The lower bound for the plan's own layout (``owned`` = its held fractions)."""
    operands, output = plan.contraction()
    # the largest share is at least 1/P; max() only absorbs float rounding of that
    owned = [max(f, 1 / plan.nodes) for f in held_fractions(plan, modelled)]
    return communication_lower_bound(
        operands, output, plan.sizes, plan.nodes, plan.itemsize, owned=owned
    )


# -- plans as data and the checker ----------------------------------------------------------

MATMUL = ("ik,kj->ij", [(12, 8), (8, 16)])  # i 12, j 16, k 8


def refusal(plan: Problem, grid: dict[str, int], counts: dict[str, int]) -> str:
    with pytest.raises(PlanError) as raised:
        check(plan, candidate(grid, counts))
    return str(raised.value)


def test_candidates_are_values_and_describe_themselves():
    a = candidate({"i": 2, "j": 1, "k": 1}, {"i": 2, "j": 1, "k": 1})
    b = Candidate((("i", 2), ("j", 1), ("k", 1)), (("i", 2), ("j", 1), ("k", 1)))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a.grid_of("i") == 2 and a.count_of("k") == 1
    assert a.describe() == "grid i:2; blocks i:2, j:1, k:1"
    assert candidate({"i": 1}, {"i": 3}).describe() == "grid (one node); blocks i:3"


def test_every_enumerated_candidate_is_legal_and_distinct():
    plan = problem(*MATMUL, 4)
    candidates = all_candidates(plan)
    assert len(candidates) == len(set(candidates)) > 0
    for each in candidates:
        check(plan, each)
        assert math.prod(p for _, p in each.grid) == 4


def test_checker_accepts_a_legal_candidate():
    plan = problem(*MATMUL, 4)
    check(plan, candidate({"i": 2, "j": 2, "k": 1}, {"i": 2, "j": 4, "k": 2}))


def test_refuses_a_grid_whose_product_is_not_the_node_count():
    plan = problem(*MATMUL, 4)
    assert refusal(plan, {"i": 2, "j": 1, "k": 1}, {"i": 2, "j": 1, "k": 1}) == (
        "grid i:2; blocks i:2, j:1, k:1: the grid spans 2 nodes, not 4"
    )
    assert refusal(plan, {"i": 2, "j": 4, "k": 1}, {"i": 2, "j": 4, "k": 1}) == (
        "grid i:2 x j:4; blocks i:2, j:4, k:1: the grid spans 8 nodes, not 4"
    )


def test_refuses_a_count_that_is_not_a_multiple_of_the_grid():
    plan = problem(*MATMUL, 4)
    assert refusal(plan, {"i": 2, "j": 2, "k": 1}, {"i": 3, "j": 2, "k": 1}) == (
        "index 'i': 3 blocks do not divide over 2 nodes along it"
    )


def test_refuses_a_count_above_the_extent():
    plan = problem(*MATMUL, 4)
    assert refusal(plan, {"i": 4, "j": 1, "k": 1}, {"i": 16, "j": 1, "k": 1}) == (
        "index 'i': 16 blocks but the extent is 12"
    )


def test_refuses_an_extent_that_cannot_be_cut_evenly():
    plan = problem(*MATMUL, 4)
    # 12 in blocks of ceil(12 / 5) = 3 gives 4 blocks, not 5
    assert refusal(plan, {"i": 1, "j": 4, "k": 1}, {"i": 5, "j": 4, "k": 1}) == (
        "index 'i': extent 12 cannot be cut into 5 blocks of one size"
    )


def test_refuses_a_count_that_is_not_positive():
    plan = problem(*MATMUL, 4)
    assert refusal(plan, {"i": 4, "j": 1, "k": 1}, {"i": 4, "j": 1, "k": 0}) == (
        "index 'k': grid 1 and count 0 must be positive"
    )


def test_refuses_unknown_missing_and_repeated_indices():
    plan = problem(*MATMUL, 4)
    assert refusal(plan, {"i": 4, "j": 1, "x": 1}, {"i": 4, "j": 1, "k": 1}) == (
        "grid names indices i, j, x but the contraction has i, j, k"
    )
    assert refusal(plan, {"i": 4, "j": 1, "k": 1}, {"i": 4, "j": 1}) == (
        "counts names indices i, j but the contraction has i, j, k"
    )
    repeated = Candidate((("i", 4), ("j", 1), ("k", 1)), (("i", 4), ("i", 4), ("j", 1)))
    with pytest.raises(PlanError) as raised:
        check(plan, repeated)
    assert str(raised.value) == "counts names indices i, i, j but the contraction has i, j, k"


def test_refuses_counts_that_differ_from_an_operand_on_the_cluster():
    plan = problem(*MATMUL, 4, placed_counts={"i": 2, "k": 2})
    assert refusal(plan, {"i": 2, "j": 2, "k": 1}, {"i": 4, "j": 2, "k": 2}) == (
        "index 'i': an operand on the cluster has 2 blocks along it, the candidate 4 "
        "(repartition it first)"
    )
    check(plan, candidate({"i": 2, "j": 2, "k": 1}, {"i": 2, "j": 2, "k": 2}))
    # the searches keep to the fixed blocking
    assert all(dict(c.counts)["i"] == 2 for c in all_candidates(plan))
    assert dict(search(plan, "greedy").candidate.counts)["i"] == 2


def test_the_model_refuses_what_the_checker_refuses():
    plan = problem(*MATMUL, 4)
    with pytest.raises(PlanError, match="spans 2 nodes, not 4"):
        model(plan, candidate({"i": 2, "j": 1, "k": 1}, {"i": 2, "j": 1, "k": 1}))


def test_unknown_planner_is_refused_and_a_too_small_problem_splits_unevenly():
    plan = problem(*MATMUL, 4)
    with pytest.raises(PlanError, match="unknown planner 'best'; choose one of auto, "):
        search(plan, "best")
    # 11 cannot be cut into 5 equal blocks (nor 10): no grid splits k evenly over 5 nodes,
    # so the problem is planned unevenly (some nodes get no block of k) rather than refused
    lonely = problem("k,k->", [(11,), (11,)], 5)
    assert not lonely.even_split()
    candidates = all_candidates(lonely)
    assert candidates and all(dict(c.grid)["k"] == 5 for c in candidates)
    for legal in candidates:
        check(lonely, legal)
    for planner in PLANNERS:
        found = search(lonely, planner)
        check(lonely, found.candidate)
    # where an even split exists, an uneven candidate is refused
    with pytest.raises(PlanError, match="do not divide over"):
        check(plan, candidate({"i": 4, "j": 1, "k": 1}, {"i": 6, "j": 1, "k": 1}))


def test_a_node_count_with_a_prime_factor_above_five_may_leave_nodes_idle():
    assert (smooth_below(7), smooth_below(4093), smooth_below(4095)) == (6, 4050, 4050)
    assert smooth_below(3000) is None and smooth_below(4096) is None
    # no grid over 7 nodes cuts i 12, j 6, k 4, f 4 evenly; grids over 6 of them do
    plan = problem("ijk,jf,kf->if", [(12, 6, 4), (6, 4), (4, 4)], 7)
    assert plan.grid_sizes() == (7, 6) and plan.even_split()
    oracle = search(plan, "exhaustive")
    found = search(plan, "smt")
    assert found.optimal is True and found.cost == oracle.cost
    assert math.prod(p for _, p in found.candidate.grid) == 6
    assert any("the grid spans 6 of the 7 nodes" in note for note in found.notes)
    report = found.modelled.report
    assert len(report.node_tasks) == 7 and report.node_tasks[6] == 0  # the seventh idles
    assert report.node_recv_bytes[6] == 0
    check(plan, found.candidate)
    with pytest.raises(PlanError, match="the grid spans 4 nodes, not 7 or 6"):
        check(plan, candidate({"f": 1, "i": 2, "j": 2, "k": 1}, {"f": 1, "i": 2, "j": 2, "k": 1}))
    # a node count whose grids already cut evenly keeps them all
    assert problem("ijk,jf,kf->if", [(12, 6, 4), (6, 4), (4, 4)], 6).grid_sizes() == (6,)


# -- small problems: exhaustive search is the oracle ----------------------------------------

ORACLE_CASES = {  # i 12, j 6, k 4, f 4: every P of the test has a legal grid
    "matmul": ("ik,kj->ij", [(12, 6), (6, 24)]),
    "mttkrp_if_jf": ("ijk,if,jf->if", [(12, 6, 4), (12, 4), (6, 4)]),
    "mttkrp_jf_kf": ("ijk,jf,kf->if", [(12, 6, 4), (6, 4), (4, 4)]),
    "double": ("ijk,jkf->if", [(12, 6, 4), (6, 4, 4)]),
    "xtx": ("ij,ik->jk", [(48, 6), (48, 6)]),
    "outer": ("i,j->ij", [(12,), (24,)]),
    "trace": ("ii->", [(24, 24)]),
    "diagonal": ("ii->i", [(24, 24)]),
}


@pytest.mark.parametrize("nodes", [2, 3, 4, 6])
@pytest.mark.parametrize("case", sorted(ORACLE_CASES))
def test_smt_matches_the_exhaustive_oracle_and_never_loses_to_greedy(case, nodes):
    plan = problem(*ORACLE_CASES[case], nodes)
    oracle = search(plan, "exhaustive")
    assert oracle.optimal is True
    assert oracle.evaluated == len(all_candidates(plan))
    best = oracle.modelled.report.cost
    greedy = search(plan, "greedy").modelled.report.cost
    smt = search(plan, "smt")
    check(plan, smt.candidate)
    assert smt.optimal is True or smt.notes, "a search that stops short must say so"
    cost = smt.modelled.report.cost
    assert cost == pytest.approx(best, rel=SAME_COST), (
        f"smt {smt.candidate.describe()} costs {cost}, exhaustive "
        f"{oracle.candidate.describe()} {best}"
    )
    assert cost <= greedy * (1 + SAME_COST)


def test_exhaustive_returns_the_first_cheapest_candidate():
    plan = problem(*ORACLE_CASES["mttkrp_jf_kf"], 4)
    costs = [model(plan, c).report.cost for c in all_candidates(plan)]
    cheapest = all_candidates(plan)[costs.index(min(costs))]
    found = search(plan, "exhaustive")
    assert found.candidate == cheapest
    assert found.modelled.report.cost == min(costs)


# -- hypothesis: random contractions verify and never beat the lower bound ------------------

LETTERS = "ijkl"


@st.composite
def contractions(draw):
    """2-3 operands over 2-4 distinct indices (each index in some operand), any output
    subset, extents 1-24, 1-8 nodes. Hypothesis draws a seed and a seeded generator fills
    in the rest (drawn directly, hypothesis favours extents of 1 and one node), as in
    ``test_einsum_properties``."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    letters = list(LETTERS[: rng.integers(2, 5)])
    operands = [
        [str(c) for c in rng.permutation(letters)[: rng.integers(1, len(letters) + 1)]]
        for _ in range(rng.integers(2, 4))
    ]
    for letter in letters:  # every index occurs somewhere
        if not any(letter in op for op in operands):
            operands[rng.integers(len(operands))].append(letter)
    output = [str(c) for c in rng.permutation(letters)[: rng.integers(0, len(letters) + 1)]]
    extents = {letter: int(rng.integers(1, 25)) for letter in letters}
    nodes = int(rng.integers(1, 9))
    subscripts = ",".join("".join(op) for op in operands) + "->" + "".join(output)
    shapes = [tuple(extents[c] for c in op) for op in operands]
    return subscripts, shapes, nodes


# derandomized (the same 40 examples every run) and without the shrink phase: the examples
# are small already, and shrinking a failure re-runs three searches on hundreds of variants,
# which would take longer than the rest of the file
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow],
)
@given(drawn=contractions())
def test_random_plans_verify_and_never_beat_their_lower_bound(drawn):
    subscripts, shapes, nodes = drawn
    plan = problem(subscripts, shapes, nodes)
    if not all_candidates(plan):
        with pytest.raises(PlanError):
            search(plan, "heuristic")
        return
    even = plan.lower_bound_bytes()
    for planner in ("heuristic", "greedy", "auto"):
        found = search(plan, planner)
        check(plan, found.candidate)
        assert found.lower_bound_bytes == even
        received = found.modelled.report.max_node_recv_bytes
        bound = layout_bound(plan, found.modelled)
        assert bound <= even
        assert received >= bound, (
            f"{planner}: {found.candidate.describe()} receives {received} B, below the "
            f"bound {bound} B for its layout (held {held_fractions(plan, found.modelled)})"
        )


@pytest.mark.parametrize(
    ("subscripts", "shapes", "nodes", "grid", "received", "even"),
    [
        # after push-down the planned contraction is scalar * scalar: each scalar lives
        # whole on one node, so the computing node owns 2 of the 3, not 3/2
        ("l,jki->", [(19,), (21, 6, 22)], 2, {"l": 2}, 8, 12),
        # k is summed into the third operand; the grid splits only k, so the last stage's
        # operands and output are one block each, all on the node that computes it
        ("jl,li,lk->ij", [(8, 13), (13, 14), (13, 16)], 4, {"k": 4}, 312, 456),
    ],
)
def test_the_even_share_bound_assumes_an_even_layout(
    subscripts, shapes, nodes, grid, received, even
):
    """A block-granular layout can hold more than ``1/P`` of an array on one node and then
    receive less than the even-share bound; never less than the bound for its layout."""
    plan = problem(subscripts, shapes, nodes)
    full = {i: grid.get(i, 1) for i in plan.indices}
    modelled = model(plan, candidate(full, full))
    assert plan.lower_bound_bytes() == even
    assert modelled.report.max_node_recv_bytes == received < even
    assert held_fractions(plan, modelled) == [1.0] * (len(plan.contraction()[0]) + 1)
    assert layout_bound(plan, modelled) == 0


def test_an_even_layout_gives_the_even_bound():
    plan = problem("ik,kj->ij", [(16, 16), (16, 16)], 4)
    modelled = model(plan, candidate({"i": 2, "j": 2, "k": 1}, {"i": 2, "j": 2, "k": 2}))
    assert held_fractions(plan, modelled) == [0.25, 0.25, 0.25]
    assert layout_bound(plan, modelled) == plan.lower_bound_bytes() > 0
    assert modelled.report.max_node_recv_bytes >= plan.lower_bound_bytes()


# -- determinism ----------------------------------------------------------------------------

DETERMINISM_CASES = [
    ("ijk,jf,kf->if", [(12, 6, 4), (6, 4), (4, 4)], 4),
    ("ik,kj->ij", [(12, 6), (6, 24)], 6),
    # ties under the model: symmetric indices give several grids of the same cost, and
    # the search must still pick the same one every time
    ("ij,ik->jk", [(48, 6), (48, 6)], 2),
    ("ik,kj->ij", [(8, 8), (8, 8)], 2),
    ("i,j->ij", [(12,), (12,)], 4),
]


@pytest.mark.parametrize("planner", PLANNERS)
@pytest.mark.parametrize(("subscripts", "shapes", "nodes"), DETERMINISM_CASES)
def test_every_search_is_deterministic(planner, subscripts, shapes, nodes):
    plan = problem(subscripts, shapes, nodes)
    runs = [search(plan, planner), search(plan, planner)]
    runs.append(search(problem(subscripts, shapes, nodes), planner))  # a fresh Problem
    first = runs[0]
    for run in runs[1:]:
        assert run.candidate == first.candidate
        assert run.modelled.report.cost == first.modelled.report.cost
        assert run.modelled.report == first.modelled.report
        assert (run.planner, run.optimal) == (first.planner, first.optimal)


# -- the SMT encoding agrees with the task graph and the model ------------------------------

CONSISTENCY_CASES = [
    ("ik,kj->ij", [(12, 6), (6, 24)], 4),
    ("ijk,jf,kf->if", [(12, 6, 4), (6, 4), (4, 4)], 6),
    ("ijk,jkf->if", [(12, 6, 4), (6, 4, 4)], 4),
    ("ii->", [(24, 24)], 4),
    # a scalar output: the planned contraction's arrays are one block each
    ("k,jik->", [(1,), (3, 4, 1)], 2),
]


@pytest.mark.parametrize(("subscripts", "shapes", "nodes"), CONSISTENCY_CASES)
def test_smt_tasks_and_cost_bound_agree_with_the_model(subscripts, shapes, nodes):
    plan = problem(subscripts, shapes, nodes)
    candidates = all_candidates(plan)
    assert candidates
    for each in candidates:
        graph = plan.graph(each.counts)
        computed = [t for t in graph.tasks if t.kind != LOAD]
        tasks = sum(t + r for t, r in model_bound.task_counts(plan, dict(each.counts)))
        assert tasks == len(computed), each.describe()
        floor = model_bound.cost_bound(plan, dict(each.counts))
        cost = model(plan, each).report.cost
        assert floor <= cost * (1 + SAME_COST), (
            f"{each.describe()}: lower_cost {floor} above the model's {cost}"
        )
