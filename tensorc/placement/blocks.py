"""Where an array's blocks live: the one type the planner and the runtime share.

Contract: :class:`Blocks` is an array cut into blocks — its shape, dtype, block boundaries
per dimension (``(0, …, n)``) — and the node index (in the session's node order) holding
each block. The planner reads it as a *layout* (:meth:`Blocks.layout` makes one without
data, and :meth:`Blocks.key` is what plan caches key on); the Ray runtime reads it as
*data*: ``refs`` holds each block's Ray ObjectRef. A ``DistributedArray`` wraps one.

``nodes`` is where tensorc asked Ray to make each block (soft node affinity; a live node
runs what it is offered), so the hot path never asks Ray where a block is. Blocks a Ray task
made also carry the ref of the node id the task's worker reported (``reported``):
:meth:`Blocks.resolve` reads them — when the cluster's membership changed since ``nodes``
was recorded (``epoch``: a node died, the indices shifted, Ray ran the block elsewhere), or
when asked to verify. ``copies`` records the other nodes tensorc has made read a block (a
call's argument, a gather to the driver): Ray keeps such copies, and reading there is free.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from tensorc.errors import PlanError, ShapeError
from tensorc.placement.layout import block_pieces, prime_factors

Coords = tuple[int, ...]


@dataclass
class Blocks:
    """An array's blocks, the node of each and (at run time) each block's ObjectRef."""

    shape: tuple[int, ...]
    dtype: object
    bounds: tuple[tuple[int, ...], ...]
    """Per dimension: 0, the end of block 0, …, ``shape[d]``."""
    nodes: dict[Coords, int] = field(default_factory=dict)
    """Node index of each block (exact once :meth:`resolve` has run)."""
    refs: dict[Coords, object] = field(default_factory=dict)
    """Ray ObjectRef of each block; empty for a layout the planner reasons about."""
    reported: dict[Coords, object] = field(default_factory=dict)
    """Ref of the hex node id the producing task reported, per block not yet resolved."""
    copies: dict[Coords, frozenset[int]] = field(default_factory=dict)
    """Other nodes holding a copy of a block because tensorc had it read there."""
    epoch: int = 0
    """The cluster membership epoch ``nodes`` was recorded in."""

    @classmethod
    def layout(cls, bounds, nodes: Mapping[Coords, int], dtype: object = None) -> Blocks:
        """A layout without data: block boundaries and the node of each block."""
        bounds = tuple(tuple(int(b) for b in edges) for edges in bounds)
        shape = tuple(edges[-1] if edges else 0 for edges in bounds)
        return cls(shape, dtype, bounds, dict(nodes))

    @property
    def grid(self) -> tuple[int, ...]:
        """Blocks per dimension."""
        return tuple(len(b) - 1 for b in self.bounds)

    def block_slices(self, coords: Coords) -> tuple[slice, ...]:
        return tuple(slice(b[c], b[c + 1]) for b, c in zip(self.bounds, coords, strict=True))

    def resolve(self, locate: Callable[[list], list[int | None]], epoch: int | None = None,
                verify: bool = False) -> Blocks:
        """Make ``nodes`` exact for the cluster in membership ``epoch``: nothing to do when
        it was recorded in that epoch (unless ``verify``); otherwise the reported node refs
        are looked up by ``locate`` (the runtime's: reported refs to node indices; an
        unknown node counts as node 0) and tracked copies are forgotten. Returns ``self``."""
        if (epoch is None or epoch == self.epoch) and not verify:
            return self
        if self.reported:
            keys = list(self.reported)
            found = locate([self.reported[k] for k in keys])
            for key, node in zip(keys, found, strict=True):
                self.nodes[key] = 0 if node is None else node
        if epoch is not None and epoch != self.epoch:
            self.copies.clear()
            self.epoch = epoch
        return self

    def add_copies(self, coords: Coords, nodes) -> None:
        """Record that ``nodes`` now hold a copy of block ``coords``."""
        extra = frozenset(nodes) - {self.nodes.get(coords)}
        if extra - self.copies.get(coords, frozenset()):
            self.copies[coords] = self.copies.get(coords, frozenset()) | extra

    def without_data(self) -> Blocks:
        """The same layout without refs (what a plan may keep: it holds no block alive)."""
        return Blocks(self.shape, self.dtype, self.bounds, dict(self.nodes),
                      copies=dict(self.copies), epoch=self.epoch)

    def copies_key(self) -> tuple:
        """A hashable value of the tracked copies (part of what a staged run depends on)."""
        return tuple(sorted(self.copies.items()))

    def key(self) -> tuple:
        """A hashable value equal for equal layouts (plan caches key on it)."""
        return self.bounds, tuple(sorted(self.nodes.items()))

    def pieces(self, slices: tuple[slice, ...]) -> list[tuple[Coords, tuple, tuple]]:
        """The stored blocks overlapping ``slices``: (block coordinates, the part of the
        region it fills (relative to the region's start), the part of the block it gives)."""
        return block_pieces(self.bounds, slices)

    def first_node(self, slices: tuple[slice, ...]) -> int:
        """The node of the stored block holding the first element of region ``slices``
        (where the Ray executor stitches a load that spans several blocks)."""
        coords = tuple(0 if s.stop <= s.start else bisect.bisect_right(edges, s.start) - 1
                       for edges, s in zip(self.bounds, slices, strict=True))
        return self.nodes[coords]

    def node_elements(self, slices: tuple[slice, ...]) -> list[tuple[int, int]]:
        """``(node, elements)`` of every stored block overlapping ``slices``."""
        return [
            (self.nodes[coords], math.prod(s.stop - s.start for s in part))
            for coords, part, _ in self.pieces(slices)
        ]

    def block_sizes(self, dims: tuple[str, ...]) -> dict[str, int]:
        """Block size per index name, where every block but the last is the same size."""
        out = {}
        for index, b in zip(dims, self.bounds, strict=True):
            steps = {b[k + 1] - b[k] for k in range(len(b) - 2)}
            if len(b) > 1 and len(steps) <= 1:
                out[index] = steps.pop() if steps else max(b[-1] - b[0], 1)
        return out


RANDOM_DTYPES = ("float32", "float64")
"""The dtypes ``tc.random`` makes."""


def factor_over(count: int, extents: Sequence[int]) -> tuple[int, ...]:
    """Spread ``count`` over dimensions: each prime factor (largest first) goes to the
    dimension with the most extent per part left; ties to the less split, then outer one."""
    parts = [1] * len(extents)
    if not extents:
        return ()
    for p in prime_factors(count):
        best = max(range(len(extents)), key=lambda d: (extents[d] / parts[d], -parts[d], -d))
        parts[best] *= p
    return tuple(parts)


def block_bounds(shape: Sequence[int], block: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """Block boundaries (``(0, b, 2b, …, n)`` per dimension) of ``shape`` cut in ``block``."""
    out = []
    for n, b in zip(shape, block, strict=True):
        b = max(1, int(b))
        starts = list(range(0, n, b)) or [0]
        out.append(tuple(starts) + (n,))
    return tuple(out)


def default_blocking(shape, block_shape, grid, cpus: int) -> tuple[int, ...]:
    """The block shape from ``block_shape=`` or ``grid=``, else ``cpus`` factored over the
    dimensions (largest extent first)."""
    if block_shape is not None and grid is not None:
        raise PlanError("give either block_shape= or grid=, not both")
    if block_shape is not None:
        block = tuple(int(b) for b in block_shape)
        what = "block_shape"
    elif grid is not None:
        counts = tuple(int(g) for g in grid)
        if len(counts) != len(shape) or any(g < 1 for g in counts):
            raise PlanError(f"grid {tuple(grid)} does not fit shape {shape}: one positive "
                            "count per dimension")
        block = tuple(max(1, math.ceil(n / g)) for n, g in zip(shape, counts, strict=True))
        what = "grid"
    else:
        counts = factor_over(cpus, shape)
        block = tuple(max(1, math.ceil(n / g)) for n, g in zip(shape, counts, strict=True))
        what = "block_shape"
    if len(block) != len(shape) or any(b < 1 for b in block):
        raise PlanError(f"{what} {block} does not fit shape {shape}: one positive size per "
                        "dimension")
    return block


def normalised_shape(shape) -> tuple[int, ...]:
    """``shape`` as a tuple of non-negative ints (an int is a 1-d shape)."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        out = tuple(int(n) for n in shape)
    except TypeError as err:
        raise ShapeError(f"shape must be an int or a sequence of ints, got {shape!r}") from err
    if any(n < 0 for n in out):
        raise ShapeError(f"negative dimensions are not allowed: {out}")
    return out
