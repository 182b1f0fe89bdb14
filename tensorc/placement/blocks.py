"""Where an array's blocks live: the one type the planner and the runtime share.

Contract: :class:`Blocks` is an array cut into blocks — its shape, dtype, block boundaries
per dimension (``(0, …, n)``) — and the node index (in the session's node order) holding
each block. The planner reads it as a *layout* (:meth:`Blocks.layout` makes one without
data, and :meth:`Blocks.key` is what plan caches key on); the Ray runtime reads it as
*data*: ``refs`` holds each block's Ray ObjectRef. ``tc.Array`` wraps one.

``nodes`` is where tensorc asked Ray to make each block (soft node affinity; a live node
runs what it is offered), so the hot path never asks Ray where a block is. Blocks a Ray task
made also carry the ref of the node id the task's worker reported (``reported``):
:meth:`Blocks.resolve` reads them — when the cluster's membership changed since ``nodes``
was recorded (``epoch``: a node died, the indices shifted, Ray ran the block elsewhere), or
when asked to verify. ``copies`` records the other nodes tensorc has made read a block (a
call's argument, a gather to the driver): Ray keeps such copies, and reading there is free.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from tensorc.placement.layout import block_pieces

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
        return self.nodes[self.pieces(slices)[0][0]]

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
