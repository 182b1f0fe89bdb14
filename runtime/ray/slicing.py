"""Basic indexing of a blocked array, block by block: no block leaves its node.

Contract: :func:`slice_blocks` takes an array's block boundaries (``Blocks.bounds``) and a
basic index (slices with any step, integers, ``None``, one ``...``) and returns the result's
block boundaries and, for every result block, the one stored block it comes from and the
index that cuts it out of that block. Each result dimension is cut where the stored blocks
are cut, so a result block never spans two stored blocks: it is made on the node holding
its source (or *is* the source, when the index keeps the whole block). Plain data, no Ray.
Returns ``None`` for a key it does not take (anything but the four kinds above, or an
empty result).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

Coords = tuple[int, ...]


@dataclass(frozen=True)
class SlicedBlock:
    """Where one result block comes from: stored block ``source``, cut by ``key`` (a tuple
    of slices, integers and ``None``); ``whole`` when the key keeps that block as it is."""

    source: Coords
    key: tuple
    whole: bool


def _normalised(key: tuple, ndim: int) -> tuple | None:
    """``key`` with ``...`` expanded and trailing dimensions made explicit; ``None`` for a
    key that is not basic (arrays, booleans, several ellipses, too many indices)."""
    items = list(key)
    if any(not isinstance(k, (slice, int)) and k is not None and k is not Ellipsis
           or isinstance(k, bool) for k in items):
        return None
    if sum(1 for k in items if k is Ellipsis) > 1:
        return None
    used = sum(1 for k in items if k is not None and k is not Ellipsis)
    if used > ndim:
        return None
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * (ndim - used)
    else:
        items.extend([slice(None)] * (ndim - used))
    return tuple(items)


def _pieces(edges: Sequence[int], item: slice) -> tuple[int, list[tuple[int, int, int]]]:
    """``(result length, [(first result index, end, stored block)])`` of a slice over one
    dimension cut at ``edges``, in result order."""
    start, stop, step = item.indices(edges[-1])
    count = len(range(start, stop, step))
    pieces = []
    for block in range(len(edges) - 1):
        low, high = edges[block], edges[block + 1]
        if step > 0:  # start + j*step in [low, high)
            first = max(0, -((start - low) // step))
            end = min(count, -((start - high) // step))
        else:
            first = max(0, (start - high) // -step + 1)
            end = min(count, (start - low) // -step + 1)
        if end > first:
            pieces.append((first, end, block))
    pieces.sort()
    return count, pieces


def _local(edges: Sequence[int], item: slice, block: int, first: int, end: int) -> slice:
    """The slice of stored block ``block`` giving result indices ``first:end``."""
    start, _, step = item.indices(edges[-1])
    low = edges[block]
    begin = start + first * step - low
    last = begin + (end - first - 1) * step
    stop = last + (1 if step > 0 else -1)
    return slice(begin, None if stop < 0 else stop, step)


def slice_blocks(bounds: Sequence[Sequence[int]], key: tuple,
                 ) -> tuple[tuple[tuple[int, ...], ...], dict[Coords, SlicedBlock]] | None:
    """The result's block boundaries and the source of each result block (module
    docstring), or ``None``."""
    ndim = len(bounds)
    items = _normalised(key, ndim)
    if items is None:
        return None
    out_bounds: list[tuple[int, ...]] = []
    choices: list[list[tuple]] = []  # per result dimension: (stored dim, block, local index)
    fixed: dict[int, tuple[int, int]] = {}  # stored dim -> (block, local integer index)
    dim = 0
    for item in items:
        if item is None:
            out_bounds.append((0, 1))
            choices.append([(None, None, None)])
            continue
        edges = bounds[dim]
        if isinstance(item, int):
            size = edges[-1]
            index = item + size if item < 0 else item
            if not 0 <= index < size:
                return None
            block = max(b for b in range(len(edges) - 1) if edges[b] <= index)
            fixed[dim] = (block, index - edges[block])
        else:
            count, pieces = _pieces(edges, item)
            if count == 0:
                return None
            out_bounds.append(tuple(first for first, _, _ in pieces) + (count,))
            choices.append([(dim, block, _local(edges, item, block, first, end))
                            for first, end, block in pieces])
        dim += 1
    mapping: dict[Coords, SlicedBlock] = {}
    for picked in itertools.product(*(range(len(c)) for c in choices)):
        source = [0] * ndim
        local: list = [None] * ndim
        for d, (block, index) in fixed.items():
            source[d], local[d] = block, index
        newaxes: list[int] = []
        for position, (d, block, index) in enumerate(
                choices[r][picked[r]] for r in range(len(choices))):
            if d is None:
                newaxes.append(position)
            else:
                source[d], local[d] = block, index
        whole = not fixed and not newaxes and all(
            s.step == 1 and s.start == 0 and s.stop == bounds[d][source[d] + 1]
            - bounds[d][source[d]] for d, s in enumerate(local))
        mapping[picked] = SlicedBlock(tuple(source), _with_newaxes(local, newaxes, items),
                                      whole)
    return tuple(out_bounds), mapping


def _with_newaxes(local: list, newaxes: list[int], items: tuple) -> tuple:
    """The per-block key: the stored dimensions' indices, with ``None`` where the key adds
    an axis (in the key's own order)."""
    if not newaxes:
        return tuple(local)
    out, dim = [], 0
    for item in items:
        if item is None:
            out.append(None)
        else:
            out.append(local[dim])
            dim += 1
    return tuple(out)

