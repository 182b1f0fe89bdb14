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
from tensorc.planning.distribution import (
    SMOOTH_FACTORS,
    Candidate,
    Priced,
    Problem,
    lowered_plan,
    price,
)
from tensorc.planning.search import DistributedPlan, exhaustive, greedy, heuristic

PLANNERS = ("auto", "heuristic", "greedy", "smt", "exhaustive")


def load_smt() -> None:
    """Import the smt search and z3 now (about 0.1 s, most of it z3's library and its first
    context), so a session over several nodes does not pay it in its first call."""
    from tensorc.planning.smt_search import warm_up

    warm_up()


def search(problem: Problem, planner: str = "auto", lower: bool = True) -> DistributedPlan:
    """Run ``planner`` on ``problem`` (module contract); the chosen plan is then lowered and
    simulated once (``modelled``), unless ``lower=False`` and the closed form priced it
    (a scale study's plans of millions of tasks: their figures are the closed form's)."""
    if planner not in PLANNERS:
        raise PlanError(f"unknown planner {planner!r}; choose one of {', '.join(PLANNERS)}")
    started = time.perf_counter()
    used = planner
    if problem.nodes == 1:
        grid = tuple((i, 1) for i in problem.indices)
        counts = tuple((i, (problem.placed_counts or {}).get(i, 1)) for i in problem.indices)
        found = (price(problem, Candidate(grid, counts)), True, 1, ["one node: nothing to split"])
        used = planner if planner != "auto" else "exhaustive"
    elif planner == "heuristic":
        found = heuristic(problem)
    elif planner == "greedy":
        found = greedy(problem)
    elif planner == "exhaustive":
        found = exhaustive(problem)
    else:
        from tensorc.planning.smt_search import smt  # loads z3 (heavy) on the first smt search

        seed, _, seeded, _ = greedy(problem)
        best, optimal, evaluated, notes = smt(problem, seed=seed)
        found = (best, optimal, seeded + evaluated, notes)
        used = "smt"
    best, optimal, evaluated, notes = found
    seconds = time.perf_counter() - started
    spans = math.prod(p for _, p in best.candidate.grid)
    if spans < problem.nodes:
        notes = [*notes, f"the grid spans {spans} of the {problem.nodes} nodes: {problem.nodes} "
                 f"has a prime factor above {SMOOTH_FACTORS}, and cut evenly over {spans} "
                 f"the plan is cheaper; {problem.nodes - spans} node(s) stay idle"]
    if not lower and best.figures is not None:
        return DistributedPlan(used, None, problem.lower_bound_bytes(), optimal, evaluated,
                               seconds, list(notes), best)
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
    )


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
