"""The planner registry: ``search(problem, planner)`` runs one named distribution search.

Contract: :data:`PLANNERS` names every search; :func:`search` runs one on a
:class:`~tensorc.planning.distribution.Problem` and returns a
:class:`~tensorc.planning.search.DistributedPlan` (the same type whatever the planner).
``heuristic``, ``greedy`` and ``exhaustive`` live in :mod:`tensorc.planning.search`, ``smt``
in :mod:`tensorc.planning.smt_search` (imported on first use: it loads z3); ``auto`` is smt
seeded with greedy's plan. One node has nothing to split: every planner returns the single
candidate, modelled.
"""

from __future__ import annotations

import time

from tensorc.errors import PlanError
from tensorc.planning.distribution import Candidate, Problem, model
from tensorc.planning.search import DistributedPlan, exhaustive, greedy, heuristic

PLANNERS = ("auto", "heuristic", "greedy", "smt", "exhaustive")


def search(problem: Problem, planner: str = "auto") -> DistributedPlan:
    """Run ``planner`` on ``problem`` (module contract)."""
    if planner not in PLANNERS:
        raise PlanError(f"unknown planner {planner!r}; choose one of {', '.join(PLANNERS)}")
    started = time.perf_counter()
    used = planner
    if problem.nodes == 1:
        grid = tuple((i, 1) for i in problem.indices)
        counts = tuple((i, (problem.placed_counts or {}).get(i, 1)) for i in problem.indices)
        found = (model(problem, Candidate(grid, counts)), True, 1, ["one node: nothing to split"])
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
    modelled, optimal, evaluated, notes = found
    return DistributedPlan(
        planner=used,
        modelled=modelled,
        lower_bound_bytes=problem.lower_bound_bytes(),
        optimal=optimal,
        evaluated=evaluated,
        seconds=time.perf_counter() - started,
        notes=notes,
    )
