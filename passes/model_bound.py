"""A valid lower bound of the shared model's cost for every candidate with given block counts.

Contract: ``cost_bound(problem, counts)`` never exceeds
``model(problem, candidate).report.cost`` for any legal candidate whose block counts are
``counts``, whatever its grid (a test holds it against every candidate of small problems).
Branch and bound (:mod:`tensorc.passes.smt_search`) prunes with it, so it is computed from
the counts alone, in closed form, without lowering the task graph.

The model's cost (:func:`tensorc.passes.cost.distributed_cost`) is the busiest receiver's
bytes over the network bandwidth, plus the busiest node's compute over its cores, plus the
driver's submission of every compute task, plus a spill penalty (at least 0). Each term is
bounded separately:

- *submission*: the number of compute tasks ``T(c)`` is exact (:func:`task_counts`): per
  stage one task per iteration block, plus one reduce per output block when the summed
  indices have several blocks;
- *compute*: the busiest node does at least the average (all flops at the BLAS rate plus
  one remote call per task, over ``P`` nodes), and at least ``⌈T_s / P⌉`` tasks of each
  stage ``s``, each at least its smallest block's flops;
- *network*: the communication lower bound of the contraction
  (:meth:`~tensorc.passes.distribution.Problem.lower_bound_bytes`), which assumes every
  array starts spread evenly — so 0 when operands already sit on the cluster in a layout of
  their own (one node may hold all of one).

A block-granular network bound (the same convex program in block units, so coarse
blockings pay for their coarseness) was tried and dropped: the busiest node may own whole
coarse blocks, which leaves it almost nothing, and each solve cost more than a model call.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from tensorc.passes import cost as price
from tensorc.passes.cost import flops_per_element


@dataclass(frozen=True)
class StageShape:
    """What the bound needs of one stage: its iteration indices, output indices, the
    index tuples of its load operands (with their operand position, or -1 for an
    intermediate) and its flops per element."""

    dims: tuple[str, ...]
    output: tuple[str, ...]
    loads: tuple[tuple[str, ...], ...]
    flops_per_element: int


def stage_shapes(problem) -> list[StageShape]:
    """The stages of ``problem`` as :class:`StageShape` (children first)."""
    return problem.memo("stage_shapes", lambda: _stage_shapes(problem))


def _stage_shapes(problem) -> list[StageShape]:
    shapes = []
    for arrays, output in problem.stage_arrays():
        dims = tuple(sorted({i for a in arrays for i in a.dims} | set(output.dims)))
        loads = tuple(tuple(dict.fromkeys(a.dims)) for a in arrays if a.name != "tmp")
        per_element = flops_per_element([a.dims for a in arrays], output.dims)
        shapes.append(StageShape(dims, tuple(dict.fromkeys(output.dims)), loads, per_element))
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
        compute_flops(problem) / price.BLAS_FLOPS_PER_CORE + tasks * price.RAY_TASK_SECONDS
    ) / nodes
    busiest = average
    for shape, (iteration, reduces) in zip(stage_shapes(problem), per_stage, strict=True):
        smallest = math.prod(small[i] for i in shape.dims) * shape.flops_per_element
        busiest = max(
            busiest,
            math.ceil(iteration / nodes)
            * (smallest / price.BLAS_FLOPS_PER_CORE + price.RAY_TASK_SECONDS),
            math.ceil(reduces / nodes) * price.RAY_TASK_SECONDS,
        )
    return busiest / price.CORES_PER_NODE


def network_bound_bytes(problem) -> int:
    """Bytes the busiest receiver gets at least (module contract)."""
    return 0 if problem.placed else problem.lower_bound_bytes()


def cost_bound(problem, counts: Mapping[str, int]) -> float:
    """A lower bound of the model's cost of every candidate with ``counts`` (module
    contract)."""
    tasks = sum(t + r for t, r in task_counts(problem, counts))
    return (
        network_bound_bytes(problem) / price.NETWORK_BYTES_PER_SECOND
        + compute_bound(problem, counts)
        + tasks * price.RAY_SUBMIT_SECONDS
    )
