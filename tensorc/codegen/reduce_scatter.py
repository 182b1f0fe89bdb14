"""A reduction finished as a reduce-scatter: the partial blocks of one output block, made on
the ``g`` nodes of a group, are summed by recursive splitting, and each node of the group
ends with ``1 / g`` of the block.

Contract: a :class:`Scatter` names the output index the pieces cut (``dim``) and the summed
indices the plan's grid splits over nodes (``axes``, with the nodes along each; ``g`` is
their product). :func:`lower_scatter` is the lowering of a stage's reduce under it
(:func:`tensorc.codegen.lower.lower_to_tasks` calls it for the statement's last stage when
given one). A partial's *member* is its coordinates modulo the nodes along ``axes`` (mixed
radix, the first axis most significant): the node of the group that the plan's grid puts it
on. Tasks, per output block:

- ``fold`` — per member holding several partials, one ``reduce`` of them (none when it holds
  one);
- per *round* (one per prime factor ``q`` of each axis's node count, in :meth:`Scatter.radices`
  order): every member cuts its current piece into ``q`` sub-pieces (``apply`` tasks of
  :class:`PieceBlock`, zero-copy views), and one ``reduce`` per member folds the sub-piece
  its digit names from itself and the ``q - 1`` members that differ from it in that digit
  only (in digit order).

A round cuts a piece of length ``L`` at ``⌊j L / q⌋`` (:func:`member_pieces`), so where ``g``
does not divide a block's length the pieces differ by an element along ``dim``. After the
last round member ``r`` holds the fully reduced piece at position
``Σ_t d_t(r) · g / (q_1 ⋯ q_t)`` of ``g`` along ``dim``; the statement's output is blocked
``g`` times finer along ``dim`` than the stage. Each member
receives ``(1 - 1/g)`` of a block per block, the same total a fold on one node receives,
spread over the group; a node sends and receives ``q - 1`` messages a round, so a group of
4,096 nodes needs 12 rounds, not 4,095 messages per node. Task coordinates are the output
block's and the member's residues along the stage's summed indices (stage dims ``output +
summed``), so the grid places every task of member ``r`` on ``r``'s node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tensorc.codegen.kernels import ReduceBlocks, _finish
from tensorc.codegen.taskgraph import APPLY, REDUCE


def prime_radices(count: int) -> list[int]:
    """The prime factors of ``count``, largest first (a round per factor)."""
    factors, rest, d = [], count, 2
    while d * d <= rest:
        while rest % d == 0:
            factors.append(d)
            rest //= d
        d += 1
    if rest > 1:
        factors.append(rest)
    return sorted(factors, reverse=True)


@dataclass(frozen=True)
class Scatter:
    """How a stage's reduce ends: pieces along output index ``dim``, over the group of nodes
    the summed indices ``axes`` (``((index, nodes), ...)``, each ``nodes > 1``) span."""

    dim: str
    axes: tuple[tuple[str, int], ...]

    @property
    def group(self) -> int:
        return math.prod(p for _, p in self.axes)

    def radices(self) -> list[int]:
        """The rounds' radices: each axis's prime factors, largest first, axes in order."""
        return [q for _, p in self.axes for q in prime_radices(p)]

    def describe(self) -> str:
        over = " x ".join(f"{i}:{p}" for i, p in self.axes)
        rounds = len(self.radices())
        return (f"reduce-scatter along {self.dim} over {over} ({self.group} pieces a block, "
                f"{rounds} round{'s' if rounds != 1 else ''})")


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


def _digits(group: int, radices: list[int]) -> np.ndarray:
    """``digits[r, t]``: member ``r``'s digit of round ``t`` (the first most significant)."""
    digits = np.zeros((group, len(radices)), np.int64)
    rest = np.arange(group, dtype=np.int64)
    for t in range(len(radices) - 1, -1, -1):
        digits[:, t] = rest % radices[t]
        rest //= radices[t]
    return digits


def piece_positions(scatter: Scatter) -> np.ndarray:
    """Per member, the position (of ``g``) of the piece it ends with."""
    radices = scatter.radices()
    digits = _digits(scatter.group, radices)
    position = np.zeros(scatter.group, np.int64)
    for t, q in enumerate(radices):
        position = position * q + digits[:, t]
    return position


def member_pieces(extent: int, scatter: Scatter) -> np.ndarray:
    """Per member, the ``[lo, hi)`` (relative to its block, along ``dim``) of the piece it
    holds after each round: ``pieces[r, 2 t : 2 t + 2]`` after round ``t``, the last pair
    the final piece (rows in member order). A round cuts a piece of length ``L`` at
    ``⌊j L / q⌋``, so the pieces differ by at most one element along ``dim`` per round."""
    radices = scatter.radices()
    digits = _digits(scatter.group, radices)
    lo = np.zeros(scatter.group, np.int64)
    hi = np.full(scatter.group, extent, np.int64)
    after = []
    for t, q in enumerate(radices):
        length = hi - lo
        lo, hi = lo + digits[:, t] * length // q, lo + (digits[:, t] + 1) * length // q
        after.extend([lo, hi])
    return np.stack(after, axis=1)


def lower_scatter(builder, label: str, scatter: Scatter, all_key, output, summed,
                  coords: np.ndarray, partial_ids: np.ndarray, flat: np.ndarray,
                  shapes: np.ndarray, monoid: str):
    """The reduce of one stage's partials as a reduce-scatter (module contract).

    ``coords`` are the partial tasks' coordinates over ``all_key``, ``flat`` their output
    block (row-major over the output counts), ``shapes`` their block shapes. Returns the ids
    of the final pieces over the finer output grid (row-major), the order they were made in,
    and the output's finer block ranges along ``dim``."""
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
    axis = list(output).index(scatter.dim)
    radices = scatter.radices()
    digits = _digits(group, radices)
    weights = [math.prod(radices[t + 1:]) for t in range(len(radices))]
    members = np.arange(group, dtype=np.int64)
    count = nb * group
    base = np.repeat(np.arange(nb, dtype=np.int64) * group, group)
    lo = np.zeros(count, np.int64)  # the current piece, relative to its block
    hi = row_shapes[:, axis].copy()
    for t, q in enumerate(radices):
        length = hi - lo
        cuts = np.empty((q, count), np.int64)
        bounds = np.stack([(j * length) // q for j in range(q + 1)], axis=1)
        for j in range(q):
            start, stop = bounds[:, j], bounds[:, j + 1]
            pairs, which = np.unique(np.stack([start, stop], axis=1), axis=0,
                                     return_inverse=True)
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
            partner = base + np.tile(members, nb) + (v - digit) * weights[t]
            inputs[:, v] = cuts[digit, partner]
        each = np.arange(count)
        lo, hi = lo + bounds[each, digit], lo + bounds[each, digit + 1]
        row_shapes = row_shapes.copy()
        row_shapes[:, axis] = hi - lo
        elements = row_shapes.prod(axis=1)
        stage = f"{label}.scatter{t}-{builder.digest}"
        builder.stage_dims[stage] = dims
        current = builder.add(stage, REDUCE, fold, row_coords, inputs, row_shapes,
                              elements * itemsize, elements * (q - 1))
    positions = piece_positions(scatter)
    out_counts = list(builder.counts(output))
    out_counts[axis] *= group
    fine_coords = np.repeat(block_coords, group, axis=0)
    fine_coords[:, axis] = fine_coords[:, axis] * group + np.tile(positions, nb)
    new_flat = (np.ravel_multi_index(tuple(fine_coords.T), out_counts) if output
                else np.zeros(len(fine_coords), np.int64))
    ids = np.empty(math.prod(out_counts), np.int64)
    ids[new_flat] = current
    ranges = []
    order = np.argsort(positions)
    for start, stop in builder.ranges[scatter.dim]:
        pieces = member_pieces(stop - start, scatter)
        ranges.extend((start + int(pieces[r, -2]), start + int(pieces[r, -1])) for r in order)
    return ids.reshape(out_counts), new_flat, tuple(ranges)
