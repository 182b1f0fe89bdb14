"""Searches for a distributed plan, all behind :func:`search` and all priced by one model.

Contract: ``search(problem, planner)`` returns a :class:`DistributedPlan` — the chosen
:class:`~tensorc.planning.distribution.Candidate` as the search priced it and as lowered
and simulated, the communication lower bound, and whether the search proved the plan
optimal (``True``), ran out of budget (``False``, with a note) or does not try (``None``).
Every search prices candidates with :func:`~tensorc.planning.distribution.price` (the
closed form, :mod:`tensorc.planning.symbolic_cost`, where it applies; the simulation
otherwise) and returns a :class:`~tensorc.planning.distribution.Priced`; only the chosen
plan is lowered (:mod:`tensorc.planning.planners`). Every planner is deterministic, and
every comparison uses one order (:func:`better`): lower cost under the model, then the
smaller candidate.

The candidate space (shared by every planner): a grid ``p`` with ``∏ p_i = P`` — or, when
``P`` has a prime factor above 5, the largest count below ``P`` without one, the other
nodes idle (:meth:`~tensorc.planning.distribution.Problem.grid_sizes`; a problem's copy
that leaves a few nodes idle, which :func:`~tensorc.planning.planners.search` searches when
the plan over ``P`` misses the communication budget, has only its smaller count) — and
``p_i`` at most the extent (:func:`grids`); per index a block count ``c_i = p_i · m`` for
``m`` among the divisors of ``P`` and the powers of two up to ``P`` that the extent can be
cut into evenly (:func:`multipliers`) — enough blocks per grid cell for an output to be
reduce-scattered over the nodes of a split summed index, evenly when ``P`` has an odd
factor; and the memory rule of :func:`~tensorc.planning.distribution.check`.

- ``heuristic`` (NumS): factor the nodes over the indices of the largest operand by a
  softmax of their log-extents (each prime factor, largest first, goes to the index with
  the most weight per node); block counts from :func:`spread_counts` (closed form, no
  model call). One pricing.
- ``greedy`` (Spartan): whole-graph descent from the heuristic grid; moves of one prime
  factor between indices are tried with indices ordered by connectivity (how many arrays
  of the whole graph share them, then extent), counts re-spread, and the best move is
  taken while it improves the model; then each index's block count moves one legal step
  up or down while the model improves. A few dozen pricings, no proof.
- ``exhaustive``: prices every candidate (grouped by block counts, so a task graph the
  closed form cannot price is lowered once); proves optimality under the model. For small
  cases and tests (refuses beyond :data:`EXHAUSTIVE_LIMIT` candidates).
- ``smt``: greedy's plan seeds a branch and bound (:mod:`tensorc.planning.smt_search`: grid
  by grid with closed-form floors, or z3 over block counts outside the closed form), so it
  is never worse than greedy; with the proof it equals exhaustive.
- ``auto``: one node needs no search; else ``smt``.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from tensorc.errors import PlanError
from tensorc.placement.layout import prime_factors
from tensorc.planning import prediction
from tensorc.planning.distribution import (
    BLOCK_MEMORY_SHARE,
    Candidate,
    Modelled,
    Priced,
    Problem,
    achievable,
    oversized_block,
    predicted_cost,
    price,
)

EXHAUSTIVE_LIMIT = 20_000  # candidates; beyond this exhaustive refuses (use smt)


@dataclass
class DistributedPlan:
    """The outcome of a search (module contract): the chosen candidate as the search priced
    it (``priced``: in closed form where it applies) and lowered and simulated
    (``modelled``: the task graph, the LSHS schedule the runtime follows and its price)."""

    planner: str
    modelled: Modelled | None
    lower_bound_bytes: int
    optimal: bool | None
    evaluated: int
    seconds: float
    notes: list[str] = field(default_factory=list)
    priced: Priced | None = None
    problem: Problem | None = None
    """The problem the plan was planned on: the one searched, or its copy that lets a few
    nodes idle (:func:`~tensorc.planning.planners.search`)."""

    @property
    def candidate(self) -> Candidate:
        return self.modelled.candidate if self.modelled is not None else self.priced.candidate

    @property
    def cost(self) -> float:
        """The cost the search compared candidates by (the model's)."""
        return self.priced.cost if self.priced is not None else self.modelled.report.cost

    @property
    def ratio(self) -> float | None:
        """Busiest receiver's modelled bytes over the lower bound (None when the bound is 0):
        the simulated schedule's, or the closed form's when the plan was not lowered."""
        bound = self.lower_bound_bytes
        if self.modelled is not None:
            received = self.modelled.report.max_node_recv_bytes
        else:
            received = int(self.priced.figures.total_received.max())
        if bound <= 0:
            return None if received else 1.0
        return received / bound


def grids(problem: Problem) -> list[tuple[tuple[str, int], ...]]:
    """Every legal index grid: ``∏ p_i`` one of the problem's grid sizes (``P``, and the
    largest count below it without a prime factor above 5 when ``P`` has one; for a
    problem's copy that leaves a few nodes idle, that count alone:
    :meth:`~tensorc.planning.distribution.Problem.grid_sizes`) with ``p_i`` at most the
    extent, in a fixed order."""
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

    for size in problem.grid_sizes():
        extend(0, size, [])
    return out


def grid_floors(problem: Problem) -> tuple[list, np.ndarray, np.ndarray]:
    """``(layouts, p, floors)``: the legal grids whose every index has a legal block count,
    each with those counts (``(grid, options)``), their grid sizes as rows of ``p``, and
    each grid's floor of the model's cost at its fewest blocks, which bounds every count
    of the grid (:func:`prediction.cost_floors`, grid-wide: the network term is the
    average node's bytes, which depends on the grid alone, and submission, compute and the
    blocks held only grow with the counts, every count a multiple of the grid's when the
    split is even). Kept on the problem: a search that looks before it goes grid by grid
    (:func:`~tensorc.planning.planners.search`) computes them once."""
    return problem.memo("grid floors", lambda: _grid_floors(problem))


def _grid_floors(problem: Problem) -> tuple[list, np.ndarray, np.ndarray]:
    layouts = []
    for grid in problem.memo("grids", lambda: grids(problem)):
        options = [multipliers(problem, i, p) for i, p in grid]
        if all(options):
            layouts.append((grid, options))
    if not layouts:
        return [], np.zeros((0, len(problem.indices)), dtype=np.int64), np.zeros(0)
    p = np.array([[v for _, v in grid] for grid, _ in layouts], dtype=np.int64)
    least = np.array([[o[0] for o in options] for _, options in layouts], dtype=np.int64)
    floors = prediction.cost_floors(problem, p, least, network=problem.even_split(),
                                    grid_wide=True)
    return layouts, p, floors


@functools.lru_cache(maxsize=64)
def multiplier_values(nodes: int) -> list[int]:
    """Blocks per grid cell an index may take: the divisors of ``P`` and the powers of two
    up to ``P`` (so an output can be reduce-scattered over the nodes of a split summed
    index — ``m ≥ R`` — and, when ``P`` has an odd factor, evenly)."""
    values = {d for d in range(1, nodes + 1) if nodes % d == 0}
    power = 1
    while power <= nodes:
        values.add(power)
        power *= 2
    return sorted(values)


def multipliers(problem: Problem, index: str, p: int) -> tuple[int, ...]:
    """Legal counts along ``index`` for grid ``p``: ``p × m`` for ``m`` in
    :func:`multiplier_values` that the extent can be cut into evenly, or the fixed blocking
    of an operand computed in its layout (then any grid is legal: the grid places work,
    the operand's blocks stay where they are)."""
    return problem.memo(("multipliers", index, p), lambda: tuple(_multipliers(problem, index, p)))


def _multipliers(problem: Problem, index: str, p: int) -> list[int]:
    fixed = (problem.placed_counts or {}).get(index)
    if fixed is not None:
        return [fixed]
    size = problem.sizes[index]
    if not problem.even_split():
        powers = {1 << k for k in range(max(size, 1).bit_length())} | {max(size, 1)}
        return sorted(c for c in powers if c <= max(size, 1) and achievable(size, c))
    values = sorted({m for nodes in problem.grid_sizes() for m in multiplier_values(nodes)})
    return [p * m for m in values if p * m <= max(size, 1) and achievable(size, p * m)]


def spread_counts(problem: Problem, grid) -> tuple[tuple[str, int], ...] | None:
    """Block counts for ``grid`` chosen in closed form, without modelling.

    Each index starts at its grid size (its smallest legal count). While an array's block
    breaks the memory rule, the index with the largest blocks among those that can grow
    steps up to its next legal count. Then, while it helps, the one step up that lowers
    :func:`~tensorc.planning.distribution.predicted_cost` most is taken (ties: index name) —
    more blocks let an array be owned evenly and an output be reduce-scattered, at the price
    of more tasks. None when an index has no legal count for the grid."""
    p = dict(grid)
    options = {i: multipliers(problem, i, p[i]) for i in problem.indices}
    if any(not o for o in options.values()):
        return None
    step = {i: 0 for i in problem.indices}
    sizes = problem.sizes

    def counts() -> tuple[tuple[str, int], ...]:
        return tuple((i, options[i][step[i]]) for i in problem.indices)

    while oversized_block(problem, dict(counts())) is not None:
        room = [i for i in problem.indices if step[i] + 1 < len(options[i])]
        if not room:
            return None
        widest = max(room, key=lambda i: (sizes[i] / options[i][step[i]], i))
        step[widest] += 1
    grid_key = tuple(sorted(grid))
    indices = problem.indices
    row = np.array([p[i] for i in indices], dtype=np.int64)
    best = predicted_cost(problem, Candidate(grid_key, counts()))
    while True:
        trials, moved = [], []
        for index in indices:
            if step[index] + 1 >= len(options[index]):
                continue
            step[index] += 1
            trial = counts()
            step[index] -= 1
            if oversized_block(problem, dict(trial)) is None:
                trials.append([count for _, count in trial])
                moved.append(index)
        if not trials:
            break
        # every move of the round priced at once (one call, as many rows as moves)
        values = prediction.predicted_costs(
            problem, np.tile(row, (len(trials), 1)), np.array(trials, dtype=np.int64))
        value, index = min(zip(values.tolist(), moved, strict=True))
        if value >= best * (1 - 1e-12):
            break
        best = value
        step[index] += 1
    return counts()


def _candidate(problem: Problem, grid) -> Candidate | None:
    counts = spread_counts(problem, grid)
    return None if counts is None else Candidate(tuple(sorted(grid)), counts)


def heuristic(problem: Problem) -> tuple[Priced, bool | None, int, list[str]]:
    """NumS: a softmax of log-extents over the largest operand's indices."""
    sizes = problem.sizes
    arrays = [a for stage in problem.stage_arrays() for a in stage[0]] or [None]
    largest = max(arrays, key=lambda a: (a.elements, a.dims)) if arrays[0] else None
    dims = sorted(set(largest.dims)) if largest else list(problem.indices)
    dims = [d for d in dims if sizes[d] > 1] or list(problem.indices)
    weights = _softmax([math.log(max(sizes[d], 1)) for d in dims])
    grid = {i: 1 for i in problem.indices}
    for factor in prime_factors(problem.grid_sizes()[0]):  # P, unless nodes stay idle
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
    return price(problem, candidate), None, 1, []


def _softmax(values: list[float]) -> list[float]:
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    total = sum(exps)
    return [e / total for e in exps]


def _first_legal(problem: Problem) -> tuple[Priced, bool | None, int, list[str]]:
    for grid in grids(problem):
        candidate = _candidate(problem, grid)
        if candidate is not None:
            return price(problem, candidate), None, 1, []
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


def better(trial: Priced, best: Priced | None) -> bool:
    """The order every search shares: lower cost under the model, then the smaller
    candidate."""
    if best is None:
        return True
    return (trial.cost, trial.candidate) < (best.cost, best.candidate)


def greedy(problem: Problem) -> tuple[Priced, bool | None, int, list[str]]:
    """Spartan-style descent over the whole graph: start from the heuristic grid, then take
    the best move — one prime factor of the grid moved from one index to another, trying
    indices by connectivity (block counts re-spread) — while it improves the model; then
    move each index's block count one legal step up or down while the model improves."""
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
            trial = price(problem, candidate)
            evaluated += 1
            if better(trial, best):
                best, improved = trial, True
    best, refined = _refine_counts(problem, best, order)
    return best, None, evaluated + refined, []


def _refine_counts(problem: Problem, best: Priced, order: list[str]) -> tuple[Priced, int]:
    """Move one index's count one legal step up or down while the model improves."""
    evaluated = 0
    seen = {best.candidate}
    improved = True
    while improved:
        improved = False
        for index in order:
            counts = dict(best.candidate.counts)
            options = multipliers(problem, index, best.candidate.grid_of(index))
            at = options.index(counts[index])
            for step in (at + 1, at - 1):
                if not 0 <= step < len(options):
                    continue
                counts[index] = options[step]
                candidate = Candidate(best.candidate.grid, tuple(sorted(counts.items())))
                if candidate in seen or oversized_block(problem, counts) is not None:
                    continue
                seen.add(candidate)
                trial = price(problem, candidate)
                evaluated += 1
                if better(trial, best):
                    best, improved = trial, True
                    break
    return best, evaluated


def count_vectors(problem: Problem, grid) -> list[tuple[tuple[str, int], ...]]:
    """Every legal combination of block counts for ``grid`` (memory rule kept)."""
    options = [multipliers(problem, i, p) for i, p in grid]
    out = []
    for counts in itertools.product(*options):
        vector = tuple(zip(problem.indices, counts, strict=True))
        if oversized_block(problem, dict(vector)) is None:
            out.append(vector)
    return out


def table_size(problem: Problem) -> int:
    """How many rows :func:`candidate_table` would have before the memory rule (cheap: no
    table is built; cached per problem)."""
    def count() -> int:
        total = 0
        for grid in problem.memo("grids", lambda: grids(problem)):
            total += math.prod(len(multipliers(problem, i, p)) for i, p in grid)
        return total

    return problem.memo("table_size", count)


def candidate_table(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Every legal candidate as arrays (grid sizes, block counts; one row per candidate,
    columns in ``problem.indices`` order, rows in :class:`Candidate` sort order), built with
    numpy so even tens of thousands of candidates cost milliseconds (cached per problem)."""
    return problem.memo("candidate_table", lambda: _candidate_table(problem))


def _candidate_table(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    width = len(problem.indices)
    ps, cs = [], []
    for grid in grids(problem):
        options = [multipliers(problem, i, p) for i, p in grid]
        if any(not o for o in options):
            continue
        mesh = np.meshgrid(*[np.asarray(o, dtype=np.int64) for o in options], indexing="ij")
        counts = np.stack([m.reshape(-1) for m in mesh], axis=1).reshape(-1, width)
        ps.append(np.tile(np.asarray([p for _, p in grid], dtype=np.int64), (len(counts), 1)))
        cs.append(counts)
    if not ps:
        empty = np.zeros((0, width), dtype=np.int64)
        return empty, empty
    p = np.concatenate(ps)
    c = np.concatenate(cs)
    keep = prediction.fits_memory(problem, c, problem.memory_bytes // BLOCK_MEMORY_SHARE)
    p, c = p[keep], c[keep]
    keys = [c[:, k] for k in reversed(range(width))] + [p[:, k] for k in reversed(range(width))]
    order = np.lexsort(keys) if keys else np.arange(len(p))
    return p[order], c[order]


def all_candidates(problem: Problem) -> list[Candidate]:
    """Every legal candidate, in sort order: each grid with every combination of counts."""
    return sorted(
        Candidate(grid, counts)
        for grid in grids(problem)
        for counts in count_vectors(problem, grid)
    )


def exhaustive(problem: Problem) -> tuple[Priced, bool | None, int, list[str]]:
    """Price every legal candidate; the cheapest (then the smallest candidate) wins. Visits
    candidates grouped by block counts, so a task graph the closed form cannot price is
    lowered once."""
    candidates = all_candidates(problem)
    if len(candidates) > EXHAUSTIVE_LIMIT:
        raise PlanError(
            f"exhaustive search would model {len(candidates)} candidates (limit "
            f"{EXHAUSTIVE_LIMIT}); use planner='smt'"
        )
    if not candidates:
        raise PlanError(f"no legal grid puts {problem.indices} on {problem.nodes} nodes")
    best = None
    for candidate in sorted(candidates, key=lambda c: (c.counts, c.grid)):
        trial = price(problem, candidate, checked=True)
        if better(trial, best):
            best = trial
    return best, True, len(candidates), []


