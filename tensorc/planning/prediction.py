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
- :func:`fits_memory`: whether every array's largest block keeps the memory rule.

The searches rank candidates by the prediction before paying for the model
(:func:`tensorc.planning.distribution.model`); the model, not the prediction, decides.
"""

from __future__ import annotations

import numpy as np

from tensorc.planning import cost as price
from tensorc.planning import model_bound


def _columns(problem, dims) -> list[int]:
    order = {name: k for k, name in enumerate(problem.indices)}
    return [order[i] for i in sorted(set(dims))]


def _product(values: np.ndarray, columns: list[int]) -> np.ndarray:
    if not columns:
        return np.ones(len(values), dtype=np.float64)
    return np.prod(values[:, columns].astype(np.float64), axis=1)


def estimates(problem, p: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Estimated elements the busiest node receives, per candidate (module contract)."""
    nodes = problem.nodes
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




def predicted_costs(problem, p: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The model's cost predicted in closed form, per candidate (module contract)."""
    nodes = problem.nodes
    tasks = task_totals(problem, c)
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
