"""Data-dependent operations in numpy: what both executors run for ``unique_*``, ``nonzero``
and boolean-mask selection, whole or block by block. Plain numpy, no Ray.

Contract (numpy 2's semantics, ``equal_nan=False`` as ``np.unique_values`` and friends):

- :func:`unique_of` — ``np.unique`` of a whole array by ``kind`` (``"values"``, ``"counts"``,
  ``"inverse"``, ``"all"``): values sorted (NaNs last, each NaN its own value), indices of
  first occurrences in C order, the inverse in the array's shape, counts; every index int64;
- block by block (the Ray executor): :func:`unique_part` of each block gives its sorted
  distinct values with the global flat index of their first occurrence and their counts;
  :func:`merge_unique` merges the parts into the whole array's ``(values, indices,
  counts)``, equal to :func:`unique_of`'s; :func:`inverse_part` gives one block's inverse
  indices from the merged values and indices (NaNs numbered by their flat index, as numpy);
- :func:`nonzero_part` — one block's ``np.nonzero`` with the block's offsets added.
"""

from __future__ import annotations

import numpy as np

INDEX = np.dtype("int64")

KINDS = ("values", "counts", "inverse", "all")


def unique_of(array, kind: str) -> tuple[np.ndarray, ...]:
    """``np.unique`` of ``array`` (``equal_nan=False``): ``(values,)``, ``(values, counts)``,
    ``(values, inverse)`` or ``(values, indices, inverse, counts)`` by ``kind``."""
    array = np.asarray(array)
    values, index, inverse, counts = np.unique(array, return_index=True, return_inverse=True,
                                               return_counts=True, equal_nan=False)
    index, counts = index.astype(INDEX), counts.astype(INDEX)
    inverse = inverse.astype(INDEX).reshape(array.shape)
    return {"values": (values,), "counts": (values, counts), "inverse": (values, inverse),
            "all": (values, index, inverse, counts)}[kind]


def flat_index(local_flat: np.ndarray, block_shape, starts, shape) -> np.ndarray:
    """Global C-order flat indices of the block elements at ``local_flat``."""
    if not shape:
        return local_flat.astype(INDEX)
    coords = np.unravel_index(local_flat, tuple(block_shape))
    shifted = tuple(c + s for c, s in zip(coords, starts, strict=True))
    return np.ravel_multi_index(shifted, tuple(shape)).astype(INDEX)


def unique_part(block: np.ndarray, starts, shape) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One block's ``(distinct values, global flat index of each's first occurrence,
    counts)``; ``starts`` is the block's first element in the array of ``shape``."""
    block = np.asarray(block)
    values, first, counts = np.unique(block.ravel(), return_index=True, return_counts=True,
                                      equal_nan=False)
    return values, flat_index(first, block.shape, starts, shape), counts.astype(INDEX)


def merge_unique(parts, dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The whole array's ``(values, indices, counts)`` from its blocks' :func:`unique_part`
    results (in any order)."""
    parts = list(parts)
    if not parts:
        return np.empty(0, dtype), np.empty(0, INDEX), np.empty(0, INDEX)
    values = np.concatenate([p[0] for p in parts]).astype(dtype, copy=False)
    index = np.concatenate([p[1] for p in parts]).astype(INDEX, copy=False)
    counts = np.concatenate([p[2] for p in parts]).astype(INDEX, copy=False)
    if values.size == 0:
        return values, index, counts
    order = np.lexsort((index, values))  # by value (NaNs last), then first occurrence
    values, index, counts = values[order], index[order], counts[order]
    starts = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
    return values[starts], index[starts], np.add.reduceat(counts, starts).astype(INDEX)


def inverse_part(block: np.ndarray, starts, shape, values: np.ndarray,
                 index: np.ndarray) -> np.ndarray:
    """One block's inverse indices into the merged ``values`` (with their first-occurrence
    ``index``): a NaN is the merged NaN with its own flat index, as numpy numbers them."""
    block = np.asarray(block)
    nan = np.isnan(values) if values.dtype.kind in "fc" else np.zeros(values.shape, bool)
    regular = int(values.size - np.count_nonzero(nan))
    out = np.searchsorted(values[:regular], block).astype(INDEX)
    if regular < values.size:
        where = np.isnan(block)
        if where.any():
            flat = flat_index(np.flatnonzero(where), block.shape, starts, shape)
            out[where] = regular + np.searchsorted(index[regular:], flat)
    return out


def nonzero_part(block: np.ndarray, starts) -> tuple[np.ndarray, ...]:
    """``np.nonzero`` of one block, as indices of the whole array (int64)."""
    return tuple((found + start).astype(INDEX)
                 for found, start in zip(np.nonzero(block), starts, strict=True))
