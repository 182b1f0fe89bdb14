"""The SMT planner: z3 enumerates legal candidates, the shared model prices them.

Contract: ``smt(problem, seed)`` returns ``(modelled, optimal, evaluated, notes)`` like the
other searches in :mod:`tensorc.passes.search`.

Encoding (a plain ``z3.Solver``, never ``z3.Optimize``): one integer per index chooses its
``(grid size p_i, block count c_i)`` from the legal options (``p_i`` divides ``P`` and is
at most the extent, ``c_i = p_i · 2^k`` can be cut evenly — the divisibility rules). The
product of the grid sizes is ``P``, written linearly over the prime exponents of ``P``.
The per-node memory rule bounds every array's block: ``|A| / ∏_{i∈A} c_i`` elements at
most a quarter of the node's budget. Block counts give the exact number of compute tasks
``T(c)`` (pair/apply tasks per stage plus the reduce tasks), tabulated over exponent sums.

Search: branch and bound on ``cost``. ``bound(c) = L / bandwidth + (flops / rate + T(c) ·
task) / (P · cores) + T(c) · submit`` never exceeds the model's cost of any candidate with
those counts (``L`` is the communication lower bound; the busiest node does at least the
average). Starting from the best of the seed and the estimate-guided candidates, the
loop asks z3 for a candidate with ``bound < best`` that it has not priced, prices it with
the shared model (:func:`tensorc.passes.distribution.model`), tightens ``best``, and
excludes it. ``unsat`` proves that no candidate is cheaper under the model (``optimal``);
running out of the deterministic ``rlimit`` budget or of :data:`MAX_MODELS` model calls
ends the search without the proof (``optimal=False``, said in the notes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import z3

from tensorc.passes import cost as price
from tensorc.passes.distribution import Candidate, Modelled, Problem, estimate, model

RLIMIT = 20_000_000  # z3 resource units for the whole search (deterministic)
MAX_MODELS = 48  # shared-model calls before the search stops without a proof


def _exponent(n: int, q: int) -> int:
    e = 0
    while n % q == 0 and n > 1:
        n //= q
        e += 1
    return e


def _primes(n: int) -> list[int]:
    out, p = [], 2
    while n > 1:
        if n % p == 0:
            out.append(p)
            while n % p == 0:
                n //= p
        p += 1
    return out


def options(problem: Problem) -> dict[str, list[tuple[int, int]]]:
    """Legal ``(p_i, c_i)`` per index."""
    from tensorc.passes.search import multipliers

    sizes = problem.sizes
    out = {}
    for index in problem.indices:
        choices = []
        for p in range(1, problem.nodes + 1):
            if problem.nodes % p or p > max(sizes[index], 1):
                continue
            choices.extend((p, c) for c in multipliers(problem, index, p))
        out[index] = choices
    return out


def compute_tasks(problem: Problem, counts: dict[str, int]) -> int:
    """Compute tasks of the candidate's task graph: per stage one per iteration block,
    plus one reduce per output block when the stage's summed indices have several blocks."""
    total = 0
    for arrays, output in problem.stage_arrays():
        dims = {i for a in arrays for i in a.dims} | set(output.dims)
        total += math.prod(counts[i] for i in dims)
        summed = dims - set(output.dims)
        if math.prod(counts[i] for i in summed) > 1:
            total += math.prod(counts[i] for i in set(output.dims))
    return total


def lower_cost(problem: Problem, tasks: int, bound_bytes: int, flops: int) -> float:
    """The valid lower bound of the model's cost for a candidate with ``tasks`` tasks."""
    nodes = problem.nodes
    return (
        bound_bytes / price.NETWORK_BYTES_PER_SECOND
        + (flops / price.BLAS_FLOPS_PER_CORE + tasks * price.RAY_TASK_SECONDS)
        / (nodes * price.CORES_PER_NODE)
        + tasks * price.RAY_SUBMIT_SECONDS
    )


def _table(var, values: Sequence, default):
    expr = default
    for position in range(len(values) - 1, -1, -1):
        expr = z3.If(var == position, values[position], expr)
    return expr


def smt(problem: Problem, seed: Modelled | None = None):
    """Branch and bound over the legal candidates (module contract)."""
    choices = options(problem)
    indices = problem.indices
    solver = z3.Solver()
    solver.set("rlimit", RLIMIT)
    var = {i: z3.Int(f"choice_{i}") for i in indices}
    for index in indices:
        solver.add(var[index] >= 0, var[index] < len(choices[index]))
    for q in _primes(problem.nodes):
        exps = [
            _table(var[i], [_exponent(p, q) for p, _ in choices[i]], 0) for i in indices
        ]
        solver.add(z3.Sum(exps) == _exponent(problem.nodes, q))
    budget = problem.memory_bytes // 4
    itemsize = problem.itemsize
    count_exps = {}
    primes = sorted(set(_primes(problem.nodes)) | {2})
    for index in indices:
        count_exps[index] = {
            q: _table(var[index], [_exponent(c, q) for _, c in choices[index]], 0)
            for q in primes
        }
    for arrays, output in problem.stage_arrays():
        for array in [*arrays, output]:
            dims = sorted(set(array.dims))
            # |A| / ∏ c_i ≤ budget / itemsize  ⇔  Σ log c_i ≥ log(|A| · itemsize / budget)
            need = math.log(max(array.elements * itemsize / budget, 1.0))
            if need > 0 and dims:
                logs = [
                    z3.ToReal(count_exps[i][q]) * math.log(q) for i in dims for q in primes
                ]
                solver.add(z3.Sum(logs) >= need)
    tasks_expr = _tasks_expr(problem, choices, var, count_exps, primes)
    bound = problem.lower_bound_bytes()
    flops = sum(t.flops for t in problem.graph(_smallest(problem, choices)).tasks
                if t.kind != "load")
    cost_of_tasks = lower_cost(problem, 0, bound, flops)
    per_task = (
        price.RAY_TASK_SECONDS / (problem.nodes * price.CORES_PER_NODE)
        + price.RAY_SUBMIT_SECONDS
    )
    best = seed
    priced: dict[Candidate, Modelled] = {}
    if seed is not None:
        priced[seed.candidate] = seed
    notes: list[str] = []
    evaluated = 0

    def exclude(candidate: Candidate) -> None:
        grid = dict(candidate.grid)
        counts = dict(candidate.counts)
        solver.add(z3.Or([
            var[i] != choices[i].index((grid[i], counts[i])) for i in indices
        ]))

    def candidate_of(m) -> Candidate:
        picked = {i: choices[i][m.eval(var[i], model_completion=True).as_long()] for i in indices}
        return Candidate(
            tuple((i, picked[i][0]) for i in indices), tuple((i, picked[i][1]) for i in indices)
        )

    if seed is not None:
        exclude(seed.candidate)
    # phase 1: descend the closed-form estimate to find a good incumbent fast
    guide = z3.Solver()
    guide.set("rlimit", RLIMIT // 4)
    guide.add(solver.assertions())
    est_expr = _estimate_expr(problem, choices, var)
    best_est = None
    while evaluated < MAX_MODELS // 2:
        if best_est is not None:
            guide.add(est_expr < best_est)
        if guide.check() != z3.sat:
            break
        candidate = candidate_of(guide.model())
        best_est = estimate(problem, candidate)
        trial = model(problem, candidate)
        evaluated += 1
        priced[candidate] = trial
        exclude(candidate)
        if best is None or trial.report.cost < best.report.cost:
            best = trial
    # phase 2: branch and bound on the valid lower bound of the model's cost
    optimal = False
    while True:
        if best is not None:
            solver.add(cost_of_tasks + tasks_expr * per_task < best.report.cost)
        if evaluated >= MAX_MODELS:
            notes.append(f"smt: stopped after {evaluated} model calls without a proof")
            break
        verdict = solver.check()
        if verdict == z3.unsat:
            optimal = True
            break
        if verdict == z3.unknown:
            notes.append(f"smt: z3 ran out of its rlimit budget ({RLIMIT}) without a proof")
            break
        candidate = candidate_of(solver.model())
        exclude(candidate)
        trial = model(problem, candidate)
        evaluated += 1
        if best is None or trial.report.cost < best.report.cost:
            best = trial
    return best, optimal, evaluated, notes


def _smallest(problem: Problem, choices) -> tuple[tuple[str, int], ...]:
    return tuple((i, min(c for _, c in choices[i])) for i in problem.indices)


def _power_table(total_exps: dict[int, z3.ArithRef], limits: dict[int, int]):
    """``∏ q^{e_q}`` as a real expression over bounded integer exponent sums."""
    expr = z3.RealVal(1)
    for q, e in total_exps.items():
        values = [z3.RealVal(q ** k) for k in range(limits[q] + 1)]
        expr = expr * _table(e, values, z3.RealVal(q ** limits[q]))
    return expr


def _tasks_expr(problem, choices, var, count_exps, primes):
    limits = {
        q: max(_exponent(c, q) for i in problem.indices for _, c in choices[i]) * len(
            problem.indices) for q in primes
    }
    total = z3.RealVal(0)
    for arrays, output in problem.stage_arrays():
        dims = sorted({i for a in arrays for i in a.dims} | set(output.dims))
        out = sorted(set(output.dims))
        summed = [i for i in dims if i not in out]
        total = total + _power_table({q: z3.Sum([count_exps[i][q] for i in dims] or [
            z3.IntVal(0)]) for q in primes}, limits)
        if summed:
            several = z3.Sum([count_exps[i][q] for i in summed for q in primes]) > 0
            total = total + z3.If(several, _power_table({q: z3.Sum(
                [count_exps[i][q] for i in out] or [z3.IntVal(0)]) for q in primes}, limits),
                z3.RealVal(0))
    return total


def _estimate_expr(problem: Problem, choices, var):
    """:func:`tensorc.passes.distribution.estimate` as a z3 expression."""
    nodes = problem.nodes
    total = z3.RealVal(0)
    for arrays, output in problem.stage_arrays():
        for array in [*arrays, output]:
            dims = set(array.dims)
            # across = ∏_{i∈A} p_i (a divisor of P) and per_cell = ∏_{i∈A} c_i / p_i, in logs
            across_log = z3.Sum([_table(var[i], [math.log(p) for p, _ in choices[i]], 0.0)
                                 for i in sorted(dims)] or [z3.RealVal(0)])
            cell_log = z3.Sum([_table(var[i], [math.log(c / p) for p, c in choices[i]], 0.0)
                               for i in sorted(dims)] or [z3.RealVal(0)])
            share = z3.RealVal(0)
            for value in (d for d in range(1, nodes + 1) if nodes % d == 0):
                near = z3.And(across_log > math.log(value) - 1e-9,
                              across_log < math.log(value) + 1e-9)
                share = z3.If(near, z3.RealVal(array.elements / value), share)
            owned = z3.If(across_log + cell_log >= math.log(nodes) - 1e-9,
                          z3.RealVal(array.elements / nodes), z3.RealVal(0))
            term = share - owned
            total = total + z3.If(term > 0, term, z3.RealVal(0))
    return total
