"""Block-cyclic layouts: which node holds which block of a distributed array (NumS).

Contract: a node grid ``(C0, C1, …)`` over an array's first dimensions places block
``(g0, g1, …)`` on the node whose row-major flat index in the grid is
``(g0 % C0, g1 % C1, …)``; dimensions beyond the grid's length are not split over nodes.
:func:`block_cyclic_node` is that rule; the other helpers apply it to the load tasks and
output blocks of a task graph, whose block coordinates they read from the block slices
(the rank of a block's start among the starts of its dimension), so they hold for any
uniform or ragged blocking.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence

import numpy as np

from tensorc.codegen.taskgraph import LOAD, TaskGraph


def prime_factors(n: int) -> list[int]:
    """Prime factors of ``n``, largest first, with repetition (how node counts are split
    over the dimensions of a grid)."""
    factors, p = [], 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    return sorted(factors, reverse=True)


def live_node(node: int | None, nodes: int) -> int:
    """Where a block recorded on ``node`` is read from a cluster of ``nodes`` nodes: its node,
    or node 0 when the cluster no longer has that node (it died since the block was made;
    Ray knows where its copy or its lineage is) or none was recorded."""
    node = node or 0
    return node if node < nodes else 0


def node_grid(block_grid: Sequence[int], nodes: int) -> tuple[int, ...]:
    """The node grid of an array made on its own (its default layout): ``nodes`` factored
    over its block grid, each prime factor (largest first) to the dimension with the most
    blocks per part left, ties to the less split and then to the *inner* dimension.

    Inner first because a contraction reads a tensor along its trailing dimensions and its
    partner along its leading ones (``ijk,jkf->if``, ``tensordot(X, Y, axes=2)``, matmul):
    X of grid (4, 4, 4) on 4 nodes is block-cyclic over (j, k) and Y of grid (4, 4, 1) over
    its split dimensions (j, k), so block (·, j, k) of X and block (j, k, ·) of Y share a
    node. Arrays of the same shape and blocking get the same grid, so block ``g`` of each
    is on the same node (Spartan's rule)."""
    parts = [1] * len(block_grid)
    for p in prime_factors(nodes):
        if not parts:
            break
        best = max(range(len(parts)),
                   key=lambda d: (block_grid[d] / parts[d], -parts[d], d))
        parts[best] *= p
    return tuple(parts)


def own_node(block_grid: Sequence[int], coords: Sequence[int], nodes: int) -> int:
    """The node holding block ``coords`` of an array of ``block_grid`` blocks made on its
    own: block-cyclic over its default node grid (:func:`node_grid`)."""
    return block_cyclic_node(coords, node_grid(block_grid, nodes))


def block_cyclic_node(coords: Sequence[int], node_grid: Sequence[int]) -> int:
    """The node of block ``coords`` under the block-cyclic layout over ``node_grid``.

    Args:
        coords: block coordinates ``(g0, g1, …)`` (at least as many as the grid has axes,
            missing trailing ones count as 0).
        node_grid: node counts per split dimension ``(C0, C1, …)``; their product is the
            number of nodes the array spans.

    Returns:
        The row-major flat index of ``(g0 % C0, g1 % C1, …)`` in the grid.
    """
    node = 0
    for axis, count in enumerate(node_grid):
        if count < 1:
            raise ValueError(f"node grid {tuple(node_grid)} has an axis of {count} nodes")
        coord = coords[axis] if axis < len(coords) else 0
        node = node * count + coord % count
    return node


def _ranks(slices_list: Sequence[tuple[slice, ...]]) -> list[tuple[int, ...]]:
    """Block coordinates of each slice tuple: the rank of its start in its dimension."""
    if not slices_list:
        return []
    dims = len(slices_list[0])
    starts = [sorted({s[d].start or 0 for s in slices_list}) for d in range(dims)]
    rank = [{start: r for r, start in enumerate(column)} for column in starts]
    return [tuple(rank[d][s[d].start or 0] for d in range(dims)) for s in slices_list]


def load_block_coords(graph: TaskGraph) -> dict[int, tuple[int, tuple[int, ...]]]:
    """For every load task: (operand position, block coordinates within that operand)."""
    by_operand: dict[int, list[int]] = {}
    for index, task in enumerate(graph.tasks):
        if task.kind == LOAD:
            by_operand.setdefault(task.source[0], []).append(index)
    coords: dict[int, tuple[int, tuple[int, ...]]] = {}
    for position, indices in by_operand.items():
        ranks = _ranks([graph.tasks[i].source[1] for i in indices])
        for index, block in zip(indices, ranks, strict=True):
            coords[index] = (position, block)
    return coords


def output_block_coords(graph: TaskGraph) -> list[tuple[int, ...]]:
    """Block coordinates of each entry of ``graph.outputs``, in that order."""
    return _ranks([slices for _, slices in graph.outputs])


def block_cyclic_load_nodes(
    graph: TaskGraph, node_grids: Sequence[Sequence[int]]
) -> dict[int, int]:
    """``load_nodes`` for :func:`tensorc.placement.schedule.schedule`: operand ``p`` laid out
    block-cyclically over ``node_grids[p]``."""
    return {
        index: block_cyclic_node(coords, node_grids[position])
        for index, (position, coords) in load_block_coords(graph).items()
    }


def block_cyclic_output_nodes(graph: TaskGraph, node_grid: Sequence[int]) -> list[int]:
    """``output_nodes``: the result laid out block-cyclically over ``node_grid``."""
    return [block_cyclic_node(coords, node_grid) for coords in output_block_coords(graph)]


def grid_node(
    dims: Sequence[str],
    coords: Sequence[int],
    grid: Sequence[tuple[str, int]],
    counts: Mapping[str, int],
) -> int:
    """The node of a block under a plan's *index grid* (``tensorc.planning.distribution``).

    ``grid`` gives ``(index, nodes along it)`` per axis; the product is the node count;
    ``counts`` gives the number of blocks along each index (a multiple of its grid size).
    A block of an array (or a task's iteration block) with index names ``dims`` at block
    coordinates ``coords`` sits at grid coordinate ``coords[i] % p_i`` along each axis whose
    index it has. Along the axes it lacks, its *within-cell rank* — the row-major rank of
    ``(coords[i] // p_i)`` over its index names in sorted order, with radix ``counts[i] //
    p_i`` — is spread in mixed radix (last missing axis fastest), so an array with at least
    as many blocks per grid cell as the missing axes have nodes covers them evenly (a
    reduce-scatter of an output over the nodes of a split contraction index), and blocks
    of the same indices at the same coordinates share a node whatever the order of their
    dimensions (an operand and the tasks that iterate over exactly its indices). Returns
    the row-major flat index.
    """
    coords_array = np.asarray([coords], dtype=np.int64).reshape(1, len(dims))
    return int(grid_nodes(dims, coords_array, grid, counts)[0])


def grid_nodes(
    dims: Sequence[str],
    coords: np.ndarray,
    grid: Sequence[tuple[str, int]],
    counts: Mapping[str, int],
) -> np.ndarray:
    """:func:`grid_node` for many blocks of one array at once: ``coords`` is an integer
    array of shape ``(blocks, len(dims))``; returns the node of each block."""
    sizes = dict(grid)
    column = {name: k for k, name in enumerate(dims)}
    within = np.zeros(len(coords), dtype=np.int64)
    for name in sorted(column):
        p = sizes.get(name, 1)
        radix = max(1, counts.get(name, 1) // p)
        within = within * radix + coords[:, column[name]] // p
    node = np.zeros(len(coords), dtype=np.int64)
    spread: dict[str, np.ndarray] = {}
    for name, p in reversed(grid):
        if name not in column:
            spread[name] = within % p
            within = within // p
    for name, p in grid:
        coord = coords[:, column[name]] % p if name in column else spread[name]
        node = node * p + coord
    return node


def block_pieces(
    bounds: Sequence[Sequence[int]], slices: Sequence[slice]
) -> list[tuple[tuple[int, ...], tuple[slice, ...], tuple[slice, ...]]]:
    """The stored blocks of an array cut at ``bounds`` (``(0, …, n)`` per dimension) that
    overlap region ``slices``: ``(block coordinates, the part of the region it fills
    (relative to the region's start), the part of the block it gives)``."""
    per_dim = []
    for edges, s in zip(bounds, slices, strict=True):
        if s.stop <= s.start:
            per_dim.append([(0, slice(0, 0), slice(0, 0))])
            continue
        first = bisect.bisect_right(edges, s.start) - 1
        last = bisect.bisect_left(edges, s.stop) - 1
        parts = []
        for c in range(first, last + 1):
            lo, hi = max(edges[c], s.start), min(edges[c + 1], s.stop)
            parts.append(
                (c, slice(lo - s.start, hi - s.start), slice(lo - edges[c], hi - edges[c]))
            )
        per_dim.append(parts)
    out: list[tuple[tuple[int, ...], tuple, tuple]] = [((), (), ())]
    for parts in per_dim:
        out = [(co + (c,), dst + (d,), src + (r,)) for co, dst, src in out for c, d, r in parts]
    return out


def load_bounds(
    graph: TaskGraph, position: int, shape: Sequence[int]
) -> tuple[tuple[int, ...], ...]:
    """Block boundaries (``(0, …, n)`` per dimension) of operand ``position`` as the graph's
    load tasks cut it."""
    starts: list[set[int]] = [{0} for _ in shape]
    for task in graph.tasks:
        if task.source is not None and task.source[0] == position:
            for d, piece in enumerate(task.source[1]):
                starts[d].add(piece.start)
    return tuple(tuple(sorted(s for s in found if s < n or n == 0)) + (n,)
                 for found, n in zip(starts, shape, strict=True))


def load_layout(
    graph: TaskGraph, load_nodes: dict[int, int], position: int
) -> dict[tuple[int, ...], int]:
    """Node of each block of operand ``position`` that a load reads, keyed by its block
    coordinates over all the operand's dimensions (a diagonal read repeats one)."""
    indices = [i for i, t in enumerate(graph.tasks) if t.kind == LOAD and t.source[0] == position]
    coords = _ranks([graph.tasks[i].source[1] for i in indices])
    return {c: load_nodes[i] for i, c in zip(indices, coords, strict=True)}


class NodeMap(Mapping):
    """Task index → node, kept as one array over a graph's tasks (-1: no entry): what a
    plan's layout gives the schedule for graphs of millions of tasks, read as a mapping by
    everything else. ``array`` is the array itself (the compiled LSHS takes it as it is)."""

    __slots__ = ("array",)

    def __init__(self, count: int) -> None:
        self.array = np.full(count, -1, dtype=np.int64)

    def fill(self, indices: np.ndarray, nodes: np.ndarray) -> None:
        """Set the node of every task in ``indices`` at once."""
        self.array[indices] = nodes

    def __getitem__(self, index: int) -> int:
        if index not in self:
            raise KeyError(index)
        return int(self.array[index])

    def __setitem__(self, index: int, node: int) -> None:
        self.array[index] = node

    def __contains__(self, index) -> bool:
        return (isinstance(index, (int, np.integer)) and not isinstance(index, bool)
                and 0 <= index < len(self.array) and bool(self.array[index] >= 0))

    def as_dict(self) -> dict[int, int]:
        """The entries as a dict (for loops that read one entry at a time)."""
        present = np.flatnonzero(self.array >= 0)
        return dict(zip(present.tolist(), self.array[present].tolist(), strict=True))

    def __iter__(self):
        return iter(np.flatnonzero(self.array >= 0).tolist())

    def __len__(self) -> int:
        return int(np.count_nonzero(self.array >= 0))
