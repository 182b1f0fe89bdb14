"""The modelled wall time of a whole IR subtree under a blocking — the one number both the
contraction-path pass (fused versus pairwise) and the partition step (how many blocks)
minimise.

For every stage (see :mod:`tensorc.ir.stages`) under the root: one task per tuple of block
coordinates over the stage's indices, each costing its in-block contraction path's compute
and memory traffic (:mod:`tensorc.planning.cost`); compute spreads over the workers, memory
traffic does not; partial blocks of one output block add a reduction's traffic; every task
adds the dispatch cost.
"""

from __future__ import annotations

import math

from tensorc.ir.contraction import path_steps, volume
from tensorc.ir.keys import key_of
from tensorc.ir.nodes import Node, is_product_of_args
from tensorc.ir.stages import stage_join, stage_parts, stage_roots
from tensorc.planning.cost import (
    MEMORY_BYTES_PER_SECOND,
    Work,
    parallel_seconds,
    step_work,
)
from tensorc.planning.paths import stage_path


def block_extents(sizes: dict[str, int], counts: dict[str, int]) -> dict[str, int]:
    """The (largest) block size of every index when it is split into ``counts`` blocks."""
    return {n: max(1, math.ceil(s / counts.get(n, 1))) for n, s in sizes.items()}


def stage_seconds(
    keys: list[tuple[str, ...]],
    output: tuple[str, ...],
    path: list[tuple[int, ...]] | None,
    sizes: dict[str, int],
    counts: dict[str, int],
    itemsize: int,
    workers: int,
) -> float:
    """Modelled seconds of one stage: ``keys`` joined, reduced to ``output`` along ``path``."""
    blocks = block_extents(sizes, counts)
    union = {n for k in keys for n in k}
    tuples = math.prod(counts.get(n, 1) for n in union)
    if path is None or len(keys) == 1:
        work = step_work(keys, output, blocks, itemsize)
    else:
        work = Work()
        for step_inputs, step_output in path_steps(keys, output, path, blocks):
            work = work + step_work(step_inputs, step_output, blocks, itemsize)
    work = work.times(tuples)
    partials = math.prod(counts.get(n, 1) for n in union - set(output))
    reduce_tasks = 0
    if partials > 1:
        reduce_tasks = math.prod(counts.get(n, 1) for n in output)
        moved = partials * volume(output, sizes) * itemsize
        work = work + Work(memory=moved / MEMORY_BYTES_PER_SECOND)
    return parallel_seconds(work, tuples + reduce_tasks, workers)


def subtree_seconds(
    root: Node,
    sizes: dict[str, int],
    counts: dict[str, int],
    itemsize: int,
    workers: int,
    optimize: object = "auto",
) -> float:
    """Modelled seconds of every stage under ``root`` with ``counts`` blocks per index;
    product joins run the paths they carry (``Join.path``)."""
    total = 0.0
    for node in stage_roots(root):
        inputs, fn, output, monoid = stage_parts(node)
        keys = [key_of(child) for child in inputs]
        path = None
        if len(keys) > 1 and is_product_of_args(fn, len(keys)) and monoid in ("+", None):
            join = stage_join(node)
            path = stage_path(join, keys, output, sizes, itemsize, optimize)
        total += stage_seconds(keys, output, path, sizes, counts, itemsize, workers)
    return total
