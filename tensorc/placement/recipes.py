"""Arrays not made yet: what an array created by ``tc.random``/``zeros``/``ones``/``full``/
``asarray`` on Ray holds, without where its blocks go.

Contract: a :class:`Recipe` describes an array's values — ``random`` (uniform [0, 1), chunk
``g`` of its own blocking ``chunks`` drawn from numpy's PCG64 seeded with ``(seed, *g)``),
``full`` (every element ``value``) or ``data`` (a driver ndarray) — and makes any block of
them, cut anywhere: :meth:`Recipe.block` (and :func:`random_piece`, the same for a Ray task)
gives the values of region ``slices`` whatever blocking the reader chose, so an array's
values never depend on the layout it is made in. The runtime makes it once, in the layout
the first statement reading it wants (``made``, ``made_for``); until then it is an input a
plan lays out freely. ``np.asarray(recipe)`` makes it whole here (small arrays only).
:class:`DriverData` marks a ``data`` recipe's driver values handed to a reader that cuts
and places them itself (a block program on Ray), so that it runs on the cluster as the array
would have.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tensorc.placement.layout import block_pieces

KINDS = ("random", "full", "data")


@dataclass(eq=False)
class Recipe:
    """An array's values, not made yet (see the module docstring)."""

    kind: str
    shape: tuple[int, ...]
    dtype: np.dtype
    chunks: tuple[tuple[int, ...], ...]
    """Block boundaries of the array's own blocking (``random``'s values depend on it)."""
    seed: int = 0
    value: object = 0
    data: np.ndarray | None = None
    made: object = None
    """The ``DistributedArray`` the first program reading it made (``None`` until then)."""
    made_for: str | None = None
    """Which statement's plan chose the layout it was made in."""
    sent: dict = field(default_factory=dict)
    """A ``data`` recipe's blocks block programs sent from the driver's node while it was not
    made (:class:`DriverData`), by ``(bounds, coords)``: a later program cut the same way
    reads them again instead of sending them again; dropped when it is made, or when the
    session's cluster is no longer ``sent_on``."""
    sent_on: object = None
    """The cluster ``sent``'s blocks live on."""

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize

    @property
    def name(self) -> str:
        """How ``explain()`` names what made it."""
        return {"random": "tc.random", "full": f"tc.full({self.value!r})",
                "data": "tc.asarray"}[self.kind]

    def aligned(self, bounds) -> bool:
        """Whether ``bounds`` cut the array exactly in its own chunks."""
        return tuple(tuple(b) for b in bounds) == tuple(tuple(b) for b in self.chunks)

    def block(self, slices: tuple[slice, ...]) -> np.ndarray:
        """The values of region ``slices`` (unit-step slices, one per dimension)."""
        extent = tuple(s.stop - s.start for s in slices)
        if self.kind == "full":
            return np.full(extent, self.value, dtype=self.dtype)
        if self.kind == "data":
            return np.array(self.data[tuple(slices)], order="C")
        return random_piece(self.seed, np.dtype(self.dtype).str, self.chunks, tuple(slices))

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        whole = self.block(tuple(slice(0, n) for n in self.shape))
        return whole if dtype is None else whole.astype(dtype, copy=False)


class DriverData(np.ndarray):
    """The driver's values of an array not made yet (a ``data`` recipe's), as a view: a
    block program given one runs on the session's cluster, as it does for an array made
    there, cutting them by its own blocking and sending each block it reads from the
    driver's node (where its placer knows it is); a plain ndarray operand alone runs it in
    this process. Blocks already sent (``sent``) are read again, not sent again.
    ``grid`` is the recipe's own block count per dimension (its blocking is a preference,
    as a made array's is) and ``sent`` its :attr:`Recipe.sent`; an array numpy derives from
    one has neither."""

    grid: tuple[int, ...] | None = None
    sent: dict | None = None

    @staticmethod
    def of(recipe: Recipe) -> DriverData:
        """``recipe.data`` (a ``data`` recipe's) as driver data, with its blocking."""
        return DriverData.view_of(recipe.data, tuple(len(b) - 1 for b in recipe.chunks),
                                  recipe.sent)

    @staticmethod
    def view_of(data: np.ndarray, grid: tuple[int, ...] | None = None,
                sent: dict | None = None) -> DriverData:
        """``data`` as driver data cut preferably in ``grid`` blocks (``None``: no
        preference), its blocks kept in ``sent`` once sent (``None``: not kept)."""
        view = data.view(DriverData)
        view.grid, view.sent = grid, sent
        return view


def random_chunk(seed: int, dtype: str, coords: tuple[int, ...],
                 extent: tuple[int, ...]) -> np.ndarray:
    """Chunk ``coords`` of a ``tc.random`` array (its whole extent)."""
    rng = np.random.default_rng([int(seed), *coords])
    return rng.random(extent, dtype=np.dtype(dtype))


def random_piece(seed: int, dtype: str, chunks, slices: tuple[slice, ...]) -> np.ndarray:
    """Region ``slices`` of a ``tc.random`` array cut in ``chunks``: every chunk it overlaps
    drawn whole, the overlap copied (a region that is one chunk is that chunk)."""
    extent = tuple(s.stop - s.start for s in slices)
    pieces = block_pieces(chunks, slices)
    if len(pieces) == 1:
        coords, _, part = pieces[0]
        chunk_extent = tuple(b[c + 1] - b[c] for b, c in zip(chunks, coords, strict=True))
        if chunk_extent == extent:
            return random_chunk(seed, dtype, coords, extent)
    out = np.empty(extent, dtype=np.dtype(dtype))
    for coords, region, part in pieces:
        chunk_extent = tuple(b[c + 1] - b[c] for b, c in zip(chunks, coords, strict=True))
        out[region] = random_chunk(seed, dtype, coords, chunk_extent)[part]
    return out
