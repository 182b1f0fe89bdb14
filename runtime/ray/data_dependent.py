"""Data-dependent operations on distributed arrays, block by block on the nodes holding the
blocks: boolean-mask selection, ``nonzero`` and ``unique_*``.

Contract: every function takes an evaluated :class:`DistributedArray` (and, for
:func:`select`, a mask that is one too or a driver array) and returns distributed results;
only small things come to the driver: each block's count of selected elements (the
synchronisation point's answer, which fixes the result's shape) and per-block distinct
values when they are small.

- :func:`select` (``x[mask]``, ``mask`` over ``x``'s leading ``k`` dimensions): one task per
  block of ``x`` on its node cuts the block by its piece of the mask (the mask's pieces
  travel from where they are, or inside the message for a driver mask). The result's first
  dimension is cut where the selected rows of each block row end, so its blocks are of
  uneven size (empty ones dropped); the other dimensions keep ``x``'s cuts and every block
  stays on the node that made it. numpy's C order needs the mask's dimensions after the
  first in one block: ``x`` is re-cut so first when they are not (on the nodes);
- :func:`nonzero`: the same cut (every dimension after the first in one block), one task per
  block giving its indices with the block's offsets added; each result is cut along the
  block rows;
- :func:`unique`: one task per block finds its distinct values (with their first flat index
  and counts, :func:`tensorc.runtime.data_dependent.unique_part`); the parts are merged on
  the driver when they are at most ``DRIVER_BYTES`` in all, else in one task on the node of
  the first block, whose result is then re-cut over the cluster (so a large merge runs on
  *one node*, not spread: a distributed sample sort is future work). The inverse indices are
  made block by block where ``x``'s blocks are, from the merged values, in ``x``'s layout.
"""

from __future__ import annotations

import numpy as np

from tensorc.placement.blocks import Blocks
from tensorc.runtime import data_dependent as kernels
from tensorc.runtime.ray.arrays import DistributedArray, node_grid_for
from tensorc.runtime.ray.calls import submit
from tensorc.runtime.ray.cluster import connected as ray_cluster
from tensorc.runtime.ray.inline import Inline
from tensorc.runtime.ray.statements import DRIVER_BYTES
from tensorc.runtime.ray.tasks import stitch
from tensorc.runtime.ray.whole_array import relayout


def _select_block(block, mask_shape, mask_pieces, *pieces):
    """``block[mask]`` with the mask stitched from ``pieces``: ``(rows, count)``."""
    mask = stitch(mask_shape, mask_pieces, pieces) if pieces else np.ones(mask_shape, bool)
    chosen = np.array(np.asarray(block)[np.asarray(mask, bool)], order="C")
    return chosen, int(chosen.shape[0])


def _nonzero_block(block, starts):
    found = kernels.nonzero_part(block, starts)
    return (*found, int(found[0].shape[0]) if found else 0)


def _unique_block(block, starts, shape):
    part = kernels.unique_part(block, starts, shape)
    return part, int(sum(a.nbytes for a in part))


def _merge(dtype, *parts):
    values, index, counts = kernels.merge_unique(parts, dtype)
    return values, index, counts, int(values.shape[0])


def _inverse_block(block, starts, shape, values, index):
    return (kernels.inverse_part(block, starts, shape, values, index),)


def _call(cluster, fn, node: int | None, returns: int, *args) -> list:
    """``fn(*args)`` as a task on node index ``node`` (soft affinity, the project's
    ``run_many`` task): the refs of its results, then of the node id that ran it
    (``returns`` in all)."""
    return list(submit(cluster, "run_many", node, fn, *args, returns=returns))


def _arg(ref):
    return ref.value if type(ref) is Inline else ref


def _stored(value: DistributedArray, whole_from: int, upto: int) -> Blocks:
    """``value``'s blocks, re-cut on the nodes so dimensions ``whole_from`` to ``upto - 1``
    are each one block (what C order across blocks needs)."""
    cluster = ray_cluster()
    bounds = value.layout.bounds
    if all(len(bounds[d]) <= 2 for d in range(whole_from, upto)):
        return value.blocks.resolve(cluster.locate, cluster.epoch)
    wanted = tuple((0, n) if whole_from <= d < upto else tuple(b)
                   for d, (n, b) in enumerate(zip(value.shape, bounds, strict=True)))
    grid = tuple(len(b) - 1 for b in wanted)
    again = relayout(value, wanted, node_grid_for(grid, cluster.nodes))
    return again.blocks.resolve(cluster.locate, cluster.epoch)


def _row_cut(shape_rest, bounds_rest, dtype, rows: list[tuple[int, dict, dict, dict]]):
    """A DistributedArray whose first dimension is cut after each non-empty block row:
    ``rows[g] = (count, refs, nodes, reported)`` by the coordinates of the other dims."""
    cluster = ray_cluster()
    kept = [r for r in rows if r[0] > 0]
    edges = [0]
    for count, *_ in kept:
        edges.append(edges[-1] + count)
    blocks = Blocks((edges[-1], *shape_rest), np.dtype(dtype), (tuple(edges), *bounds_rest),
                    epoch=cluster.epoch)
    for g, (_, refs, nodes, reported) in enumerate(kept):
        for rest, ref in refs.items():
            blocks.refs[(g, *rest)] = ref
            blocks.nodes[(g, *rest)] = nodes[rest]
            blocks.reported[(g, *rest)] = reported[rest]
    return DistributedArray(blocks, node_grid_for(blocks.grid, cluster.nodes))


def select(value: DistributedArray, mask) -> object:
    """``value[mask]`` block by block (module docstring); an empty result is a driver
    array."""
    import ray

    cluster = ray_cluster()
    k = np.ndim(mask)
    stored = _stored(value, 1, k)
    mask_blocks = None
    if isinstance(mask, DistributedArray):
        mask_blocks = _stored(mask, 1, k)
    else:
        mask = np.asarray(mask, bool)
    grid = stored.grid
    rows: dict[int, dict] = {}
    for coords in np.ndindex(*grid):
        slices = stored.block_slices(coords)
        lead = slices[:k]
        mask_shape = tuple(s.stop - s.start for s in lead)
        if mask_blocks is None:
            pieces = [((slice(None),) * k, tuple(slice(None) for _ in lead))]
            args = [np.array(mask[lead])]
        else:
            found = mask_blocks.pieces(lead)
            pieces = [(into, out_of) for _, into, out_of in found]
            args = [_arg(mask_blocks.refs[c]) for c, _, _ in found]
        node = stored.nodes.get(coords)
        chosen, count, reported = _call(cluster, _select_block, node, 3,
                                        _arg(stored.refs[coords]), mask_shape, tuple(pieces),
                                        *args)
        rest = coords[k:]
        row = rows.setdefault(coords[0], {"count": count, "refs": {}, "nodes": {},
                                          "reported": {}})
        row["refs"][rest], row["nodes"][rest], row["reported"][rest] = chosen, node, reported
    order = sorted(rows)
    counts = ray.get([rows[g]["count"] for g in order])  # the synchronisation point
    shape_rest = value.shape[k:]
    if sum(counts) == 0:
        return np.empty((0, *shape_rest), value.dtype)
    return _row_cut(shape_rest, stored.bounds[k:], value.dtype,
                    [(c, rows[g]["refs"], rows[g]["nodes"], rows[g]["reported"])
                     for c, g in zip(counts, order, strict=True)])


def nonzero(value: DistributedArray) -> tuple:
    """``np.nonzero(value)`` block by block (module docstring)."""
    import ray

    cluster = ray_cluster()
    ndim = value.ndim
    stored = _stored(value, 1, ndim)
    found = []
    for coords in np.ndindex(*stored.grid):  # one block per row: dims after the first whole
        starts = tuple(s.start for s in stored.block_slices(coords))
        node = stored.nodes.get(coords)
        refs = _call(cluster, _nonzero_block, node, ndim + 2, _arg(stored.refs[coords]),
                     starts)
        found.append((refs, node))
    counts = ray.get([refs[ndim] for refs, _ in found])  # the synchronisation point
    if sum(counts) == 0:
        return tuple(np.empty(0, kernels.INDEX) for _ in range(ndim))
    return tuple(_row_cut((), (), kernels.INDEX,
                          [(c, {(): refs[d]}, {(): node}, {(): refs[ndim + 1]})
                           for c, (refs, node) in zip(counts, found, strict=True)])
                 for d in range(ndim))


def _single_block(ref, reported, node: int, length: int, dtype) -> DistributedArray:
    cluster = ray_cluster()
    blocks = Blocks((length,), np.dtype(dtype), ((0, length),), epoch=cluster.epoch)
    blocks.refs[(0,)], blocks.nodes[(0,)], blocks.reported[(0,)] = ref, node, reported
    return DistributedArray(blocks, (1,))


def unique(value: DistributedArray, kind: str, reblock) -> tuple:
    """numpy 2's ``unique_*`` by ``kind`` block by block (module docstring); ``reblock``
    re-cuts a one-block result over the cluster (the executor's)."""
    import ray

    cluster = ray_cluster()
    stored = value.blocks.resolve(cluster.locate, cluster.epoch)
    shape = value.shape
    parts, sizes, where = [], [], []
    for coords in np.ndindex(*stored.grid):
        starts = tuple(s.start for s in stored.block_slices(coords))
        node = stored.nodes.get(coords)
        part, size, _ = _call(cluster, _unique_block, node, 3, _arg(stored.refs[coords]),
                              starts, shape)
        parts.append(part)
        sizes.append(size)
        where.append((coords, starts, node))
    if sum(ray.get(sizes)) <= DRIVER_BYTES:  # small: merged here
        values, index, counts = kernels.merge_unique(ray.get(parts), value.dtype)
        merged = (values, index, counts)
        values_arg, index_arg = values, index
    else:  # merged on one node, then spread (module docstring)
        node = where[0][2]
        values_ref, index_ref, counts_ref, length, reported = _call(
            cluster, _merge, node, 5, value.dtype.str, *parts)
        length = ray.get(length)
        merged = tuple(reblock(_single_block(ref, reported, node, length, dtype))
                       for ref, dtype in ((values_ref, value.dtype),
                                          (index_ref, kernels.INDEX),
                                          (counts_ref, kernels.INDEX)))
        values_arg, index_arg = values_ref, index_ref
    values, index, counts = merged
    if kind == "values":
        return (values,)
    if kind == "counts":
        return values, counts
    blocks = Blocks(shape, kernels.INDEX, stored.bounds, epoch=cluster.epoch)
    for coords, starts, node in where:
        ref, reported = _call(cluster, _inverse_block, node, 2, _arg(stored.refs[coords]),
                              starts, shape, values_arg, index_arg)
        blocks.refs[coords], blocks.nodes[coords], blocks.reported[coords] = ref, node, reported
    inverse = DistributedArray(blocks, value.node_grid)
    if kind == "inverse":
        return values, inverse
    return values, index, inverse, counts
