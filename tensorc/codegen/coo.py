"""Sparse blocks in coordinate form: the one value type sparse operands, sparse block
kernels and sparse results share.

Contract: a :class:`CooData` is a sparse array (a whole operand, or one block of one) as
``int64`` coordinates, one row per dimension, and a value per non-zero. Canonical form —
what every producer here returns — is sorted in row-major order with no repeated
coordinate and no stored zero; :func:`sort_and_sum` makes any coordinates canonical in one
vectorised pass (a sort by the row-major position only when the positions are not already
increasing, repeated coordinates summed with ``np.add.reduceat``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

INDEX = np.int64
"""The dtype of coordinates inside tensorc."""


@dataclass(frozen=True)
class CooData:
    """A sparse array or block in coordinate form (see the module docstring)."""

    shape: tuple[int, ...]
    coords: np.ndarray
    """``(ndim, nnz)`` ``int64`` coordinates."""
    values: np.ndarray

    @property
    def nnz(self) -> int:
        return int(self.values.shape[0])

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return self.coords.nbytes + self.values.nbytes

    def density(self) -> float:
        size = math.prod(self.shape)
        return self.nnz / size if size else 0.0

    def astype(self, dtype) -> CooData:
        if self.values.dtype == dtype:
            return self
        return CooData(self.shape, self.coords, self.values.astype(dtype))

    def without_zeros(self) -> CooData:
        """The same entries without those whose value is 0 (itself when there are none)."""
        keep = self.values != 0
        if keep.all():
            return self
        return CooData(self.shape, self.coords[:, keep], self.values[keep])

    def todense(self, out: np.ndarray | None = None) -> np.ndarray:
        """The dense block (only ever for a block of a dense result)."""
        if out is None:
            out = np.zeros(self.shape, dtype=self.dtype)
        else:
            out[...] = 0
        if self.nnz:
            np.add.at(out, tuple(self.coords), self.values)
        return out


def empty(shape: tuple[int, ...], dtype) -> CooData:
    return CooData(tuple(shape), np.zeros((len(shape), 0), INDEX), np.zeros(0, dtype))


def linear_index(coords: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """Row-major linear positions of ``coords`` in ``shape``, or ``None`` when the shape
    has more elements than ``int64`` counts."""
    if math.prod(shape) >= 2**63 - 1:
        return None
    if not shape:
        return np.zeros(coords.shape[1], dtype=INDEX)
    return np.ravel_multi_index(tuple(coords), shape).astype(INDEX, copy=False)


def sort_and_sum(shape: tuple[int, ...], coords: np.ndarray, values: np.ndarray,
                 *, drop_zeros: bool = True) -> CooData:
    """Canonical form of coordinates that may be unsorted and repeat: sorted row-major,
    repeated coordinates summed (in ``values``' dtype), zeros dropped."""
    shape = tuple(int(d) for d in shape)
    coords = np.asarray(coords, dtype=INDEX).reshape(len(shape), -1)
    values = np.asarray(values)
    if values.shape[0] > 1:
        keys = linear_index(coords, shape)
        if keys is None:
            order = np.lexsort(coords[::-1])
            ordered = coords[:, order]
            new = np.any(ordered[:, 1:] != ordered[:, :-1], axis=0)
        else:
            order = None if np.all(keys[1:] > keys[:-1]) else np.argsort(keys, kind="stable")
            ordered_keys = keys if order is None else keys[order]
            new = ordered_keys[1:] != ordered_keys[:-1]
        if order is not None:
            coords, values = coords[:, order], values[order]
        if not new.all():
            starts = np.flatnonzero(np.concatenate(([True], new)))
            coords = coords[:, starts]
            values = np.add.reduceat(values, starts).astype(values.dtype, copy=False)
    if drop_zeros and values.shape[0]:
        keep = values != 0
        if not keep.all():
            coords, values = coords[:, keep], values[keep]
    return CooData(shape, np.ascontiguousarray(coords), values)
