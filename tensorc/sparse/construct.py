"""Making sparse arrays: ``tc.sparse.random`` and ``tc.sparse.from_coo``.

Contract:

- :func:`random` draws ``round(density × size)`` distinct positions uniformly (per block when
  ``grid=`` cuts the array: ``round(density × block size)`` in each block, from a generator
  seeded by ``(seed, *block coordinates)``, as ``tc.random`` seeds its blocks) and a value in
  ``[0, 1)`` for each; the same arguments give the same array. It returns a pydata ``COO``
  (``format="gcxs"``: ``GCXS``; ``"csr"``: a scipy ``csr_array``, 2-d only).
- :func:`from_coo` builds a sparse array from coordinates (an ``(ndim, nnz)`` array or one
  integer array per dimension) and values: repeated coordinates are summed, stored zeros
  kept out. Coordinates must be integers of one dtype; one out of bounds (or negative) is
  refused with a :class:`~tensorc.errors.ShapeError` naming the entry, its dimension and the
  shape. ``shape=None`` is the smallest shape that holds every coordinate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tensorc.codegen.coo import INDEX, CooData, sort_and_sum
from tensorc.errors import ShapeError, TypeCheckError
from tensorc.sparse.formats import from_coo_data

FORMATS = {"coo": "coo", "gcxs": "gcxs", "csr": "csr_array"}


def _format(fmt: str, ndim: int) -> str:
    if fmt not in FORMATS:
        raise TypeCheckError(f"format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if fmt == "csr" and ndim != 2:
        raise ShapeError(f"format='csr' makes a 2-d scipy csr_array; the shape has {ndim} "
                         "dimensions (use 'coo' or 'gcxs')")
    return FORMATS[fmt]


def random(shape, density: float, *, seed: int = 0, grid=None, dtype=np.float64,
           format: str = "coo") -> object:
    """A reproducible random sparse array; see the module docstring."""
    shape = (int(shape),) if np.isscalar(shape) else tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ShapeError(f"negative dimensions are not allowed: shape {shape}")
    if not 0.0 <= float(density) <= 1.0:
        raise ShapeError(f"density must be between 0 and 1, got {density!r}")
    dtype = np.dtype(dtype)
    if dtype.kind not in "fc":
        raise TypeCheckError(f"tc.sparse.random makes floating values, not {dtype}")
    fmt = _format(format, len(shape))
    grid = (1,) * len(shape) if grid is None else tuple(int(g) for g in grid)
    if len(grid) != len(shape) or any(g < 1 for g in grid):
        raise ShapeError(f"grid {grid} does not give a positive block count for each of the "
                         f"{len(shape)} dimensions of shape {shape}")
    steps = [max(1, math.ceil(n / g)) for n, g in zip(shape, grid, strict=True)]
    coords, values = [], []
    for block in np.ndindex(*grid):
        starts = [b * s for b, s in zip(block, steps, strict=True)]
        extent = tuple(max(0, min(s, n - a)) for s, n, a in zip(steps, shape, starts,
                                                                strict=True))
        size = math.prod(extent)
        count = round(float(density) * size)
        if not count:
            continue
        rng = np.random.default_rng([int(seed), *block])
        picked = _distinct(rng, size, count)
        local = np.stack(np.unravel_index(picked, extent)).astype(INDEX) if extent else (
            np.zeros((0, count), INDEX))
        coords.append(local + np.asarray(starts, INDEX)[:, None])
        values.append(rng.random(count).astype(dtype))
    if coords:
        data = sort_and_sum(shape, np.concatenate(coords, axis=1), np.concatenate(values))
    else:
        data = CooData(shape, np.zeros((len(shape), 0), INDEX), np.zeros(0, dtype))
    return from_coo_data(data, fmt)


def _distinct(rng: np.random.Generator, size: int, count: int) -> np.ndarray:
    """``count`` distinct integers in ``[0, size)``, sorted, in memory proportional to
    ``count`` (numpy's own choice when they are a quarter of the range or more)."""
    if 4 * count >= size:
        return np.sort(rng.choice(size, size=count, replace=False, shuffle=False))
    picked = np.zeros(0, dtype=INDEX)
    while picked.shape[0] < count:
        draw = rng.integers(0, size, size=int(1.1 * (count - picked.shape[0])) + 16)
        merged = np.sort(np.concatenate((picked, draw)))
        picked = merged[np.concatenate(([True], merged[1:] != merged[:-1]))]
    if picked.shape[0] > count:
        picked = np.sort(rng.choice(picked, size=count, replace=False))
    return picked


def from_coo(coords, values, shape=None, *, format: str = "coo") -> object:
    """A sparse array from coordinates and values; see the module docstring."""
    coords = checked_coords(coords)
    values = np.asarray(values)
    if values.ndim != 1 and not (values.ndim == 0 and coords.shape[1] == 1):
        raise ShapeError(f"values must be one-dimensional (one per coordinate), got shape "
                         f"{values.shape}")
    values = values.reshape(-1)
    if values.shape[0] != coords.shape[1]:
        raise ShapeError(f"{coords.shape[1]} coordinates but {values.shape[0]} values")
    if values.dtype.kind not in "biufc":
        raise TypeCheckError(f"values have dtype {values.dtype}; sparse arrays hold numbers")
    if shape is None:
        shape = tuple(int(row.max()) + 1 if row.size else 0 for row in coords)
    else:
        shape = (int(shape),) if np.isscalar(shape) else tuple(int(d) for d in shape)
    check_bounds(coords, shape)
    return from_coo_data(sort_and_sum(shape, coords, values), _format(format, len(shape)))


def checked_coords(coords) -> np.ndarray:
    """Coordinates as an ``(ndim, nnz)`` ``int64`` array: integers of one dtype."""
    if isinstance(coords, np.ndarray):
        rows = [coords] if coords.ndim == 1 else list(coords)
    elif isinstance(coords, Sequence) and not isinstance(coords, str):
        rows = [np.asarray(row) for row in coords]
    else:
        raise TypeCheckError("coords must be an (ndim, nnz) integer array or one integer "
                             f"array per dimension, got {type(coords).__name__}")
    kinds = {np.asarray(row).dtype for row in rows}
    for dim, row in enumerate(rows):
        row = np.asarray(row)
        if row.ndim != 1:
            raise ShapeError(f"coordinates of dimension {dim} have shape {row.shape}; give "
                             "one integer per entry")
        if row.dtype.kind not in "iu" and row.size:
            raise TypeCheckError(f"coordinates of dimension {dim} have dtype {row.dtype}; "
                                 "coordinates are integers")
    if len(kinds) > 1:
        names = ", ".join(f"{np.asarray(r).dtype} (dimension {d})" for d, r in enumerate(rows))
        raise TypeCheckError(f"coordinates have mixed index dtypes: {names}; give every "
                             "dimension's coordinates one integer dtype")
    lengths = {np.asarray(r).shape[0] for r in rows}
    if len(lengths) > 1:
        raise ShapeError(f"coordinate arrays have different lengths {sorted(lengths)}")
    if not rows:
        return np.zeros((0, 0), INDEX)
    for dim, row in enumerate(rows):
        row = np.asarray(row)
        if row.dtype == np.uint64 and row.size and row.max() > np.iinfo(INDEX).max:
            bad = int(np.argmax(row > np.iinfo(INDEX).max))
            raise ShapeError(f"coordinate {int(row[bad])} of dimension {dim} (entry {bad}) "
                             "is out of bounds")
    return np.stack([np.asarray(r).astype(INDEX) for r in rows])


def check_bounds(coords: np.ndarray, shape: tuple[int, ...]) -> None:
    """Refuse a coordinate outside ``shape`` (the first one found is named)."""
    if coords.shape[0] != len(shape):
        raise ShapeError(f"coordinates have {coords.shape[0]} dimensions but the shape "
                         f"{shape} has {len(shape)}")
    for dim, (row, size) in enumerate(zip(coords, shape, strict=True)):
        bad = (row < 0) | (row >= size)
        if bad.any():
            entry = int(np.argmax(bad))
            raise ShapeError(f"coordinate {int(row[entry])} of dimension {dim} (entry "
                             f"{entry}) is out of bounds for shape {shape}")
