"""Closed-form predictions for many candidates at once (numpy, no lowering, no simulation).

Contract: every function takes the candidates as two integer arrays of shape
``(candidates, indices)`` — grid sizes ``p`` and block counts ``c``, columns in
``problem.indices`` order — and returns one value per candidate:

- :func:`estimates`: elements the busiest node receives if every stage ran on its grid box
  (the formula is :func:`tensorc.planning.distribution.estimate`'s docstring; that function
  is this one on a single row);
- :func:`task_totals`: the exact number of compute tasks of the lowered graph (one per
  iteration block of every stage, plus one reduce per output block when the stage's summed
  indices have several blocks);
- :func:`predicted_costs`: the model's cost predicted from those two (the estimate over
  the network, the average node's compute, the driver's submissions);
- :func:`fits_memory`: whether every array's largest block keeps the memory rule;
- :func:`cost_floors`: a lower bound of the closed-form model's cost
  (:mod:`tensorc.planning.symbolic_cost`) per candidate, so a search can drop candidates
  before pricing them: the driver's submission of every task exactly, the average node's
  compute, and the network from :func:`busiest_floors` (bytes the busiest node receives
  at least). Candidates outside the closed form's domain get the first two terms only.

The searches rank candidates by the prediction before paying for the model
(:func:`tensorc.planning.distribution.model`); the model, not the prediction, decides.
"""

from __future__ import annotations

import functools

import numpy as np

from tensorc.codegen.reduce_scatter import cut_plan, round_tasks
from tensorc.planning import cost as price
from tensorc.planning import model_bound, symbolic_cost
from tensorc.planning.reduce_scatter import group_radices, output_lengths


def _columns(problem, dims) -> list[int]:
    """The positions in ``problem.indices`` of the index names ``dims``, ascending by name."""
    return list(_positions(tuple(problem.indices), frozenset(dims)))


@functools.lru_cache(maxsize=4096)
def _positions(indices: tuple[str, ...], dims: frozenset) -> tuple[int, ...]:
    order = {name: k for k, name in enumerate(indices)}
    return tuple(order[i] for i in sorted(dims))


def _product(values: np.ndarray, columns: list[int]) -> np.ndarray:
    """Per row of ``values``, the product of its ``columns`` (floats; ones when none). A
    column at a time: the candidate batches are small, so numpy's reduction set-up would
    cost more than the arithmetic."""
    if not columns:
        return np.ones(len(values), dtype=np.float64)
    out = values[:, columns[0]].astype(np.float64)
    for column in columns[1:]:
        out *= values[:, column]
    return out


def spanned(p: np.ndarray) -> np.ndarray:
    """The nodes each candidate's grid spans (``∏ p_i``; the problem's other nodes idle)."""
    return _product(p, list(range(p.shape[1])))


def estimates(problem, p: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Estimated elements the busiest node receives, per candidate (module contract)."""
    nodes = spanned(p)
    per_cell = c // p
    total = np.zeros(len(p), dtype=np.float64)
    for arrays, output in problem.stage_arrays():
        iteration = {i for a in arrays for i in a.dims} | set(output.dims)
        for array in arrays:
            if set(array.dims) == iteration:
                continue  # laid out as the stage's tasks are: each task's block is local
            columns = _columns(problem, array.dims)
            across = _product(p, columns)
            spread = _product(per_cell, columns) * across >= nodes
            owned = np.where(spread, array.elements / nodes, 0.0)
            total += np.maximum(0.0, array.elements / across - owned)
        summed = {i for a in arrays for i in a.dims} - set(output.dims)
        if not summed:
            continue
        reducers = _product(p, _columns(problem, summed))
        columns = _columns(problem, output.dims)
        across = _product(p, columns)
        least = np.maximum(np.minimum(_product(per_cell, columns), reducers), 1)
        total += np.where(
            reducers > 1, (reducers - 1) * output.elements / (across * least), 0.0
        )
    return total


def task_totals(problem, c: np.ndarray) -> np.ndarray:
    """Compute tasks of each candidate's task graph (module contract)."""
    total = np.zeros(len(c), dtype=np.float64)
    for arrays, output in problem.stage_arrays():
        dims = {i for a in arrays for i in a.dims} | set(output.dims)
        total += _product(c, _columns(problem, dims))
        summed = dims - set(output.dims)
        if summed:
            several = _product(c, _columns(problem, summed)) > 1
            total += np.where(several, _product(c, _columns(problem, output.dims)), 0.0)
    return total




def scatter_tasks(problem, p: np.ndarray, c: np.ndarray,
                  scattered: np.ndarray | None = None) -> np.ndarray:
    """The tasks a candidate's reduce-scatter adds to :func:`task_totals` (0 where its last
    stage folds plainly): per output block and node of the group, a fold of its own partials
    when it made several and ``q + 1`` tasks a round, less the one plain fold
    (``scattered``: :func:`scattered_last` of these candidates, when already known)."""
    shape = symbolic_cost.structure(problem)
    if scattered is None:
        scattered = scattered_last(problem, p, c)
    if not scattered.any():
        return np.zeros(len(p), dtype=np.float64)
    stage = shape.stages[-1]
    summed = _columns(problem, set(stage.dims) - set(stage.output))
    group = _product(p, summed).astype(np.int64)
    rounds = np.array([round_tasks(group_radices(int(g))) if g > 1 else 0
                       for g in group.tolist()], dtype=np.float64)
    own = _product(c, summed) / np.maximum(group, 1)
    per_member = (own > 1) + rounds
    blocks = _product(c, _columns(problem, stage.output))
    return np.where(scattered, blocks * (group * per_member - 1), 0.0)


def predicted_costs(problem, p: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The model's cost predicted in closed form, per candidate (module contract)."""
    nodes = spanned(p)
    tasks = task_totals(problem, c) + scatter_tasks(problem, p, c)
    received = estimates(problem, p, c) * problem.itemsize
    network = received / price.NETWORK_BYTES_PER_SECOND
    bound = problem.lower_bound_bytes()
    if bound > 0:
        over = np.maximum(0.0, received - price.COMMUNICATION_SLACK * bound)
        network = network + price.OVER_BUDGET_PENALTY * over / price.NETWORK_BYTES_PER_SECOND
    compute = (
        model_bound.compute_flops(problem) / price.NODE_FLOPS_PER_CORE
        + tasks * price.RAY_TASK_SECONDS
    ) / (nodes * price.CORES_PER_NODE)
    return network + compute + tasks * price.RAY_SUBMIT_SECONDS


def fits_memory(problem, c: np.ndarray, limit_bytes: int) -> np.ndarray:
    """Whether every array's largest block is at most ``limit_bytes`` (module contract)."""
    sizes = np.array([problem.sizes[i] for i in problem.indices], dtype=np.float64)
    largest = np.ceil(sizes / c)
    ok = np.ones(len(c), dtype=bool)
    for arrays, output in problem.stage_arrays():
        for array in [*arrays, output]:
            block = _product(largest, _columns(problem, array.dims)) * problem.itemsize
            ok &= block <= limit_bytes
    return ok


def busiest_floors(problem, p: np.ndarray, c: np.ndarray, average: bool = False,
                   total_only: bool = False, scattered: np.ndarray | None = None
                   ) -> np.ndarray:
    """Bytes the busiest node receives at least, per candidate (rows of ``p`` and ``c``
    in the closed form's domain; module contract): the larger of

    - the average over the nodes the grid spans: every block of an input is needed on each
      of the ``∏ p_i`` nodes along the stage's indices it lacks — times the nodes its
      readers reach along the split indices a stage lacks, where its tasks spread
      (``reached``) — and held by at most one of them; every output block's partial sums
      are made on the ``∏ p_s`` nodes along its summed indices times the nodes they reach
      there (its *makers*), and all but one send theirs to the folding node;
    - an input's share plus a reducer's share, both received by the node that folds most:
      - an input's share, for stages that split no index they lack (every node runs some
        of their tasks): a node needs every block of the input in its residue class (``∏
        c_i / p_i`` blocks, at least the elements of the class with the last, smaller
        blocks) and holds at most ``⌈blocks per class / nodes sharing the class⌉`` of
        them;
      - a reducer's share: some node folds at least ``⌈blocks / nodes⌉`` output blocks,
        each receiving a partial block from all makers but one; and the partials'
        elements, one fewer than the makers per output element, land on at most
        ``min(blocks, nodes)`` folding nodes.

    ``average=True`` gives the first alone without what the spread reaches (one node along
    the indices a stage lacks): that depends on the grid only, so it bounds every count
    vector of the grid at once; ``total_only=True`` the bytes all nodes receive together at
    least.
    """
    shape = symbolic_cost.structure(problem)
    nodes = spanned(p)
    sizes = np.array([problem.sizes[i] for i in problem.indices], dtype=np.float64)
    step = np.ceil(sizes / c)
    smallest = np.minimum(step, sizes - (c - 1) * step)
    m = (c // np.maximum(p, 1)).astype(np.float64)
    # the fewest elements a node's residue class has along each index: all of it on an
    # unsplit index, else m - 1 whole blocks and the last (the class at the last residue)
    least_class = np.where(p > 1, (m - 1) * step + (sizes - (c - 1) * step), sizes)
    total = np.zeros(len(p), dtype=np.float64)
    top = np.zeros(len(p), dtype=np.float64)
    everywhere = np.zeros(len(p), dtype=np.float64)
    problem_sizes = problem.sizes
    for stage in shape.stages:
        outside = _columns(problem, set(problem.indices) - set(stage.dims))
        spread_over = _product(p, outside)
        covered = spread_over == 1
        # a cell's tasks (their within-cell ranks) spread over the nodes along the indices
        # the stage lacks, at most ceil(points / spread_over) tasks on one of them
        per_offset = np.maximum(
            np.ceil(_product(m, _columns(problem, stage.dims)) / spread_over), 1.0)
        # a task's node along those indices is its within-cell rank (row-major over the
        # stage's indices, sorted) modulo their node count; an index's digit weighs the
        # product of the counts after it
        ranks = np.maximum(m, 1).astype(np.int64)
        spread_nodes = spread_over.astype(np.int64)
        weight = {}
        running = np.ones(len(p), dtype=np.int64)
        for index in sorted(set(stage.dims), reverse=True):
            weight[index] = running
            running = running * ranks[:, _columns(problem, [index])[0]]

        def reached(fixed, stage=stage, per_offset=per_offset, spread_nodes=spread_nodes,
                    weight=weight, ranks=ranks):
            """The nodes along the indices the stage lacks that a cell's tasks with the
            same coordinates along ``fixed`` reach, at least: ceil(tasks / per_offset),
            and one free digit alone, stepping by its weight, min(m, P_O / gcd)."""
            if average:  # grid-wide: the counts are not known, one node at least
                return np.ones(len(p), dtype=np.float64)
            free = set(stage.dims) - set(fixed)
            offsets = np.maximum(1.0, np.ceil(_product(m, _columns(problem, free)) / per_offset))
            for index in free:
                reach = spread_nodes // np.gcd(weight[index], spread_nodes)
                column = _columns(problem, [index])[0]
                offsets = np.maximum(offsets, np.minimum(ranks[:, column], reach))
            return offsets

        for value in dict.fromkeys(stage.inputs):
            dims = shape.values[value].dims
            columns = _columns(problem, dims)
            lacking = _columns(problem, set(stage.dims) - set(dims))
            # a block is read by the cell's tasks along the indices it lacks, on the nodes
            # they reach, in every cell along them
            total += _elements(dims, problem_sizes) * (_product(p, lacking) * reached(dims) - 1)
            per_class = _product(m, columns)
            sharing = _product(p, _columns(problem, set(problem.indices) - set(dims)))
            share = (_product(least_class, columns)
                     - np.ceil(per_class / sharing) * _product(step, columns))
            everywhere += np.where(covered, np.maximum(share, 0.0), 0.0)
        summed = _columns(problem, set(stage.dims) - set(stage.output))
        # an output block's partials are made in every cell along the summed indices, on
        # the nodes its tasks reach there; all but the folding node send one (a reduction
        # exists only with several blocks along the summed indices: else m_s = 1 and p_s = 1)
        makers = np.where(_product(c, summed) > 1,
                          _product(p, summed) * reached(stage.output), 1.0)
        total += _elements(stage.output, problem_sizes) * (makers - 1)
        if average or total_only:  # only the average is asked for
            continue
        out = _columns(problem, stage.output)
        blocks = _product(c, out)
        # some node folds ceil(blocks / nodes) blocks; and the partials' elements, one
        # fewer than their makers per output element, land on at most min(blocks, nodes)
        plain = np.maximum(
            np.ceil(blocks / nodes) * (makers - 1) * _product(smallest, out),
            np.ceil((makers - 1) * _elements(stage.output, problem_sizes)
                    / np.minimum(blocks, nodes)))
        if stage is not shape.stages[-1]:
            top = np.maximum(top, plain)
            continue
        if scattered is None:
            scattered = scattered_last(problem, p, c)
        # the last stage ended as a reduce-scatter: a group's nodes receive (g - 1)/g of
        # their cell's blocks together (whatever the pieces' lengths), and a cell without
        # the last, smaller blocks holds m_o full blocks along each split output index
        largest_cell = np.ones(len(p), dtype=np.float64)
        for column in out:
            size = float(problem_sizes[problem.indices[column]])
            largest_cell *= np.where(p[:, column] > 1, m[:, column] * step[:, column], size)
        top = np.maximum(top, np.where(
            scattered, np.ceil(largest_cell * (makers - 1) / np.maximum(makers, 1)), plain))
    if total_only:
        return total * problem.itemsize
    floor = np.ceil(total / nodes)
    if not average:
        floor = np.maximum(floor, top + everywhere)
    return floor * problem.itemsize


def scattered_last(problem, p: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Per candidate (in the closed form's domain), whether its last stage ends as a
    reduce-scatter: :func:`tensorc.planning.reduce_scatter.scatter_for`'s rule (the grid
    splits only the stage's indices, the nodes along its summed indices outnumber the
    output blocks of a grid cell, and the output indices are long enough for the pieces)."""
    shape = symbolic_cost.structure(problem)
    if not shape.stages or shape.stages[-1].value != shape.final:
        return np.zeros(len(p), dtype=bool)
    stage = shape.stages[-1]
    summed = _columns(problem, set(stage.dims) - set(stage.output))
    group = _product(p, summed)
    cell_blocks = _product(c // np.maximum(p, 1), _columns(problem, stage.output))
    inside = _product(p, _columns(problem, set(problem.indices) - set(stage.dims))) == 1
    maybe = (group >= 2) & (cell_blocks < group) & inside
    for k in np.flatnonzero(maybe).tolist():
        counts = dict(zip(problem.indices, c[k].tolist(), strict=True))
        lengths = output_lengths(problem.sizes, counts, stage.output, problem.placed_blocks)
        maybe[k] = cut_plan(group_radices(int(group[k])), lengths) is not None
    return maybe


def _elements(dims, sizes) -> float:
    return float(np.prod([float(sizes[i]) for i in set(dims)]))


def cost_floors(problem, p: np.ndarray, c: np.ndarray, network: bool = True,
                grid_wide: bool = False) -> np.ndarray:
    """A lower bound of the closed-form model's cost per candidate (module contract);
    ``grid_wide=True`` takes only the average node's bytes for the network (a floor of
    every candidate of the grid whose counts are at least ``c``); ``network=False``
    leaves the network term out (a floor in or out of the closed form's domain)."""
    nodes = spanned(p)
    tasks = task_totals(problem, c)
    inside = np.all(c % p == 0, axis=1)
    scattered = None
    if (not grid_wide and symbolic_cost.structure(problem).unsupported is None
            and not problem.placed):
        # a reduce-scatter's rounds (not grid-wide: more output blocks can end it)
        scattered = scattered_last(problem, p, c) & inside
        tasks = tasks + scatter_tasks(problem, p, c, scattered)
    compute = (
        model_bound.compute_flops(problem) / price.NODE_FLOPS_PER_CORE
        + tasks * price.RAY_TASK_SECONDS
    ) / (nodes * price.CORES_PER_NODE)
    floor = compute + tasks * price.RAY_SUBMIT_SECONDS
    if network and symbolic_cost.structure(problem).unsupported is None and not (
        problem.placed and set(problem.placed) - set(problem.repartition)
    ):
        received = busiest_floors(problem, p, c, average=grid_wide, scattered=scattered)
        network = received / price.NETWORK_BYTES_PER_SECOND
        bound = problem.lower_bound_bytes()
        if bound > 0:
            over = np.maximum(0.0, received - price.COMMUNICATION_SLACK * bound)
            network = network + price.OVER_BUDGET_PENALTY * over / price.NETWORK_BYTES_PER_SECOND
        floor = floor + np.where(inside, network + _spill_floors(problem, p, c, grid_wide),
                                 0.0)
    return floor * (1 - model_bound.ROUNDING)


def _spill_floors(problem, p: np.ndarray, c: np.ndarray, average: bool = False
                  ) -> np.ndarray:
    """The closed form's memory charge at least: every node's memory is what it ever holds
    (its inputs, what it receives, what it makes), so together the nodes hold at least the
    inputs, the bytes received and every partial block made, and the charge is at least
    their excess over all the nodes' budgets together."""
    shape = symbolic_cost.structure(problem)
    sizes = problem.sizes
    held = np.zeros(len(c), dtype=np.float64)
    for value in shape.values:
        if value.position is not None:
            held += _elements(value.dims, sizes)
    for stage in shape.stages:
        summed = _columns(problem, set(stage.dims) - set(stage.output))
        held += _elements(stage.output, sizes) * _product(c, summed)
    held = held * problem.itemsize + busiest_floors(problem, p, c, average=average,
                                                     total_only=True)
    over = np.maximum(0.0, held - spanned(p) * problem.memory_bytes)
    return price.SPILL_PENALTY * over / price.NETWORK_BYTES_PER_SECOND
