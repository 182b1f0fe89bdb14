"""partition (local): choose a block size per index.

Operands that share an index share its blocking, so a blocking is one block size per index
name. The caller may force it through plan options:

- ``grid={index: number_of_blocks}`` or ``block_shape={index: block_size}`` keyed by index
  name (an einsum letter), or
- a per-operand sequence, ``grid=[(4, 4, 4), (4, 1), (4, 1)]`` — one tuple per operand, one
  entry per dimension — which must agree wherever operands share an index.

Otherwise the heuristic splits only the outermost dimension (in memory) of the largest
operand, so every block of it is a zero-copy contiguous view, into 1, ``workers`` or
``2 × workers`` blocks — whichever :mod:`tensorc.planning.plan_cost` models fastest (operands
under 8 MiB stay one block). Compute-bound plans (BLAS) split across the cores; plans bound
by memory bandwidth (a reduction pushed into a large operand) stay one block, because the
cores share one memory bus and splitting only adds dispatch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from tensorc.codegen.blocking import Blocking
from tensorc.errors import PlanError
from tensorc.ir.nodes import Function, Scan, post_order
from tensorc.passes.base import PassContext
from tensorc.planning.plan_cost import subtree_seconds

MIB = 1 << 20
SPLIT_BYTES = 8 * MIB




def scan_indices(program: Function) -> dict[str, tuple[str, ...]]:
    """Each input tensor's index letters as the program scans it."""
    return {n.tensor: n.indices for n in post_order(program.output) if isinstance(n, Scan)}


def _from_per_operand(
    program: Function, option: Sequence[Sequence[int]], what: str
) -> dict[str, int]:
    scans = scan_indices(program)
    names = [decl.name for decl in program.inputs]
    if len(option) != len(names):
        raise PlanError(
            f"{what} gives {len(option)} tuple(s) but the contraction has {len(names)} operand(s)"
        )
    chosen: dict[str, int] = {}
    for position, (name, entry) in enumerate(zip(names, option, strict=True)):
        indices = scans.get(name, ())
        if not isinstance(entry, Sequence) or isinstance(entry, str):
            raise PlanError(
                f"{what}[{position}] must be a tuple with one entry per index of operand "
                f"{position} ({''.join(indices) or 'a scalar'}), got {entry!r}; or give "
                f"{what} as a dict {{index: int}}"
            )
        if len(entry) != len(indices):
            raise PlanError(
                f"{what}[{position}] has {len(entry)} entries for an operand of rank {len(indices)}"
            )
        for index, value in zip(indices, entry, strict=True):
            if index in chosen and chosen[index] != value:
                raise PlanError(
                    f"{what} disagrees on index '{index}': {chosen[index]} and {value}; "
                    "operands that share an index must share its blocking"
                )
            chosen[index] = value
    return chosen


def _normalise(program: Function, option: object, what: str) -> dict[str, int]:
    if isinstance(option, Mapping):
        chosen = dict(option)
    elif isinstance(option, Sequence) and not isinstance(option, str):
        chosen = _from_per_operand(program, option, what)
    else:
        raise PlanError(f"{what} must be a dict {{index: int}} or one tuple per operand")
    sizes = program.size_of
    for name, value in chosen.items():
        if name not in sizes:
            known = ", ".join(sorted(sizes)) or "none"
            raise PlanError(f"{what} names index '{name}' which is not used (indices: {known})")
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise PlanError(f"{what}['{name}'] must be a positive integer, got {value!r}")
    return {name: int(value) for name, value in chosen.items()}


def choose_blocking(program: Function, ctx: PassContext) -> Blocking:
    """The blocking of ``program``: forced by the ``grid``/``block_shape`` options, or the
    heuristic."""
    sizes = program.size_of
    block = {name: max(size, 1) for name, size in sizes.items()}
    if ctx.options.grid is not None and ctx.options.block_shape is not None:
        raise PlanError("give either grid= or block_shape=, not both")
    if ctx.options.grid is not None:
        for name, count in _normalise(program, ctx.options.grid, "grid").items():
            block[name] = max(1, math.ceil(sizes[name] / count))
    elif ctx.options.block_shape is not None:
        for name, size in _normalise(program, ctx.options.block_shape, "block_shape").items():
            block[name] = size
    else:
        block.update(_heuristic(program, ctx))
    ordered = tuple(sorted(sizes.items()))
    return Blocking(sizes=ordered, block=tuple((n, block[n]) for n, _ in ordered))


def _heuristic(program: Function, ctx: PassContext) -> dict[str, int]:
    scans = scan_indices(program)
    sizes = program.size_of
    itemsize = np.dtype(program.dtype).itemsize
    best = None
    for decl in program.inputs:
        nbytes = math.prod(decl.shape) * itemsize
        if decl.shape and (best is None or nbytes > best[0]):
            best = (nbytes, decl)
    if best is None or best[0] < SPLIT_BYTES:
        return {}
    _, decl = best
    order = list(dict.fromkeys(scans.get(decl.name, ())))
    if ctx.options.orders.get(decl.name) == "F":
        order.reverse()
    split = next((name for name in order if sizes[name] >= ctx.options.workers), None)
    if split is None:
        return {}
    candidates = sorted({1, ctx.options.workers, 2 * ctx.options.workers})
    costs = []
    for count in candidates:
        if count > sizes[split]:
            continue
        seconds = subtree_seconds(
            program.output, sizes, {split: count}, itemsize, ctx.options.workers,
            ctx.options.optimize,
        )
        costs.append((seconds, count))
    _, count = min(costs)
    return {split: math.ceil(sizes[split] / count)} if count > 1 else {}
