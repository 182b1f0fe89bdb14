"""A reduction finished as a reduce-scatter: the partial blocks of one output block, made on
the ``g`` nodes of a group, are summed by recursive splitting, and each node of the group
ends with ``1 / g`` of the block.

Contract: a :class:`Scatter` names the summed indices the plan's grid splits over nodes
(``axes``, with the nodes along each; ``g`` is their product) and the output indices the
pieces cut (``cuts``: each with its number of pieces, their product ``g``; one index, or
more when one is too short for ``g`` pieces). :func:`lower_scatter` is the lowering of a
stage's reduce under it (:func:`tensorc.codegen.lower.lower_to_tasks` calls it for the
statement's last stage when given one); :func:`cut_plan` chooses the cuts. A partial's
*member* is its coordinates modulo the nodes along ``axes`` (mixed radix, the first axis
most significant): the node of the group that the plan's grid puts it on. Tasks, per output
block:

- ``fold`` — per member holding several partials, one ``reduce`` of them (none when it holds
  one);
- per *round* (``rounds``, factors ``q`` of ``g`` the plan chooses; the first rounds cut the
  first index of ``cuts``, the next rounds the next, :meth:`Scatter.round_dims`): every
  member cuts its current piece
  into ``q`` sub-pieces (``apply`` tasks of :class:`PieceBlock`, zero-copy views), and one
  ``reduce`` per member folds the sub-piece its digit names from itself and the ``q - 1``
  members that differ from it in that digit only (in digit order).

A round cuts a piece of length ``L`` at ``⌊j L / q⌋`` (:func:`member_pieces`), so where the
pieces do not divide a block's length they differ by an element along that index. After the
last round member ``r`` holds the fully reduced piece whose position along each cut index is
its digits of the rounds that cut it (:func:`piece_positions`); the statement's output is
blocked finer along the cut indices than the stage, ``g`` pieces a block. Each member
receives ``(1 - 1/g)`` of a block per block, the same total a fold on one node receives,
spread over the group; a node sends and receives ``q - 1`` messages a round, so a group
of 4,096 nodes in rounds of 4 needs 6 rounds of 3 messages, not 4,095 messages per node.
Task coordinates are the output block's and the member's residues along the stage's summed
indices (stage dims ``output + summed``), so the grid places every task of member ``r`` on
``r``'s node.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from tensorc.codegen.kernels import ReduceBlocks, _finish
from tensorc.codegen.taskgraph import APPLY, REDUCE


@dataclass(frozen=True)
class Scatter:
    """How a stage's reduce ends: over the group of nodes the summed indices ``axes``
    (``((index, nodes), ...)``, each ``nodes > 1``) span, in ``rounds`` (each round's
    radix, their product the group's size; the plan chooses them) and in pieces ``cuts``
    (``((output index, pieces along it), ...)``): the first output index is cut by the
    first rounds, the next by the rounds after them. A ``ValueError`` when the rounds do
    not multiply to the group or the pieces are not products of consecutive rounds."""

    cuts: tuple[tuple[str, int], ...]
    axes: tuple[tuple[str, int], ...]
    rounds: tuple[int, ...]

    def __post_init__(self) -> None:
        if math.prod(self.rounds) != self.group:
            raise ValueError(f"rounds {self.rounds} do not multiply to the group of "
                             f"{self.group} nodes")
        self.round_dims()

    @property
    def group(self) -> int:
        return math.prod(p for _, p in self.axes)

    def round_dims(self) -> list[str]:
        """The output index each round cuts (``cuts`` in order, each for as many rounds as
        its pieces take)."""
        dims, made, cut = [], 1, 0
        for q in self.rounds:
            while cut < len(self.cuts) and made == self.cuts[cut][1]:
                cut, made = cut + 1, 1
            if cut == len(self.cuts) or self.cuts[cut][1] % (made * q):
                raise ValueError(f"cuts {self.cuts} do not match rounds {self.rounds}")
            dims.append(self.cuts[cut][0])
            made *= q
        if cut != len(self.cuts) - 1 or made != self.cuts[cut][1]:
            raise ValueError(f"cuts {self.cuts} do not match rounds {self.rounds}")
        return dims

    def describe(self) -> str:
        over = " x ".join(f"{i}:{p}" for i, p in self.axes)
        along = " x ".join(f"{d}:{g}" for d, g in self.cuts)
        rounds = len(self.rounds)
        return (f"reduce-scatter along {along} over {over} ({self.group} pieces a block, "
                f"{rounds} round{'s' if rounds != 1 else ''})")


def round_tasks(rounds) -> int:
    """The tasks a member runs for a block over rounds of radices ``rounds``: a round of
    ``q`` is ``q`` cuts and one sum (the fold of its own partials aside)."""
    return sum(q + 1 for q in rounds)


@functools.lru_cache(maxsize=4096)
def cut_plan(radices: tuple[int, ...], lengths: tuple[tuple[str, int], ...]
             ) -> tuple[tuple[str, int], ...] | None:
    """The ``cuts`` of a :class:`Scatter` whose rounds have ``radices``, over output indices
    whose shortest block is ``lengths`` long (in order of preference): the rounds, in order,
    cut the first index while its pieces stay at least an element long, then the next; None
    when the indices are too short for every round."""
    cuts, at, made = [], 0, 1
    for q in radices:
        while at < len(lengths) and made * q > lengths[at][1]:
            if made > 1:
                cuts.append((lengths[at][0], made))
            at, made = at + 1, 1
        if at == len(lengths):
            return None
        made *= q
    cuts.append((lengths[at][0], made))
    return tuple(cuts)


class PieceBlock:
    """Cut ``[start, stop)`` along ``axis`` out of a block (a view unless ``out`` is given)."""

    __slots__ = ("axis", "start", "stop")

    def __init__(self, axis: int, start: int, stop: int) -> None:
        self.axis = axis
        self.start = start
        self.stop = stop

    def __call__(self, block: np.ndarray, out=None) -> np.ndarray:
        view = block[(slice(None),) * self.axis + (slice(self.start, self.stop),)]
        return _finish(view, out)


def _digits(group: int, radices) -> np.ndarray:
    """``digits[r, t]``: member ``r``'s digit of round ``t`` (the first most significant)."""
    digits = np.zeros((group, len(radices)), np.int64)
    rest = np.arange(group, dtype=np.int64)
    for t in range(len(radices) - 1, -1, -1):
        digits[:, t] = rest % radices[t]
        rest //= radices[t]
    return digits


def piece_positions(scatter: Scatter) -> dict[str, np.ndarray]:
    """Per cut output index, each member's position (of the pieces along it) of the piece
    it ends with: its digits of the rounds that cut that index, in mixed radix."""
    radices = scatter.rounds
    digits = _digits(scatter.group, radices)
    position = {dim: np.zeros(scatter.group, np.int64) for dim, _ in scatter.cuts}
    for t, (q, dim) in enumerate(zip(radices, scatter.round_dims(), strict=True)):
        position[dim] = position[dim] * q + digits[:, t]
    return position


def member_pieces(extents: dict[str, int], scatter: Scatter):
    """A reduce-scatter of one block whose cut indices are ``extents`` long: per member and
    round, the elements (over the cut indices) of its piece before the round's cut and of
    the sub-piece it keeps (``(before, after)``, arrays ``[member, round]``), and per cut
    index the ``[lo, hi)`` of its final piece relative to the block. A round cuts a piece of
    length ``L`` at ``⌊j L / q⌋``, so pieces differ by at most an element per index."""
    radices = scatter.rounds
    digits = _digits(scatter.group, radices)
    lo = {dim: np.zeros(scatter.group, np.int64) for dim, _ in scatter.cuts}
    hi = {dim: np.full(scatter.group, extents[dim], np.int64) for dim, _ in scatter.cuts}
    before, after = [], []
    for t, (q, dim) in enumerate(zip(radices, scatter.round_dims(), strict=True)):
        before.append(math.prod(hi[d] - lo[d] for d, _ in scatter.cuts))
        length = hi[dim] - lo[dim]
        lo[dim], hi[dim] = (lo[dim] + digits[:, t] * length // q,
                            lo[dim] + (digits[:, t] + 1) * length // q)
        after.append(math.prod(hi[d] - lo[d] for d, _ in scatter.cuts))
    final = {dim: (lo[dim], hi[dim]) for dim, _ in scatter.cuts}
    return np.stack(before, axis=1), np.stack(after, axis=1), final


@functools.lru_cache(maxsize=256)
def piece_bounds(extent: int, dim: str, scatter: Scatter) -> tuple[tuple[int, int], ...]:
    """The ``[lo, hi)`` of the pieces along cut index ``dim`` of a block ``extent`` long,
    in position order (only the rounds cutting ``dim`` move its bounds, so the other cut
    indices are given the same length)."""
    _, _, final = member_pieces({d: extent for d, _ in scatter.cuts}, scatter)
    lo, hi = final[dim]
    first = np.unique(piece_positions(scatter)[dim], return_index=True)[1]
    return tuple((int(lo[r]), int(hi[r])) for r in first)


def lower_scatter(builder, label: str, scatter: Scatter, all_key, output, summed,
                  coords: np.ndarray, partial_ids: np.ndarray, flat: np.ndarray,
                  shapes: np.ndarray, monoid: str):
    """The reduce of one stage's partials as a reduce-scatter (module contract).

    ``coords`` are the partial tasks' coordinates over ``all_key``, ``flat`` their output
    block (row-major over the output counts), ``shapes`` their block shapes. Returns the ids
    of the final pieces over the finer output grid (row-major), the order they were made in,
    and the output's finer block ranges along each cut index."""
    position = {n: k for k, n in enumerate(all_key)}
    group = scatter.group
    member = np.zeros(len(coords), np.int64)
    for name, p in scatter.axes:
        member = member * p + coords[:, position[name]] % p
    grouped = np.lexsort((np.arange(len(flat)), member, flat))
    blocks = np.unique(flat)
    nb = len(blocks)
    per_member = len(flat) // (nb * group)
    # one row per (block, member), blocks in increasing order, members within
    own = partial_ids[grouped].reshape(nb * group, per_member)
    first = grouped[::group * per_member]
    out_positions = [position[n] for n in output]
    block_coords = coords[first][:, out_positions]
    block_shapes = shapes[first]
    residues = np.zeros((group, len(summed)), np.int64)
    rest = np.arange(group, dtype=np.int64)
    for name, p in reversed(scatter.axes):
        residues[:, summed.index(name)] = rest % p
        rest //= p
    row_coords = np.concatenate(
        [np.repeat(block_coords, group, axis=0), np.tile(residues, (nb, 1))], axis=1)
    dims = (*output, *summed)
    row_shapes = np.repeat(block_shapes, group, axis=0)
    itemsize = builder.itemsize
    fold = builder.kernel(ReduceBlocks(monoid, builder.dtype))
    if per_member > 1:
        stage = f"{label}.fold-{builder.digest}"
        builder.stage_dims[stage] = dims
        sizes = row_shapes.prod(axis=1)
        current = builder.add(stage, REDUCE, fold, row_coords, own, row_shapes,
                              sizes * itemsize, sizes * (per_member - 1))
    else:
        current = own[:, 0]
    radices = scatter.rounds
    digits = _digits(group, radices)
    weights = [math.prod(radices[t + 1:]) for t in range(len(radices))]
    members = np.tile(np.arange(group, dtype=np.int64), nb)
    count = nb * group
    base = np.repeat(np.arange(nb, dtype=np.int64) * group, group)
    each = np.arange(count)
    axes = {dim: list(output).index(dim) for dim, _ in scatter.cuts}
    lo = {dim: np.zeros(count, np.int64) for dim in axes}  # the piece, relative to its block
    hi = {dim: row_shapes[:, axis].copy() for dim, axis in axes.items()}
    for t, (q, dim) in enumerate(zip(radices, scatter.round_dims(), strict=True)):
        axis = axes[dim]
        length = hi[dim] - lo[dim]
        cuts = np.empty((q, count), np.int64)
        bounds = np.stack([(j * length) // q for j in range(q + 1)], axis=1)
        for j in range(q):
            pairs, which = np.unique(bounds[:, j:j + 2], axis=0, return_inverse=True)
            for variant, (first_at, stop_at) in enumerate(pairs.tolist()):
                rows_of = np.flatnonzero(which.reshape(-1) == variant)
                stage = f"{label}.scatter{t}.{j}.{variant}-{builder.digest}"
                builder.stage_dims[stage] = dims
                kernel = builder.kernel(PieceBlock(axis, first_at, stop_at))
                piece_shapes = row_shapes[rows_of].copy()
                piece_shapes[:, axis] = stop_at - first_at
                cuts[j, rows_of] = builder.add(
                    stage, APPLY, kernel, row_coords[rows_of], current[rows_of][:, None],
                    piece_shapes, piece_shapes.prod(axis=1) * itemsize,
                    np.zeros(len(rows_of), np.int64))
        digit = np.tile(digits[:, t], nb)
        inputs = np.empty((count, q), np.int64)
        for v in range(q):
            inputs[:, v] = cuts[digit, base + members + (v - digit) * weights[t]]
        lo[dim], hi[dim] = lo[dim] + bounds[each, digit], lo[dim] + bounds[each, digit + 1]
        row_shapes = row_shapes.copy()
        row_shapes[:, axis] = hi[dim] - lo[dim]
        elements = row_shapes.prod(axis=1)
        stage = f"{label}.scatter{t}-{builder.digest}"
        builder.stage_dims[stage] = dims
        current = builder.add(stage, REDUCE, fold, row_coords, inputs, row_shapes,
                              elements * itemsize, elements * (q - 1))
    positions = piece_positions(scatter)
    out_counts = list(builder.counts(output))
    fine_coords = np.repeat(block_coords, group, axis=0)
    ranges = {}
    for dim, pieces in scatter.cuts:
        axis = axes[dim]
        out_counts[axis] *= pieces
        fine_coords[:, axis] = fine_coords[:, axis] * pieces + np.tile(positions[dim], nb)
        ranges[dim] = tuple((start + lo, start + hi) for start, stop in builder.ranges[dim]
                            for lo, hi in piece_bounds(stop - start, dim, scatter))
    new_flat = (np.ravel_multi_index(tuple(fine_coords.T), out_counts) if output
                else np.zeros(len(fine_coords), np.int64))
    ids = np.empty(math.prod(out_counts), np.int64)
    ids[new_flat] = current
    return ids.reshape(out_counts), new_flat, ranges
