"""The planner registry: ``search(problem, planner)`` runs one named distribution search.

Contract: :data:`PLANNERS` names every search; :func:`search` runs one on a
:class:`~tensorc.planning.distribution.Problem` and returns a
:class:`~tensorc.planning.search.DistributedPlan` (the same type whatever the planner).
``heuristic``, ``greedy`` and ``exhaustive`` live in :mod:`tensorc.planning.search`, ``smt``
in :mod:`tensorc.planning.smt_search` (imported on first use: it loads z3); ``auto`` is smt
seeded with greedy's plan. One node has nothing to split: every planner returns the single
candidate. The searches price candidates in closed form where they can; only the chosen
plan is lowered to its task graph and simulated under LSHS (``DistributedPlan.modelled``,
what the runtime runs), and the plan's notes say whether the closed form's per-node bytes,
flops and tasks equal the simulation's (:func:`agreement`). ``seconds`` is the search's
time; lowering is not in it.
"""

from __future__ import annotations

import math
import time

from tensorc.errors import PlanError
from tensorc.placement.layout import prime_factors
from tensorc.planning.cost import COMMUNICATION_SLACK
from tensorc.planning.distribution import (
    SMOOTH_FACTORS,
    Candidate,
    Priced,
    Problem,
    lowered_plan,
    price,
)
from tensorc.planning.search import (
    DistributedPlan,
    better,
    exhaustive,
    greedy,
    grid_floors,
    heuristic,
)

PLANNERS = ("auto", "heuristic", "greedy", "smt", "exhaustive")


def load_smt() -> None:
    """Import the smt search and z3 now (about 0.1 s, most of it z3's library and its first
    context), so a session over several nodes does not pay it in its first call."""
    from tensorc.planning.smt_search import warm_up

    warm_up()


IDLE_NODES_REACH = 1.25
"""How far over the communication budget a plan may be for the search to try grids that
leave a few nodes idle: their sides fit the extents better than any split of ``P`` (1,000
nodes as 50 x 20 against 1,024 as 32 x 32 or 64 x 16), which recovers a few per cent of
bytes (the pushed-down MTTKRP at 8,192³ on 1,024 nodes: 1.105x the bound to 1.065x), not
the excess of a plan for which a grid within the bound costs far more tasks (the strong
pushed-down MTTKRP on 4,096 nodes, 1.573x: searched there, 1.6 s for nothing)."""


def search(problem: Problem, planner: str = "auto", lower: bool = True) -> DistributedPlan:
    """Run ``planner`` on ``problem`` (module contract); the chosen plan is then lowered and
    simulated once (``modelled``), unless ``lower=False`` and the closed form priced it
    (a scale study's plans of millions of tasks: their figures are the closed form's).

    When no grid over all ``P`` nodes keeps the busiest receiver within the communication
    budget (:data:`~tensorc.planning.cost.COMMUNICATION_SLACK` × the lower bound) but the
    plan misses it by at most :data:`IDLE_NODES_REACH`, the search runs again on
    :meth:`~tensorc.planning.distribution.Problem.with_idle_nodes` (grids over a few fewer
    nodes, up to ``P / 32`` of them idle), seeded with the first plan, unless every grid
    there has a floor of its cost above the plan's (:func:`_may_be_cheaper`), and keeps
    the cheaper. ``optimal`` then covers both spaces (a skipped space has no cheaper plan);
    a plan further over the budget is proved over the grids of ``P`` alone. The plan's
    ``problem`` is the one it was planned on; its notes say what the second search did."""
    if planner not in PLANNERS:
        raise PlanError(f"unknown planner {planner!r}; choose one of {', '.join(PLANNERS)}")
    started = time.perf_counter()
    used, (best, optimal, evaluated, notes) = _run(problem, planner)
    budget = COMMUNICATION_SLACK * problem.lower_bound_bytes()
    wider = (problem.with_idle_nodes()
             if budget < _busiest(best) <= IDLE_NODES_REACH * budget else None)
    if wider is not None and _may_be_cheaper(wider, best):
        spare = wider.grid_sizes()[0]
        try:
            _, (other, proved, counted, said) = _run(wider, planner, seed=best)
        except PlanError as err:  # exhaustive's limit, or no legal grid over the fewer nodes
            notes = [*notes, f"grids over {spare} of the {problem.nodes} nodes not searched: "
                             f"{err}"]
        else:
            evaluated += counted
            optimal = optimal and proved
            chosen = better(other, best)
            notes = [*notes, f"searched again over grids of {spare} nodes (the plan over "
                             f"all of them is over the communication budget): "
                             + ("cheaper" if chosen else "none cheaper"), *said]
            if chosen:
                problem, best = wider, other
    seconds = time.perf_counter() - started
    spans = math.prod(p for _, p in best.candidate.grid)
    if spans < problem.nodes:
        why = (f"{problem.nodes} has a prime factor above {SMOOTH_FACTORS}, and cut evenly "
               f"over {spans}" if max(prime_factors(problem.nodes)) > SMOOTH_FACTORS
               else f"no grid over all of them keeps the busiest node within "
                    f"{COMMUNICATION_SLACK:g}x the bound, and over {spans}")
        notes = [*notes, f"the grid spans {spans} of the {problem.nodes} nodes: {why} the plan "
                 f"is cheaper; {problem.nodes - spans} node(s) stay idle"]
    if not lower and best.figures is not None:
        return DistributedPlan(used, None, problem.lower_bound_bytes(), optimal, evaluated,
                               seconds, list(notes), best, problem)
    modelled = lowered_plan(problem, best)
    return DistributedPlan(
        planner=used,
        modelled=modelled,
        lower_bound_bytes=problem.lower_bound_bytes(),
        optimal=optimal,
        evaluated=evaluated,
        seconds=seconds,
        notes=[*notes, *agreement(best, modelled)],
        priced=best,
        problem=problem,
    )


def _run(problem: Problem, planner: str, seed: Priced | None = None) -> tuple[str, tuple]:
    """``(the planner that ran, (best, optimal, evaluated, notes))`` of one search;
    ``seed`` (a plan legal here) starts the smt search beside greedy's."""
    if problem.nodes == 1:
        grid = tuple((i, 1) for i in problem.indices)
        counts = tuple((i, (problem.placed_counts or {}).get(i, 1)) for i in problem.indices)
        found = (price(problem, Candidate(grid, counts)), True, 1, ["one node: nothing to split"])
        return (planner if planner != "auto" else "exhaustive"), found
    if planner == "heuristic":
        return planner, heuristic(problem)
    if planner == "greedy":
        return planner, greedy(problem)
    if planner == "exhaustive":
        return planner, exhaustive(problem)
    from tensorc.planning.smt_search import smt  # loads z3 (heavy) on the first smt search

    greedy_seed, _, seeded, _ = greedy(problem)
    if seed is not None and better(seed, greedy_seed):
        greedy_seed = seed
    best, optimal, evaluated, notes = smt(problem, seed=greedy_seed)
    return "smt", (best, optimal, seeded + evaluated, notes)


def _busiest(best: Priced) -> float:
    """The bytes ``best``'s busiest node receives, as it was priced."""
    if best.figures is not None:
        return float(best.figures.total_received.max())
    return float(best.modelled.report.max_node_recv_bytes)


def _may_be_cheaper(problem: Problem, best: Priced) -> bool:
    """Whether some grid of ``problem`` has a floor of its cost
    (:func:`~tensorc.planning.search.grid_floors`) not above ``best``'s cost."""
    _, _, floors = grid_floors(problem)
    return bool((floors <= best.cost).any())


def agreement(best: Priced, modelled) -> list[str]:
    """What the closed form said of the chosen plan against its simulation, in words (the
    busiest receiver, the busiest node's flops and tasks, the peak memory)."""
    if best.figures is None:
        return ["priced by simulating its task graph (outside the closed form's domain)"]
    found, report = best.figures, modelled.report
    received = found.total_received
    same = (tuple(received.tolist()) == report.node_recv_bytes
            and tuple(found.flops.tolist()) == report.node_flops
            and tuple(found.tasks.tolist()) == report.node_tasks)
    words = "equal the simulation's" if same else "differ from the simulation's"
    return [
        f"closed form: busiest node receives {int(received.max())} B, runs "
        f"{int(found.flops.max())} flops and {int(found.tasks.max())} tasks, holds at most "
        f"{int(found.memory.max())} B; per-node bytes, flops and tasks {words} (simulated: "
        f"{report.max_node_recv_bytes} B, {max(report.node_flops)} flops, "
        f"{max(report.node_tasks)} tasks, peak {report.max_node_memory_bytes} B)"
    ]
