"""Whole-array operations on Ray: one task for the whole array, or block by block where the
blocks are.

Contract:

- :func:`run_whole` runs a whole-array operation (:mod:`tensorc.codegen.whole_array`: a
  reshape, a small solve, …) on the connected cluster; what :func:`run_blockwise` takes runs
  block by block, anything else is one task on the node holding most of the operands'
  bytes, its result cut into the default blocking and left on that node;
- :func:`run_blockwise` runs a basic index, an operation along an axis the blocks do not
  split, or a dtype conversion, block by block on the nodes holding the blocks (a staged
  program of per-block steps, :mod:`tensorc.runtime.ray.blockwise`, cached by operation and
  layout; merged into a call batch when given);
- :func:`cast` converts a distributed array's blocks on their nodes; :func:`relayout` re-cuts
  one onto another blocking and block-cyclic layout on the nodes (only the elements a new
  block needs travel, nothing passes through the driver).
"""

from __future__ import annotations

import functools
import math
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from tensorc.codegen.whole_array import apply_whole, decode_index
from tensorc.placement.blocks import Blocks, block_bounds, default_blocking
from tensorc.placement.layout import block_cyclic_node
from tensorc.runtime.ray.arrays import DistributedArray, node_grid_for, place
from tensorc.runtime.ray.blockwise import blockwise_calls
from tensorc.runtime.ray.calls import CallRunner, submit
from tensorc.runtime.ray.cluster import connected as ray_cluster
from tensorc.runtime.ray.slicing import slice_blocks
from tensorc.runtime.ray.stages import relayout_calls


def cast(blocks: Blocks, dtype: np.dtype, *, batch=None, pending: list | None = None,
         ) -> Blocks:
    """``blocks`` converted to ``dtype``, each block on the node holding it: a step of that
    node's call (:func:`run_blockwise`), merged into ``batch`` when given. Without a
    ``pending`` list the conversion is submitted and not waited for (reading the result
    waits)."""
    return _blockwise(("astype",), blocks, blocks.shape, dtype, batch=batch,
                      pending=[] if pending is None else pending)[0]


def relayout(value: DistributedArray, bounds, node_grid: tuple[int, ...]) -> DistributedArray:
    """``value`` re-cut at block ``bounds`` onto the block-cyclic layout over ``node_grid``,
    on the nodes (:func:`~tensorc.runtime.ray.stages.relayout_calls`'s calls: only the
    elements a new block needs travel, nothing passes through the driver; a block that is
    unchanged is reused). Submitted, not waited for (reading the result waits)."""
    cluster = ray_cluster()
    stored = value.blocks_in_place.resolve(cluster.locate, cluster.epoch)  # read where held
    target = Blocks.layout(bounds, {}).grid
    nodes = {c: block_cyclic_node(c, node_grid) for c in np.ndindex(*target)}
    program = relayout_calls(stored, bounds, nodes)
    result, _ = CallRunner(cluster).run(program, [stored], pending=[])
    return DistributedArray(result, node_grid)


def run_whole(op: tuple, operands: Sequence[object], shape: tuple[int, ...],
              dtype: np.dtype) -> tuple[DistributedArray, dict]:
    """A whole-array operation (:mod:`tensorc.codegen.whole_array`) on the Ray session:
    ``(result, {"tasks": count, ...})``. What :func:`run_blockwise` takes runs block by
    block where the blocks are; anything else is one task, on the node holding most of the
    operands' bytes, that stitches each operand from its blocks, applies ``op`` and cuts
    the result (``shape``, ``dtype``) into the default blocking; every result block stays
    on that node. It reads real refs: flush any batch its operands came from first."""
    found = run_blockwise(op, operands, shape, dtype)
    if found is not None:
        return found
    cluster = ray_cluster()
    held = [0] * cluster.nodes
    described, refs = [], []
    for operand in operands:
        if not isinstance(operand, DistributedArray):
            operand = place(np.asarray(operand), tuple((0, n) for n in np.shape(operand)))
        blocks = operand.blocks.resolve(cluster.locate, cluster.epoch)
        whole = tuple(slice(0, n) for n in blocks.shape)
        pieces = blocks.pieces(whole)
        described.append((tuple(blocks.shape),
                          tuple((into, out_of) for _, into, out_of in pieces), len(pieces)))
        for coords, _, _ in pieces:
            refs.append(blocks.refs[coords])
            node = blocks.nodes.get(coords)
            if node is not None and 0 <= node < cluster.nodes:
                held[node] += math.prod(b.stop - b.start for b in blocks.block_slices(coords))
    node = max(range(cluster.nodes), key=lambda n: (held[n], -n))
    bounds = block_bounds(shape, default_blocking(shape, None, None, cluster.total_cpus))
    out = Blocks(shape, dtype, bounds, epoch=cluster.epoch)
    coords = list(np.ndindex(*out.grid))
    results = submit(cluster, "whole", node, _apply_whole, op, tuple(described),
                     tuple(out.block_slices(c) for c in coords), *refs,
                     returns=len(coords) + 1)
    for k, c in enumerate(coords):
        out.refs[c], out.reported[c], out.nodes[c] = results[k], results[-1], node
    return DistributedArray(out, node_grid_for(out.grid, cluster.nodes)), {"tasks": 1}


def run_blockwise(op: tuple, operands: Sequence[object], shape: tuple[int, ...],
                  dtype: np.dtype, *, batch=None,
                  pending: list | None = None) -> tuple[DistributedArray, dict] | None:
    """``op`` block by block on the nodes holding the blocks, or ``None`` when it cannot be:

    - a basic index (``getitem``; :mod:`tensorc.runtime.ray.slicing`): each result block
      is cut out of its one stored block, or is that block when the index keeps it whole;
    - an operation along one axis (:data:`ALONG_AXIS`) whose blocks do not split that axis:
      each block is one result block (the axis keeps its length, changes it, or goes);
    - ``("astype",)``: each block converted to ``dtype`` (a result computed in a wider
      dtype than its statement's, such as a comparison).

    The per-block steps form staged calls (:mod:`tensorc.runtime.ray.blockwise`, cached by
    the operation and the layout) run by the Ray executor: one call per node, merged into
    ``batch`` when given."""
    if len(operands) != 1 or not isinstance(operands[0], DistributedArray):
        return None
    found = _blockwise(op, operands[0].blocks_in_place, shape, dtype, batch=batch,
                       pending=pending)  # a held block read in place on its node
    if found is None:
        return None
    result, stats = found
    return DistributedArray(result, node_grid_for(result.grid, ray_cluster().nodes)), stats


def _blockwise(op: tuple, blocks: Blocks, shape, dtype, *, batch,
               pending) -> tuple[Blocks, dict] | None:
    """:func:`run_blockwise` on one operand's ``blocks``: the result's blocks and stats."""
    cluster = ray_cluster()
    blocks = blocks.resolve(cluster.locate, cluster.epoch)
    key = (op, blocks.key(), np.dtype(dtype).str, tuple(shape))
    program = _BLOCKWISE.get(key)
    if program is None:
        if op[0] == "astype":
            kernel = functools.partial(np.asarray, dtype=np.dtype(dtype))
            found = blocks.bounds, {c: (c, kernel) for c in np.ndindex(*blocks.grid)}
        elif op[0] == "getitem":
            found = _getitem_pieces(op[1], blocks, np.dtype(dtype))
        elif op[0] in ALONG_AXIS:
            found = _along_axis_pieces(op, blocks, tuple(shape), np.dtype(dtype))
        else:
            found = None
        if found is None:
            return None
        program = blockwise_calls(blocks, found[1], found[0], np.dtype(dtype))
        _BLOCKWISE[key] = program
        if len(_BLOCKWISE) > BLOCKWISE_KEPT:
            _BLOCKWISE.popitem(last=False)
    else:
        _BLOCKWISE.move_to_end(key)
    executor = CallRunner(cluster)
    result, _ = executor.run(program, [blocks], measure=cluster.measure, pending=pending,
                             batch=batch)
    tasks = sum(len(call.steps) for call in program.calls)
    return result, {"tasks": tasks, "blockwise": True, "remote_calls": len(program.calls)}


BLOCKWISE_KEPT = 64
"""Block-by-block programs kept (by operation and layout), least recently used dropped."""

_BLOCKWISE: OrderedDict = OrderedDict()

ALONG_AXIS = frozenset({"argmax", "argmin", "sort", "argsort", "cumulative_sum",
                        "cumulative_prod"})
"""Whole-array operations along one axis (``op[1]``, normalised; ``None``: all axes)."""


def _getitem_pieces(key: tuple, blocks: Blocks, dtype: np.dtype):
    sliced = slice_blocks(blocks.bounds, decode_index(key))
    if sliced is None:
        return None
    bounds, mapping = sliced
    same = np.dtype(blocks.dtype) == dtype
    return bounds, {
        coords: (piece.source, None if piece.whole and same
                 else functools.partial(_cut, piece.key, dtype))
        for coords, piece in mapping.items()}


def _cut(key: tuple, dtype: np.dtype, block: np.ndarray) -> np.ndarray:
    return np.array(block[key], dtype=dtype, order="C")


def _along_axis_pieces(op: tuple, blocks: Blocks, shape: tuple[int, ...], dtype: np.dtype):
    axis = op[1]
    if axis is None or len(blocks.bounds[axis]) != 2 or math.prod(blocks.grid) == 1:
        return None  # every axis, split along the axis, or one block: the whole-array task
    kept = len(shape) == len(blocks.bounds)
    bounds = tuple((0, shape[axis]) if d == axis else edges
                   for d, edges in enumerate(blocks.bounds) if kept or d != axis)
    kernel = functools.partial(_along_axis, op, dtype)
    return bounds, {(coords if kept else coords[:axis] + coords[axis + 1:]): (coords, kernel)
                    for coords in np.ndindex(*blocks.grid)}


def _along_axis(op: tuple, dtype: np.dtype, block: np.ndarray) -> np.ndarray:
    return np.asarray(apply_whole(op, block), dtype=dtype)


def _apply_whole(op: tuple, *values: np.ndarray) -> np.ndarray:
    return apply_whole(op, *values)
