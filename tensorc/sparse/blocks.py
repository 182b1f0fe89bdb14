"""A sparse operand cut into blocks: which blocks hold non-zeros, and each block's entries.

:func:`cut` chooses the representation: a scipy CSR matrix cut only by rows stays CSR
(:class:`CsrRowBlocks`: a block is a CSR matrix of its rows' slice of the indices and
values, with no conversion or sort (scipy copies a slice smaller than half the matrix
once), and the non-zeros per block come from ``indptr`` without a pass over the entries);
a CSR matrix cut by columns too stays CSR (:class:`CsrGridBlocks`: scipy's slice of each
block column, made once, then cut by rows the same way: its entries are held once more,
in CSR form, and a block is read with no conversion, where coordinates sorted by block
took twice the bytes and a conversion in every load) unless its block columns' row
pointers together would take more bytes than its entries (a tall, very sparse matrix);
any other operand is cut in coordinate form (:class:`SparseBlocks`).

Contract: ``SparseBlocks(data, steps)`` cuts a canonical :class:`~tensorc.codegen.coo.CooData`
into blocks of ``steps[d]`` along each dimension ``d`` (the last block of a
dimension may be shorter), in one vectorised pass over the coordinates: each non-zero's
block id (``coords // steps``, raveled), a stable sort by block id only when the ids are not
already in order (a cut along the leading dimension of a row-major array never sorts; up to
65,536 blocks the ids sort as 8- or 16-bit integers, which numpy radix-sorts in linear time:
27 ms instead of 63 ms for a million entries here), and
the boundaries where the id changes. Empty blocks are not stored: :attr:`counts` has the
non-zeros of every non-empty block, by block coordinates, and nothing else.

:meth:`block` is what a load task calls (with the block's slices, as for a dense operand):
the block's entries with coordinates local to the block, as a ``CooData``, still sorted
row-major (a stable sort by block keeps the order inside each block). An empty block is a
``CooData`` with no entries.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from tensorc.codegen.coo import INDEX, CooData
from tensorc.sparse.formats import canonical


class CutOperand:
    """A sparse operand cut into blocks (what :func:`cut` returns): every kind answers from
    its ``ranges`` and ``steps`` the entries of each non-empty block and which block a
    task's slices start."""

    ranges: dict[tuple[int, ...], tuple[int, int]]
    steps: tuple[int, ...]

    @property
    def counts(self) -> dict[tuple[int, ...], int]:
        """Stored entries of every non-empty block, by block coordinates."""
        return {key: stop - start for key, (start, stop) in self.ranges.items()}

    def block_of(self, slices: tuple[slice, ...]) -> tuple[int, ...]:
        """The block coordinates of the block starting where ``slices`` start."""
        return tuple(s.start // step for s, step in zip(slices, self.steps, strict=True))


class SparseBlocks(CutOperand):
    """One sparse operand in blocks; see the module docstring."""

    def __init__(self, data: CooData, steps: tuple[int, ...]) -> None:
        self.shape = data.shape
        self.dtype = data.dtype
        self.ndim = data.ndim
        self.steps = tuple(max(1, int(s)) for s in steps)
        self.grid = tuple(max(1, math.ceil(n / s)) for n, s in zip(self.shape, self.steps,
                                                                     strict=True))
        coords, values = data.coords, data.values
        if data.nnz and any(g > 1 for g in self.grid):
            ids = np.zeros(data.nnz, dtype=INDEX)
            stride = 1
            for dim in reversed(range(self.ndim)):  # only cut dimensions cost a pass
                if self.grid[dim] > 1:
                    ids += (coords[dim] // self.steps[dim]) * stride
                stride *= self.grid[dim]
            if not np.all(ids[1:] >= ids[:-1]):
                blocks = math.prod(self.grid)  # few blocks: numpy's stable sort of small
                small = np.uint8 if blocks <= 256 else np.uint16 if blocks <= 65536 else None
                order = np.argsort(ids if small is None else ids.astype(small), kind="stable")
                ids, coords, values = ids[order], coords[:, order], values[order]
            starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
            present = np.unravel_index(ids[starts], self.grid)
        else:
            starts = np.zeros(1 if data.nnz else 0, dtype=INDEX)
            present = tuple(np.zeros(len(starts), dtype=INDEX) for _ in self.shape)
        stops = np.append(starts[1:], data.nnz)[: len(starts)].astype(INDEX)
        self.coords = coords
        self.values = values
        keys = zip(*(p.tolist() for p in present), strict=True) if self.ndim else [()] * len(
            starts)
        self.ranges: dict[tuple[int, ...], tuple[int, int]] = {
            key: (int(a), int(b)) for key, a, b in zip(keys, starts.tolist(), stops.tolist(),
                                                        strict=True)}
        self.nnz = data.nnz

    @property
    def nbytes(self) -> int:
        return self.coords.nbytes + self.values.nbytes

    def block(self, slices: tuple[slice, ...]) -> CooData:
        """The entries of the block ``slices`` cut out, coordinates local to it."""
        shape = tuple(s.stop - s.start for s in slices)
        span = self.ranges.get(self.block_of(slices))
        if span is None:
            return CooData(shape, np.zeros((self.ndim, 0), INDEX), self.values[:0])
        start, stop = span
        coords = self.coords[:, start:stop]
        offsets = np.asarray([s.start for s in slices], dtype=INDEX)
        if offsets.any():
            coords = coords - offsets[:, None]
        return CooData(shape, coords, self.values[start:stop])


class CsrRowBlocks(CutOperand):
    """A scipy CSR matrix cut into blocks of rows; see the module docstring."""

    def __init__(self, matrix: sp.csr_array, step: int) -> None:
        self.matrix = matrix
        self.shape = tuple(int(d) for d in matrix.shape)
        self.dtype = matrix.dtype
        self.ndim = 2
        rows, columns = self.shape
        self.steps = (max(1, int(step)), max(1, columns))
        self.grid = (max(1, math.ceil(rows / self.steps[0])), 1)
        starts = np.arange(0, rows, self.steps[0])
        stops = np.minimum(starts + self.steps[0], rows)
        indptr = matrix.indptr
        counts = indptr[stops] - indptr[starts]
        self.ranges = {(int(b), 0): (int(indptr[a]), int(indptr[z]))
                       for b, (a, z, n) in enumerate(zip(starts, stops, counts, strict=True))
                       if n}
        self.nnz = int(matrix.nnz)

    @property
    def nbytes(self) -> int:
        return self.matrix.data.nbytes + self.matrix.indices.nbytes + self.matrix.indptr.nbytes

    def block(self, slices: tuple[slice, ...]) -> sp.csr_array:
        """The rows ``slices[0]`` as a CSR matrix of the matrix's slice of indices and
        values: views, not copies. scipy's constructor copies a slice under half of its
        array (``prune``: 1.7 ms a PageRank step on a million edges), so the block is made
        empty and given the slices."""
        top, bottom = slices[0].start, slices[0].stop
        matrix = self.matrix
        indptr = matrix.indptr
        start, stop = int(indptr[top]), int(indptr[bottom])
        block = sp.csr_array((bottom - top, self.shape[1]), dtype=matrix.dtype)
        block.indptr = indptr[top:bottom + 1] - start
        block.indices = matrix.indices[start:stop]
        block.data = matrix.data[start:stop]
        block.has_sorted_indices = bool(matrix.has_sorted_indices)
        block.has_canonical_format = bool(matrix.has_canonical_format)
        return block


class CsrGridBlocks(CutOperand):
    """A scipy CSR matrix cut along both dimensions; see the module docstring."""

    def __init__(self, matrix: sp.csr_array, steps: tuple[int, int]) -> None:
        self.shape = tuple(int(d) for d in matrix.shape)
        self.dtype = matrix.dtype
        self.ndim = 2
        rows, columns = self.shape
        self.steps = (max(1, int(steps[0])), max(1, int(steps[1])))
        self.grid = (max(1, math.ceil(rows / self.steps[0])),
                     max(1, math.ceil(columns / self.steps[1])))
        self.columns: list[CsrRowBlocks] = []
        """Each block column: scipy's column slice of the matrix, cut by rows."""
        self.ranges: dict[tuple[int, int], tuple[int, int]] = {}
        for column in range(self.grid[1]):
            left = column * self.steps[1]
            part = CsrRowBlocks(matrix[:, left:min(left + self.steps[1], columns)],
                                self.steps[0])
            self.columns.append(part)
            self.ranges.update({(row, column): span for (row, _), span in part.ranges.items()})
        self.nnz = int(matrix.nnz)

    @property
    def nbytes(self) -> int:
        return sum(part.nbytes for part in self.columns)

    def block(self, slices: tuple[slice, ...]) -> sp.csr_array:
        """The block ``slices`` as a CSR matrix of views into its block column's arrays."""
        return self.columns[slices[1].start // self.steps[1]].block(slices)


def cut(value: CooData | sp.csr_array, steps: tuple[int, ...]) -> CutOperand:
    """``value`` (a :func:`~tensorc.sparse.formats.source`) cut into blocks of ``steps``."""
    if sp.issparse(value):
        if steps[1] >= value.shape[1]:
            return CsrRowBlocks(value, steps[0])
        block_columns = math.ceil(value.shape[1] / max(1, int(steps[1])))
        pointers = block_columns * (value.shape[0] + 1) * value.indptr.itemsize
        if pointers <= value.nnz * (value.data.itemsize + value.indices.itemsize):
            return CsrGridBlocks(value, steps)
        value = canonical(value)  # tall and sparse: a row pointer array per block column
        # would outweigh the entries
    return SparseBlocks(value, steps)
