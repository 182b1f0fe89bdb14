"""Storage on the nodes: blocks read from, and written to, files by tasks on their nodes.

Contract: :func:`read_on_nodes` makes a ``DistributedArray`` whose every block is read by one task
on its block-cyclic node, ``read_block(source, slices)`` opening the file itself (nothing
passes through the driver), into Ray's object store; :func:`write_on_nodes` runs
``writer(target, slices, block)`` for every block of a ``DistributedArray`` on the block's
node, waits for all of them and returns the first failure as ``(block coordinates, cause)``,
or ``None``; :func:`unseen_by` lists the nodes on which a path does not exist (asked of each
node's worker, one round of calls), so a store the nodes cannot see is refused before any
call reads it. File formats, checks and atomic replacement are :mod:`tensorc.storage`'s.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tensorc.runtime.ray.arrays import DistributedArray, _spread, block_bounds, default_blocking
from tensorc.runtime.ray.calls import node_workers, submit
from tensorc.runtime.ray.cluster import connected


def blocking_for(shape: tuple[int, ...], block_shape, grid) -> tuple[int, ...]:
    """The default block shape of an array read on the connected cluster."""
    return default_blocking(shape, block_shape, grid, connected().total_cpus)


def read_on_nodes(shape: tuple[int, ...], dtype: np.dtype, block: tuple[int, ...],
                  read_block: Callable, source) -> DistributedArray:
    """A ``DistributedArray`` of ``shape`` cut in blocks of ``block``, each read on its node."""
    connected().refresh()
    return _spread(shape, dtype, block_bounds(shape, block), "run",
                   lambda coords, slices: (read_block, source, slices))


def unseen_by(path: str) -> list[int]:
    """The indices of the live nodes on which ``path`` does not exist."""
    import ray

    cluster = connected()
    cluster.refresh()
    seen = ray.get([worker.sees.remote(path) for worker in node_workers(cluster)])
    return [node for node, found in enumerate(seen) if not found]


def write_on_nodes(value: DistributedArray, writer: Callable, target: str):
    """Write every block of ``value`` on its node; the first failure or ``None``."""
    import ray

    cluster = connected()
    blocks = value.blocks
    blocks.resolve(cluster.locate, cluster.epoch)
    keys = sorted(blocks.refs)
    done = [submit(cluster, "run", blocks.nodes.get(k), writer, target, blocks.block_slices(k),
                   blocks.refs[k])[0] for k in keys]
    if done:
        ray.wait(done, num_returns=len(done), fetch_local=True)
    for key, ref in zip(keys, done, strict=True):
        try:
            ray.get(ref)
        except Exception as err:
            return key, err
    return None
