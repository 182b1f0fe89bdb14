"""A valid lower bound of the shared model's cost for every candidate with given block counts.

Contract: ``cost_bound(problem, counts)`` never exceeds
``model(problem, candidate).report.cost`` for any legal candidate whose block counts are
``counts``, whatever its grid. ``tests/test_model_bound.py`` holds it against every
candidate of small problems (degenerate ones included); a random search over some ten
thousand small contractions (2–4 indices, extents 1–64, 2–16 nodes) found no candidate
below it.
Branch and bound (:mod:`tensorc.planning.smt_search`) prunes with it, so it is computed from
the counts alone, in closed form, without lowering the task graph.

The model's cost (:func:`tensorc.planning.cost.distributed_cost`) is the busiest receiver's
bytes over the network bandwidth, plus the busiest node's compute over its cores, plus the
driver's submission of every compute task, plus a spill penalty (at least 0). Each term is
bounded separately:

- *submission*: the number of compute tasks ``T(c)`` is exact (:func:`task_counts`): per
  stage one task per iteration block, plus one reduce per output block when the summed
  indices have several blocks;
- *compute*: the busiest node does at least the average (all flops at the BLAS rate plus
  one remote call per task, over ``P`` nodes), and at least ``⌈T_s / P⌉`` tasks of each
  stage ``s``, each at least its smallest block's flops;
- *network*: the argument of the communication lower bound
  (:mod:`tensorc.planning.lower_bound`), made to hold for every candidate with the counts:
  per stage, some node runs at least ``1/P`` of the stage's iteration space, so it touches
  at least the box minimum of the arrays' elements; it can own at most ``⌈m_A / P⌉`` of
  an array's largest blocks (the grid layout deals an array of ``m_A`` blocks out evenly);
  the rest it must receive. Only arrays with at least ``P`` blocks are counted (with fewer,
  one node may own a whole array and do all the work on it), only the user's arrays and
  the final output (a node may produce an intermediate it needs), and nothing when
  operands already sit on the cluster in a layout of their own. The largest over the
  stages and the sets of arrays of :func:`bound_subsets`. (The plain lower bound, without
  these guards, is not a bound of the model: a random search over small contractions
  finds coarse plans below it.)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tensorc.ir.contraction import flops_per_element
from tensorc.planning import cost as price
from tensorc.planning.lower_bound import min_accessed_elements

ROUNDING = 1e-9  # relative shading of the bound against float rounding


@dataclass(frozen=True)
class StageShape:
    """What the bound needs of one stage: its iteration indices (sorted), its output
    indices and its flops per element."""

    dims: tuple[str, ...]
    output: tuple[str, ...]
    flops_per_element: int


def stage_shapes(problem) -> list[StageShape]:
    """The stages of ``problem`` as :class:`StageShape` (children first)."""
    return problem.memo("stage_shapes", lambda: _stage_shapes(problem))


def _stage_shapes(problem) -> list[StageShape]:
    shapes = []
    for arrays, output in problem.stage_arrays():
        dims = tuple(sorted({i for a in arrays for i in a.dims} | set(output.dims)))
        per_element = flops_per_element([a.dims for a in arrays], output.dims)
        shapes.append(StageShape(dims, tuple(dict.fromkeys(output.dims)), per_element))
    return shapes


def extents(size: int, count: int) -> tuple[int, int]:
    """Smallest and largest block extent when ``size`` is cut into ``count`` blocks of
    ``ceil(size / count)`` (the last one ragged)."""
    step = max(1, math.ceil(size / count)) if size else 1
    last = size - (count - 1) * step if size else 1
    return max(1, min(step, last)), step


def task_counts(problem, counts: Mapping[str, int]) -> list[tuple[int, int]]:
    """Per stage: ``(iteration tasks, reduce tasks)`` of the lowered graph."""
    out = []
    for shape in stage_shapes(problem):
        tasks = math.prod(counts[i] for i in shape.dims)
        summed = [i for i in shape.dims if i not in shape.output]
        reduces = math.prod(counts[i] for i in shape.output) if math.prod(
            counts[i] for i in summed) > 1 else 0
        out.append((tasks, reduces))
    return out


def compute_flops(problem) -> int:
    """Flops of the iteration tasks of every stage (independent of the blocking)."""
    sizes = problem.sizes
    return problem.memo("compute_flops", lambda: sum(
        math.prod(sizes[i] for i in shape.dims) * shape.flops_per_element
        for shape in stage_shapes(problem)
    ))


def compute_bound(problem, counts: Mapping[str, int]) -> float:
    """Seconds the busiest node computes at least (module contract)."""
    nodes = problem.nodes
    sizes = problem.sizes
    small = {i: extents(sizes[i], counts[i])[0] for i in sizes}
    per_stage = task_counts(problem, counts)
    tasks = sum(t + r for t, r in per_stage)
    average = (
        compute_flops(problem) / price.NODE_FLOPS_PER_CORE + tasks * price.RAY_TASK_SECONDS
    ) / nodes
    busiest = average
    for shape, (iteration, reduces) in zip(stage_shapes(problem), per_stage, strict=True):
        smallest = math.prod(small[i] for i in shape.dims) * shape.flops_per_element
        busiest = max(
            busiest,
            math.ceil(iteration / nodes)
            * (smallest / price.NODE_FLOPS_PER_CORE + price.RAY_TASK_SECONDS),
            math.ceil(reduces / nodes) * price.RAY_TASK_SECONDS,
        )
    return busiest / price.CORES_PER_NODE


def bounded_arrays(problem) -> list[list[tuple[tuple[str, ...], bool]]] | None:
    """Per stage, the arrays the network bound may speak for — the user's arrays it reads
    and, for the last stage, the final output — each as ``(indices, is the output)``; None
    when operands already sit on the cluster in a layout of their own (one node may own
    all of one). Intermediates are left out: a node may produce what it needs."""
    if problem.placed:
        return None
    stages = problem.stage_arrays()
    out = []
    for position, (inputs, output) in enumerate(stages):
        arrays = [(tuple(sorted(set(a.dims))), False) for a in inputs if a.name != "tmp"]
        if position == len(stages) - 1:
            arrays.append((tuple(sorted(set(output.dims))), True))
        out.append(arrays)
    return out


def bound_subsets(problem) -> list[tuple[tuple[str, ...], ...]]:
    """The sets of arrays the network bound is taken over, per stage: all its countable
    arrays, and all but one of them (so one coarse array does not void the bound); a
    single array bounds nothing (a node doing ``1/P`` of it touches ``|A| / P``, which it
    may own)."""
    def subsets() -> list[tuple[tuple[str, ...], ...]]:
        stages = bounded_arrays(problem) or []
        out: list[tuple[tuple[str, ...], ...]] = []
        for arrays in stages:
            dims = sorted({d for d, _ in arrays})
            for size in (len(dims), len(dims) - 1):
                if size >= 2:
                    out.extend(k for k in itertools.combinations(dims, size) if k not in out)
        return out

    return problem.memo("bound_subsets", subsets)


def network_bound_bytes(problem, counts: Mapping[str, int]) -> int:
    """Bytes the busiest receiver gets at least (module contract): the best of
    :func:`bound_subsets` whose arrays all have at least ``P`` blocks."""
    if bounded_arrays(problem) is None or problem.nodes == 1:
        return 0
    nodes = problem.nodes
    sizes = problem.sizes
    best = 0
    for kept in bound_subsets(problem):
        owned = 0
        for dims in kept:
            blocks = math.prod(counts[i] for i in dims)
            if blocks < nodes:
                break
            block = math.prod(math.ceil(sizes[i] / counts[i]) for i in dims)
            owned += math.ceil(blocks / nodes) * block
        else:
            words = _touched(problem, kept) - owned
            best = max(best, math.floor(words * problem.itemsize * (1 - 1e-9)))
    return best


def block_counts(problem, dims, c: np.ndarray) -> np.ndarray:
    """Blocks of an array with indices ``dims``, per row of ``c``."""
    column = {name: k for k, name in enumerate(problem.indices)}
    columns = [column[i] for i in dims]
    if not columns:
        return np.ones(len(c), dtype=np.float64)
    return np.prod(c[:, columns].astype(np.float64), axis=1)


def subset_bounds(problem, kept: tuple[tuple[str, ...], ...], c: np.ndarray) -> np.ndarray:
    """The network bound from the arrays ``kept`` of one stage (bytes, per row of ``c``),
    valid for rows where each of them has at least ``P`` blocks: the elements a node doing
    ``1/P`` of their iteration space touches, minus the most it can own of them (the
    vectorised term of :func:`network_bound_bytes`)."""
    column = {name: k for k, name in enumerate(problem.indices)}
    sizes = np.array([problem.sizes[i] for i in problem.indices], dtype=np.float64)
    largest = np.ceil(sizes / c)
    owned = np.zeros(len(c), dtype=np.float64)
    for dims in kept:
        block = np.prod(largest[:, [column[i] for i in dims]], axis=1) if dims else 1.0
        owned += np.ceil(block_counts(problem, dims, c) / problem.nodes) * block
    touched = _touched(problem, kept)
    return np.maximum(0.0, np.floor((touched - owned) * problem.itemsize * (1 - 1e-9)))


def _touched(problem, arrays: tuple[tuple[str, ...], ...]) -> float:
    """Elements of ``arrays`` a node doing ``1/P`` of their iteration space touches at
    least (memoised per problem and set of arrays)."""
    key = ("touched", arrays)
    return problem.memo(
        key, lambda: min_accessed_elements(arrays, problem.sizes, problem.nodes)
    )


def cost_bound(problem, counts: Mapping[str, int]) -> float:
    """A lower bound of the model's cost of every candidate with ``counts`` (module
    contract), shaded by :data:`ROUNDING` so float rounding never lifts it above."""
    tasks = sum(t + r for t, r in task_counts(problem, counts))
    value = (
        network_bound_bytes(problem, counts) / price.NETWORK_BYTES_PER_SECOND
        + compute_bound(problem, counts)
        + tasks * price.RAY_SUBMIT_SECONDS
    )
    return value * (1 - ROUNDING)
