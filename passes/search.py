"""Searches for a distributed plan, all behind :func:`search` and all priced by one model.

Contract: ``search(problem, planner)`` returns a :class:`DistributedPlan` — the chosen
:class:`~tensorc.passes.distribution.Candidate`, its modelled schedule and price, the
communication lower bound, and whether the search proved the plan optimal (``True``),
ran out of budget (``False``) or does not try (``None``). Every planner is deterministic.

- ``heuristic`` (NumS): factor the nodes over the indices of the largest operand by a
  softmax of their log-extents (each prime factor, largest first, goes to the index with
  the most weight per node); block counts from :func:`spread_counts`. One model call.
- ``greedy`` (Spartan): whole-graph descent from the heuristic grid; moves of one prime
  factor between indices are tried with indices ordered by connectivity (how many arrays
  of the whole graph share them, then extent) and the best improving move is taken until
  none improves; then each index's block count is doubled while the model improves. A few
  dozen model calls, no proof.
- ``exhaustive``: every legal grid with every block-count multiplier up to ``P`` (powers
  of two); proves optimality under the model. For small cases and tests.
- ``smt``: z3 (:mod:`tensorc.passes.smt_search`).
- ``auto``: one node needs no search; else ``smt``, falling back to ``greedy`` when z3 runs
  out of budget without a plan.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field

from tensorc.errors import PlanError
from tensorc.passes.distribution import (
    Candidate,
    Modelled,
    Problem,
    achievable,
    model,
)

PLANNERS = ("auto", "heuristic", "greedy", "smt", "exhaustive")
EXHAUSTIVE_LIMIT = 20_000  # candidates; beyond this exhaustive refuses (use smt)
TASKS_PER_NODE = 16  # block-count spreading stops at this many iteration blocks per node


@dataclass
class DistributedPlan:
    """The outcome of a search (module contract)."""

    planner: str
    modelled: Modelled
    lower_bound_bytes: int
    optimal: bool | None
    evaluated: int
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def candidate(self) -> Candidate:
        return self.modelled.candidate

    @property
    def ratio(self) -> float | None:
        """Busiest receiver's modelled bytes over the lower bound (None when the bound is 0)."""
        bound = self.lower_bound_bytes
        received = self.modelled.report.max_node_recv_bytes
        if bound <= 0:
            return None if received else 1.0
        return received / bound


def prime_factors(n: int) -> list[int]:
    """Prime factors of ``n``, largest first, with repetition."""
    factors, p = [], 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    return sorted(factors, reverse=True)


def grids(problem: Problem) -> list[tuple[tuple[str, int], ...]]:
    """Every legal index grid: ``∏ p_i = P`` with ``p_i`` at most the extent, in a fixed order."""
    indices = problem.indices
    sizes = problem.sizes
    even = problem.even_split()
    out: list[tuple[tuple[str, int], ...]] = []

    def extend(position: int, left: int, chosen: list[int]) -> None:
        if position == len(indices):
            if left == 1:
                out.append(tuple(zip(indices, chosen, strict=True)))
            return
        index = indices[position]
        for p in range(1, left + 1):
            if left % p or (even and p > max(sizes[index], 1)):
                continue
            extend(position + 1, left // p, [*chosen, p])

    extend(0, problem.nodes, [])
    return out


def multipliers(problem: Problem, index: str, p: int) -> list[int]:
    """Legal counts along ``index`` for grid ``p``: ``p × 2^k`` up to ``p × P``, or the
    fixed blocking of an operand computed in its layout (then any grid is legal: the grid
    places work, the operand's blocks stay where they are)."""
    fixed = (problem.placed_counts or {}).get(index)
    if fixed is not None:
        return [fixed]
    size = problem.sizes[index]
    if not problem.even_split():
        powers = {1 << k for k in range(max(size, 1).bit_length())} | {max(size, 1)}
        return sorted(c for c in powers if c <= max(size, 1) and achievable(size, c))
    counts = []
    m = 1
    while p * m <= max(size, 1) and m <= problem.nodes:
        if achievable(size, p * m):
            counts.append(p * m)
        m *= 2
    return counts


def spread_counts(problem: Problem, grid) -> tuple[tuple[str, int], ...] | None:
    """Block counts for ``grid``: each index starts at its grid size; then the output and
    the operands, largest first, that have fewer blocks per grid cell than the grid has
    nodes along the indices they lack double their roomiest index, so each node holds a
    share of them — as long as the iteration space keeps at most :data:`TASKS_PER_NODE`
    blocks per node."""
    sizes = problem.sizes
    p = dict(grid)
    counts: dict[str, int] = {}
    for index in problem.indices:
        options = multipliers(problem, index, p[index])
        if not options:
            return None
        counts[index] = options[0]
    fixed = problem.placed_counts or {}
    stages = problem.stage_arrays()
    arrays = sorted(
        {a for stage in stages for a in stage[0]}, key=lambda a: (-a.elements, a.dims)
    )
    if stages:
        arrays.insert(0, stages[-1][1])
    cap = TASKS_PER_NODE * problem.nodes
    for array in arrays:
        dims = sorted(set(array.dims))
        lacking = math.prod(p[i] for i in problem.indices if i not in dims)
        while math.prod(counts[i] // p[i] for i in dims) < lacking:
            room = [
                i for i in dims
                if i not in fixed and achievable(sizes[i], counts[i] * 2)
                and counts[i] * 2 <= sizes[i]
                and math.prod(counts.values()) * 2 <= cap
            ]
            if not room:
                break
            roomiest = max(room, key=lambda i: (sizes[i] / counts[i], i))
            counts[roomiest] *= 2
    return tuple(sorted(counts.items()))


def _candidate(problem: Problem, grid) -> Candidate | None:
    counts = spread_counts(problem, grid)
    return None if counts is None else Candidate(tuple(sorted(grid)), counts)


def heuristic(problem: Problem) -> tuple[Modelled, bool | None, int, list[str]]:
    """NumS: a softmax of log-extents over the largest operand's indices."""
    sizes = problem.sizes
    arrays = [a for stage in problem.stage_arrays() for a in stage[0]] or [None]
    largest = max(arrays, key=lambda a: (a.elements, a.dims)) if arrays[0] else None
    dims = sorted(set(largest.dims)) if largest else list(problem.indices)
    dims = [d for d in dims if sizes[d] > 1] or list(problem.indices)
    weights = _softmax([math.log(max(sizes[d], 1)) for d in dims])
    grid = {i: 1 for i in problem.indices}
    for factor in prime_factors(problem.nodes):
        room = [d for d in dims if grid[d] * factor <= max(sizes[d], 1)]
        if not room:
            room = [d for d in problem.indices if grid[d] * factor <= max(sizes[d], 1)]
        if not room:
            return _first_legal(problem)
        best = max(room, key=lambda d: (weights[dims.index(d)] / grid[d] if d in dims else 0,
                                        -grid[d], d))
        grid[best] *= factor
    candidate = _candidate(problem, tuple(sorted(grid.items())))
    if candidate is None:
        return _first_legal(problem)
    return model(problem, candidate), None, 1, []


def _softmax(values: list[float]) -> list[float]:
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    total = sum(exps)
    return [e / total for e in exps]


def _first_legal(problem: Problem) -> tuple[Modelled, bool | None, int, list[str]]:
    for grid in grids(problem):
        candidate = _candidate(problem, grid)
        if candidate is not None:
            return model(problem, candidate), None, 1, []
    raise PlanError(f"no legal grid puts {problem.indices} on {problem.nodes} nodes")


def connectivity_order(problem: Problem) -> list[str]:
    """Indices by how many arrays of the whole graph share them, then by extent."""
    shared = {i: 0 for i in problem.indices}
    for inputs, output in problem.stage_arrays():
        for array in [*inputs, output]:
            for index in set(array.dims):
                shared[index] += 1
    sizes = problem.sizes
    return sorted(problem.indices, key=lambda i: (-shared[i], -sizes[i], i))


def greedy(problem: Problem) -> tuple[Modelled, bool | None, int, list[str]]:
    """Spartan-style descent over the whole graph: start from the heuristic grid, then take
    the best improving move — one prime factor of the grid moved from one index to another
    (block counts re-spread) — trying indices by connectivity, until no move helps; then
    refine block counts one doubling at a time while the model improves."""
    order = connectivity_order(problem)
    best, _, evaluated, _ = heuristic(problem)
    seen = {best.candidate.grid}
    improved = True
    while improved:
        improved = False
        grid = dict(best.candidate.grid)
        moves = []
        for source in order:
            for factor in sorted(set(prime_factors(grid[source]))):
                for target in order:
                    if target == source:
                        continue
                    trial = dict(grid)
                    trial[source] //= factor
                    trial[target] *= factor
                    if trial[target] > max(problem.sizes[target], 1):
                        continue
                    key = tuple(sorted(trial.items()))
                    if key in seen:
                        continue
                    seen.add(key)
                    candidate = _candidate(problem, key)
                    if candidate is not None:
                        moves.append(candidate)
        for candidate in moves:
            trial = model(problem, candidate)
            evaluated += 1
            if trial.report.cost < best.report.cost:
                best, improved = trial, True
    best, refined = _refine_counts(problem, best, order)
    return best, None, evaluated + refined, []


def _refine_counts(problem: Problem, best: Modelled, order: list[str]) -> tuple[Modelled, int]:
    evaluated = 0
    improved = True
    while improved:
        improved = False
        for index in order:
            counts = dict(best.candidate.counts)
            p = best.candidate.grid_of(index)
            doubled = counts[index] * 2
            if doubled not in multipliers(problem, index, p):
                continue
            counts[index] = doubled
            trial = model(problem, Candidate(best.candidate.grid, tuple(sorted(counts.items()))))
            evaluated += 1
            if trial.report.cost < best.report.cost:
                best, improved = trial, True
    return best, evaluated


def all_candidates(problem: Problem) -> list[Candidate]:
    """Every legal candidate: each grid with every combination of counts."""
    out = []
    for grid in grids(problem):
        options = [multipliers(problem, i, p) for i, p in grid]
        if any(not o for o in options):
            continue
        for counts in itertools.product(*options):
            out.append(Candidate(grid, tuple(zip(problem.indices, counts, strict=True))))
    return out


def exhaustive(problem: Problem) -> tuple[Modelled, bool | None, int, list[str]]:
    """Model every legal candidate; the cheapest (then the first in order) wins."""
    candidates = all_candidates(problem)
    if len(candidates) > EXHAUSTIVE_LIMIT:
        raise PlanError(
            f"exhaustive search would model {len(candidates)} candidates (limit "
            f"{EXHAUSTIVE_LIMIT}); use planner='smt'"
        )
    if not candidates:
        raise PlanError(f"no legal grid puts {problem.indices} on {problem.nodes} nodes")
    best = None
    for candidate in candidates:
        trial = model(problem, candidate)
        if best is None or trial.report.cost < best.report.cost:
            best = trial
    return best, True, len(candidates), []


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
        from tensorc.passes.smt_search import smt

        found = smt(problem, seed=greedy(problem)[0])
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
