"""The SMT planner: branch and bound over the legal candidates, proved under the model.

Contract: ``smt(problem, seed)`` returns ``(priced, optimal, evaluated, notes)`` like the
other searches in :mod:`tensorc.planning.search`: the cheapest candidate it priced under the
shared order (lower cost under the model — :func:`~tensorc.planning.distribution.price`:
the closed form where it applies, else the simulation — then the smaller
:class:`~tensorc.planning.distribution.Candidate`), never worse than ``seed``; ``optimal`` is
True only when the search proved that no legal candidate is cheaper — then the plan is the
one :func:`~tensorc.planning.search.exhaustive` returns. Deterministic: every budget counts
resources (z3's ``rlimit``, candidates priced, tasks lowered and simulated), never wall
time.

Search:

1. *ranked incumbents*: the seed (greedy's plan) and, when the legal space is small enough
   to tabulate (:data:`TABLE_LIMIT`), the :data:`RANKED_MODELS` candidates of lowest
   closed-form predicted cost (:func:`tensorc.planning.prediction.predicted_costs`, numpy
   over the whole space) are priced first, so the bounds below start tight;
2. *grid by grid* (every problem the closed form prices, :func:`symbolic_cost.closed_form`,
   and any space too large to tabulate): grids in the order of their floor
   (:func:`tensorc.planning.prediction.cost_floors` with the average node's bytes, which
   depends on the grid alone); a grid whose floor at its fewest blocks exceeds the best
   cost is passed over whole; within a grid the block counts are built index by index,
   dropping partial vectors whose task count alone prices them out (tasks only grow with
   counts), then each is priced, lowest prediction first, unless its own floor exceeds
   the best cost. Going through every grid proves that no candidate is cheaper: each was
   priced or has a floor above the plan's cost;
3. *z3 over block counts* (problems outside the closed form: operands computed in a layout
   of their own, uneven splits, forced blockings, merges — their candidates are priced by
   simulation, and the closed-form floors do not apply): z3 is asked for block counts whose
   valid lower bound of the model's cost (:mod:`tensorc.planning.model_bound`) does not
   exceed the best cost so far: the average compute plus ``T(c)`` times the per-task price,
   exactly (``T(c) ≤ allowed``), and, under a condition implying that the arrays it speaks
   for have at least ``P`` blocks, the network bound as well (as a per-stage bound on the
   counts' prime exponents, which keeps z3 fast). The constraints only tighten, so they are
   added to the one solver as the best improves. The exact Python bound is checked next;
   then every grid for those counts is priced, lowest prediction first, unless its floor
   exceeds the best cost, and the counts are excluded. ``unsat`` proves that no candidate
   is cheaper.

Encoding (phase 3; a plain ``z3.Solver``, never ``z3.Optimize``): one integer per index
chooses its ``(grid size p_i, block count c_i)`` among the legal pairs
(:func:`tensorc.planning.search.multipliers`). The product of the grid sizes is ``P`` (a
problem whose grids span fewer nodes is in the closed form's domain, searched grid by grid),
written linearly over the prime exponents of ``P``; the memory rule (no array's block over
a share of the node's budget) is a relaxation in integer-scaled logs (what it lets through
is re-checked before pricing); the number of compute tasks ``T(c)`` (per stage the
product of its indices' counts, plus its reduces) is a table over sums of prime exponents.
Everything is linear integer arithmetic plus tables (``QF_LIA``), in a z3 context of its
own per search (built only when phase 3 runs), so z3 enumerates the same way on every run.

Budgets: :data:`RLIMIT` z3 resource units and :data:`MAX_CHECKS` z3 calls over the whole
search, and :data:`WORK_BUDGET` units of pricing (a candidate priced in closed form
:data:`SYMBOLIC_WEIGHT`; a task simulated one, a task lowered :data:`LOWER_WEIGHT`, each
counts vector charged its lowering once per search). Running out of any ends the search
without the proof (``optimal=False``, said in the notes). On the development machine the
mission's contractions plan with the proof in well under a second up to 64 nodes, and
contractions of 8192³ elements on 1,024 or 4,096 simulated nodes in about a second
(``benchmarks/scale.py``).
"""

from __future__ import annotations

import math

import numpy as np
import z3

from tensorc.placement.layout import prime_factors
from tensorc.planning import cost as price
from tensorc.planning import model_bound, prediction, symbolic_cost
from tensorc.planning.distribution import (
    BLOCK_MEMORY_SHARE,
    Candidate,
    Priced,
    Problem,
    candidate_arrays,
    oversized_block,
)
from tensorc.planning.distribution import price as price_candidate
from tensorc.planning.search import candidate_table, grid_floors, grids, multipliers, table_size

RLIMIT = 1_500_000  # z3 resource units for the whole search (deterministic)
MAX_CHECKS = 160  # z3 calls for the whole search (each costs a millisecond or more)
WORK_BUDGET = 45_000  # modelling units: tasks simulated, plus LOWER_WEIGHT per task lowered
LOWER_WEIGHT = 3  # lowering a task costs about three times simulating it
SYMBOLIC_WEIGHT = 20  # pricing a candidate in closed form costs about 20 simulated tasks
RANKED_MODELS = 8  # candidates of lowest predicted cost modelled before branch and bound
TABLE_LIMIT = 250_000  # legal candidates beyond which the whole space is never tabulated
SLACK = 1e-9  # relative slack on cost comparisons (float rounding; never prunes a tie)
LOG_SCALE = 1000  # logs enter the integer encoding as floor(LOG_SCALE · log v)


def _exponent(n: int, q: int) -> int:
    e = 0
    while n % q == 0 and n > 1:
        n //= q
        e += 1
    return e


def _primes(n: int) -> list[int]:
    """The distinct prime factors of ``n``, ascending."""
    return sorted(set(prime_factors(n)))


def options(problem: Problem) -> dict[str, list[tuple[int, int]]]:
    """Legal ``(p_i, c_i)`` per index."""
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


def _table(var, values, default):
    expr = default
    for position in range(len(values) - 1, -1, -1):
        expr = z3.If(var == position, values[position], expr)
    return expr


class _Encoding:
    """The solver, one choice variable per index and the tables built over them."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.choices = options(problem)
        self.indices = problem.indices
        self.ctx = z3.Context()  # a context per search: z3 behaves the same on every run
        self.solver = z3.SolverFor("QF_LIA", ctx=self.ctx)
        self.var = {i: z3.Int(f"choice_{i}", ctx=self.ctx) for i in self.indices}
        counts = {c for i in self.indices for _, c in self.choices[i]}
        self.primes = sorted(
            {2} | set(_primes(problem.nodes)) | {q for c in counts for q in _primes(c)}
        )
        self._exps: dict = {}
        self._products: dict = {}
        solver = self.solver
        for index in self.indices:
            solver.add(self.var[index] >= 0, self.var[index] < len(self.choices[index]))
        for q in _primes(problem.nodes):
            solver.add(z3.Sum([self.exps(i, 0)[q] for i in self.indices])
                       == _exponent(problem.nodes, q))
        self._memory_rule()

    def exps(self, index: str, which: int) -> dict[int, z3.ArithRef]:
        """Prime exponents of ``p_i`` (``which=0``) or ``c_i`` (``which=1``) as terms."""
        key = (index, which)
        if key not in self._exps:
            values = [option[which] for option in self.choices[index]]
            self._exps[key] = {
                q: _table(self.var[index], [_exponent(v, q) for v in values], 0)
                for q in self.primes
            }
        return self._exps[key]

    def count_product(self, dims, cap: float | None = None) -> z3.ArithRef:
        """``∏_{i∈dims} c_i`` as a table over the sums of the counts' prime exponents;
        with ``cap``, every product above it reads as ``floor(cap) + 1`` (the table only
        needs the values a constraint ``≤ cap`` can still accept)."""
        dims = tuple(sorted(set(dims)))
        key = (dims, cap)
        if key in self._products:
            return self._products[key]
        if not dims:
            return z3.IntVal(1, ctx=self.ctx)
        sums, tops = [], []
        for q in self.primes:
            sums.append(z3.Sum([self.exps(i, 1)[q] for i in dims]))
            tops.append(sum(max(_exponent(c, q) for _, c in self.choices[i]) for i in dims))
        combos: list[list[int]] = [[]]
        for top in tops:
            combos = [
                [*combo, e] for combo in combos for e in range(top + 1)
                if cap is None or math.prod(
                    p**x for p, x in zip(self.primes, [*combo, e], strict=False)) <= cap
            ]
        expr = z3.IntVal(0 if cap is None else math.floor(cap) + 1, ctx=self.ctx)
        for combo in combos:
            value = math.prod(q**e for q, e in zip(self.primes, combo, strict=True))
            expr = z3.If(z3.And([t == e for t, e in zip(sums, combo, strict=True)]), value, expr)
        self._products[key] = expr
        return expr

    def scaled_logs(self, index: str, values) -> z3.ArithRef:
        """``floor(LOG_SCALE · log v)`` of the chosen option's value ``v`` (an integer
        table: sums of these never exceed the scaled log of the product, so a bound on
        them only relaxes the constraint it stands for)."""
        return _table(self.var[index], [math.floor(LOG_SCALE * math.log(v)) for v in values], 0)

    def _memory_rule(self) -> None:
        """Arrays whose block could break the memory rule get ``Σ log ceil(N_i / c_i) ≤
        log(limit)`` in scaled integer logs (a relaxation: a candidate it lets through but
        the rule refuses is skipped before modelling); the others need no constraint."""
        problem = self.problem
        sizes = problem.sizes
        limit = problem.memory_bytes // BLOCK_MEMORY_SHARE
        allowed = max(limit, 1) / problem.itemsize
        for arrays, output in problem.stage_arrays():
            for array in [*arrays, output]:
                dims = sorted(set(array.dims))
                blocks = {i: [max(1, math.ceil(sizes[i] / c)) for _, c in self.choices[i]]
                          for i in dims}
                if math.prod(max(b) for b in blocks.values()) <= allowed:
                    continue
                self.solver.add(
                    z3.Sum([self.scaled_logs(i, blocks[i]) for i in dims])
                    <= math.floor(LOG_SCALE * math.log(allowed))
                )

    def tasks(self, cap: float | None = None) -> z3.ArithRef:
        """The number of compute tasks ``T(c)`` (:func:`model_bound.task_counts`), exact up
        to ``cap`` (above it, only known to exceed ``cap``)."""
        total = []
        for shape in model_bound.stage_shapes(self.problem):
            total.append(self.count_product(shape.dims, cap))
            summed = [i for i in shape.dims if i not in shape.output]
            if summed:
                several = z3.Sum([self.exps(i, 1)[q] for i in summed for q in self.primes]) > 0
                total.append(z3.If(several, self.count_product(shape.output, cap), 0))
        return z3.Sum(total) if total else z3.IntVal(0, ctx=self.ctx)

    def stage_task_logs(self, allowed: float) -> list[z3.BoolRef]:
        """Every stage's iteration blocks are at most ``allowed``, as ``Σ_{i∈stage}
        e_q(c_i) ≤ log_q(allowed)`` for each prime ``q``: implied by ``T(c) ≤ allowed``,
        linear, and over the same exponent terms as ``T``, so z3 prunes with it cheaply."""
        shapes = model_bound.stage_shapes(self.problem)
        if allowed < 0 or (shapes and allowed < 1):  # every stage has at least one task
            return [z3.BoolVal(False, ctx=self.ctx)]
        out = []
        for shape in shapes:
            for q in self.primes:
                terms = [self.exps(i, 1)[q] for i in shape.dims]
                if terms:
                    out.append(z3.Sum(terms) <= math.floor(math.log(allowed, q) + 1e-9))
        return out

    def at_least(self, dims, nodes: int) -> z3.BoolRef:
        """A condition over the counts' prime exponents that implies ``∏_{i∈dims} c_i ≥
        nodes``: ``nodes`` divides the product, or one prime's power alone reaches it
        (exact when ``nodes`` is a prime power)."""
        dims = sorted(set(dims))
        sums = {q: z3.Sum([self.exps(i, 1)[q] for i in dims] or [z3.IntVal(0, ctx=self.ctx)])
                for q in self.primes}
        divides = z3.And([sums[q] >= _exponent(nodes, q) for q in self.primes])
        alone = [sums[q] >= math.ceil(math.log(nodes, q) - 1e-12) for q in self.primes]
        return z3.Or([divides, *alone])

    def candidate(self, found) -> Candidate:
        picked = {
            i: self.choices[i][found.eval(self.var[i], model_completion=True).as_long()]
            for i in self.indices
        }
        return Candidate(
            tuple((i, picked[i][0]) for i in self.indices),
            tuple((i, picked[i][1]) for i in self.indices),
        )

    def legal(self, index: str, p: int, c: int) -> bool:
        return (p, c) in self.choices[index]

    def other_count(self, index: str, count: int) -> z3.BoolRef:
        """``c_i != count`` (cached per index and count)."""
        key = ("other", index, count)
        if key not in self._products:
            positions = [k for k, (_, c) in enumerate(self.choices[index]) if c == count]
            self._products[key] = z3.And([self.var[index] != k for k in positions])
        return self._products[key]

    def exclude_counts(self, counts: dict[str, int]) -> None:
        """No more candidates with these block counts (whatever the grid)."""
        self.solver.add(z3.Or([self.other_count(i, counts[i]) for i in self.indices]))


def _rlimit_count(solver: z3.Solver) -> int:
    """z3's resource counter (it runs on across the solvers of one context)."""
    try:
        return solver.statistics().get_key_value("rlimit count")
    except z3.Z3Exception:
        return 0


class _Search:
    """The state of one SMT search: the encoding, the incumbent and the budgets."""

    def __init__(self, problem: Problem, seed: Priced | None) -> None:
        self.problem = problem
        self._enc: _Encoding | None = None
        self.best = seed
        self.priced: set[Candidate] = set()
        self.lowered: set = set()
        self.evaluated = 0
        self.work = 0
        self.rlimit_used = 0
        self.rlimit_seen = 0
        self.checks = 0
        self.notes: list[str] = []
        if seed is not None:
            self.priced.add(seed.candidate)

    @property
    def enc(self) -> _Encoding:
        """The z3 encoding, built on first use (the grid-by-grid phase needs none)."""
        if self._enc is None:
            self._enc = _Encoding(self.problem)
            self.rlimit_seen = _rlimit_count(self._enc.solver)
        return self._enc

    def check(self) -> z3.CheckSatResult:
        solver = self.enc.solver
        remaining = RLIMIT - self.rlimit_used
        if remaining <= 0 or self.checks >= MAX_CHECKS:
            return z3.unknown
        solver.set("rlimit", remaining)
        verdict = solver.check()
        count = _rlimit_count(solver)
        self.rlimit_used += count - self.rlimit_seen
        self.rlimit_seen = count
        self.checks += 1
        return verdict

    def out_of_work(self) -> bool:
        return self.work >= WORK_BUDGET

    def price(self, candidate: Candidate) -> None:
        """Price ``candidate`` (once), charging the budget; keep it if it is better."""
        if candidate in self.priced:
            return
        self.priced.add(candidate)
        trial = price_candidate(self.problem, candidate, checked=True)
        if trial.modelled is not None:  # simulated: charged its lowering once per search
            fresh = candidate.counts not in self.lowered
            self.lowered.add(candidate.counts)
            self.work += len(trial.modelled.graph.tasks) * (1 + (LOWER_WEIGHT if fresh else 0))
        else:
            self.work += SYMBOLIC_WEIGHT
        self.evaluated += 1
        best = self.best
        if best is None or (trial.cost, trial.candidate) < (best.cost, best.candidate):
            self.best = trial

    def rank(self) -> None:
        """Price the candidates of lowest predicted cost (phase 1; skipped when the space
        is too large to tabulate: the seed is then the incumbent)."""
        problem = self.problem
        if table_size(problem) > TABLE_LIMIT:
            return
        p, c = candidate_table(problem)
        if not len(p):
            return
        predicted = prediction.predicted_costs(problem, p, c)
        order = np.lexsort((np.arange(len(p)), predicted))
        indices = problem.indices
        for row in order[:RANKED_MODELS]:
            if self.out_of_work():
                return
            self.price(Candidate(
                tuple(zip(indices, p[row].tolist(), strict=True)),
                tuple(zip(indices, c[row].tolist(), strict=True)),
            ))

    def branch_and_bound(self) -> bool:
        """Price every block-count vector whose bound does not exceed the best cost (phase
        2); True when z3 answered ``unsat`` (a proof)."""
        problem = self.problem
        enc = self.enc
        nodes = problem.nodes
        per_task = (
            price.RAY_TASK_SECONDS / (nodes * price.CORES_PER_NODE) + price.RAY_SUBMIT_SECONDS
        )
        compute = model_bound.compute_flops(problem) / (
            price.NODE_FLOPS_PER_CORE * nodes * price.CORES_PER_NODE
        )
        floors = self._network_floors()
        tasks = None
        bounded = None
        while True:
            if self.out_of_work():
                self._stopped("model work", f"{self.work} units of {WORK_BUDGET}")
                return False
            if self.best is not None and self.best.cost != bounded:
                bounded = self.best.cost
                allowed = (bounded * (1 + SLACK) - compute) / per_task
                if tasks is None:
                    tasks = enc.tasks(cap=max(allowed, 1.0))
                enc.solver.add(tasks <= allowed)
                enc.solver.add(*enc.stage_task_logs(allowed))
                for condition, network in floors:
                    tighter = allowed - network / price.NETWORK_BYTES_PER_SECOND / per_task
                    enc.solver.add(z3.Implies(condition, z3.And(enc.stage_task_logs(tighter))))
            verdict = self.check()
            if verdict == z3.unsat:
                return True
            if verdict == z3.unknown:
                self._stopped("z3", f"rlimit {self.rlimit_used} of {RLIMIT}, "
                              f"{self.checks} of {MAX_CHECKS} checks")
                return False
            found = enc.candidate(enc.solver.model())
            counts = dict(found.counts)
            enc.exclude_counts(counts)
            if not self._price_counts(counts):
                self._stopped("model work", f"{self.work} units of {WORK_BUDGET}")
                return False

    def by_grid(self) -> bool:
        """Phase 2 for spaces too large to tabulate (:data:`TABLE_LIMIT`): every grid, most
        promising first; a grid whose floor (:func:`prediction.cost_floors` at its fewest
        blocks) exceeds the best cost is passed over whole, and within a grid the block
        counts are enumerated index by index, dropping partial vectors whose fewest tasks
        already price them out, then priced lowest prediction first when their floor does
        not exceed the best cost. True when every grid was gone through (a proof: every
        legal candidate was priced or has a floor above the plan's cost)."""
        problem = self.problem
        indices = problem.indices
        limit = problem.memory_bytes // BLOCK_MEMORY_SHARE
        layouts, p, floors_of_grids = grid_floors(problem)
        if not layouts:
            return True
        order = np.lexsort((np.arange(len(p)), floors_of_grids))
        for row in order.tolist():
            grid, options = layouts[row]
            if floors_of_grids[row] > self._allowed():
                continue
            if self.out_of_work():
                self._stopped("model work", f"{self.work} units of {WORK_BUDGET}")
                return False
            counts = self._grid_counts(p[row], options, limit)
            if not len(counts):
                continue
            rows = np.tile(p[row], (len(counts), 1))
            floors = prediction.cost_floors(problem, rows, counts)
            keep = floors <= self._allowed()
            counts, floors = counts[keep], floors[keep]
            predicted = prediction.predicted_costs(problem, rows[: len(counts)], counts)
            for k in np.lexsort((np.arange(len(counts)), predicted)).tolist():
                if self.out_of_work():
                    self._stopped("model work", f"{self.work} units of {WORK_BUDGET}")
                    return False
                if floors[k] > self._allowed():
                    continue
                self.price(Candidate(grid, tuple(zip(indices, counts[k].tolist(), strict=True))))
        return True

    def _allowed(self) -> float:
        return math.inf if self.best is None else self.best.cost * (1 + SLACK)

    def _grid_counts(self, p: np.ndarray, options: list[list[int]], limit: int) -> np.ndarray:
        """The legal block counts for grid ``p`` (rows, in ``problem.indices`` order) whose
        task count alone does not price them above the best cost: built index by index,
        the indices not yet chosen at their fewest blocks (tasks only grow with counts)."""
        problem = self.problem
        nodes = problem.nodes
        per_task = (
            price.RAY_TASK_SECONDS / (nodes * price.CORES_PER_NODE) + price.RAY_SUBMIT_SECONDS
        )
        compute = model_bound.compute_flops(problem) / (
            price.NODE_FLOPS_PER_CORE * nodes * price.CORES_PER_NODE
        )
        allowed = (self._allowed() - compute) / per_task
        fewest = np.array([o[0] for o in options], dtype=np.int64)
        rows = fewest.reshape(1, -1)
        for column, values in enumerate(options):
            values = np.asarray(values, dtype=np.int64)
            rows = np.repeat(rows, len(values), axis=0)
            rows[:, column] = np.tile(values, len(rows) // len(values))
            rows = rows[prediction.task_totals(problem, rows) <= allowed]
            if not len(rows):
                return rows
        return rows[prediction.fits_memory(problem, rows, limit)]

    def _network_floors(self) -> list[tuple[z3.BoolRef, float]]:
        """What z3 may add to the bound, and when (:func:`model_bound.network_bound_bytes`):
        for each set ``K`` of :func:`model_bound.bound_subsets`, a condition implying that
        every array of ``K`` has at least ``P`` blocks (:meth:`_Encoding.at_least`) and the
        smallest bound from ``K`` over the legal candidates where they do."""
        problem = self.problem
        if model_bound.bounded_arrays(problem) is None or problem.nodes == 1:
            return []
        if table_size(problem) > TABLE_LIMIT:
            return []
        _, c = candidate_table(problem)
        spread = {}
        floors = []
        for kept in model_bound.bound_subsets(problem):
            rows = np.ones(len(c), dtype=bool)
            for dims in kept:
                if dims not in spread:
                    spread[dims] = model_bound.block_counts(problem, dims, c) >= problem.nodes
                rows &= spread[dims]
            if not rows.any():
                continue
            floor = float(model_bound.subset_bounds(problem, kept, c[rows]).min())
            if floor > 0:
                condition = z3.And([self.enc.at_least(dims, problem.nodes) for dims in kept])
                floors.append((condition, floor))
        return floors

    def _stopped(self, what: str, detail: str) -> None:
        self.notes.append(
            f"smt: {what} budget spent ({detail}) after {self.evaluated} model calls and "
            f"{self.checks} z3 checks; no proof that the plan is optimal"
        )

    def _price_counts(self, counts: dict[str, int]) -> bool:
        """Model every grid for ``counts`` unless the exact bound rules them out; False
        when the budget ran out before all were priced."""
        problem = self.problem
        best = self.best
        if best is not None and model_bound.cost_bound(problem, counts) > best.cost * (
            1 + SLACK
        ):
            return True
        if oversized_block(problem, counts) is not None:
            return True
        vector = tuple(sorted(counts.items()))
        group = [
            Candidate(grid, vector)
            for grid in problem.memo("grids", lambda: grids(problem))
            if all(self.enc.legal(i, p, counts[i]) for i, p in grid)
        ]
        if not group:
            return True
        p, c = candidate_arrays(problem, group)
        predicted = prediction.predicted_costs(problem, p, c).tolist()
        floors = prediction.cost_floors(problem, p, c).tolist()
        for _, floor, candidate in sorted(zip(predicted, floors, group, strict=True)):
            if self.out_of_work():
                return False
            if self.best is not None and floor > self.best.cost * (1 + SLACK):
                continue
            self.price(candidate)
        return True


def warm_up() -> None:
    """Make (and drop) one z3 context: the first of a process costs several times the next."""
    z3.Context()


def smt(problem: Problem, seed: Priced | None = None):
    """Ranked incumbents, then branch and bound over the legal candidates (module
    contract): by z3 over block counts, or grid by grid when the space is too large to
    tabulate."""
    search = _Search(problem, seed)
    search.rank()
    by_grid = symbolic_cost.closed_form(problem) or table_size(problem) > TABLE_LIMIT
    optimal = search.by_grid() if by_grid else search.branch_and_bound()
    if search.best is None:
        search.notes.append("smt: no legal candidate")
    return search.best, optimal, search.evaluated, search.notes
