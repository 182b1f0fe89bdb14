"""A sparse result, block by block: the sink the runtime writes the result's blocks into,
and the one sparse array they make.

Contract: :class:`SparseResultSink` is a :class:`~tensorc.stored.BlockSink` that keeps each
final block as it is (sparse, never densified; ``dense = False`` tells the task pool not
to turn blocks into ndarrays). :meth:`SparseResultSink.assemble` returns the result in the
requested format (a :func:`~tensorc.sparse.formats.result_format` name): a 2-d scipy
result is one ``scipy.sparse.block_array`` of the CSR blocks (no sort); any other is the
blocks' coordinates shifted to the whole array and concatenated, sorted only when the blocks
were cut along more than the leading dimension. Stored zeros are dropped. Its collecting
part, :class:`BlockCollector` (the blocks and their slices, nothing assembled), is what a
Ray node's share of a sparse einsum returns from (:mod:`tensorc.sparse.node_run`).
"""

from __future__ import annotations

import threading

import numpy as np
import scipy.sparse as sp

from tensorc.codegen.coo import INDEX, CooData, sort_and_sum
from tensorc.codegen.sparse_kernels import coo_of, csr_of
from tensorc.sparse.formats import from_coo_data
from tensorc.stored import BlockSink


class BlockCollector(BlockSink):
    """Keeps each final block of one result as the kernel made it, with its slices
    (``blocks``, in completion order; written from the pool's threads)."""

    dense = False

    def __init__(self, shape: tuple[int, ...], dtype) -> None:
        self.shape, self.dtype, self.chunks = tuple(shape), np.dtype(dtype), None
        self.blocks: list[tuple[tuple[slice, ...], object]] = []
        self._lock = threading.Lock()

    def open(self, block_shape: tuple[int, ...]) -> None:
        pass

    def write(self, slices: tuple[slice, ...], block: object) -> None:
        with self._lock:
            self.blocks.append((tuple(slices), block))


class SparseResultSink(BlockCollector):
    """Collects the sparse blocks of one result (see the module docstring)."""

    def __init__(self, shape: tuple[int, ...], dtype,
                 bounds: list[list[tuple[int, int]]]) -> None:
        super().__init__(shape, dtype)
        self.bounds = bounds
        """Each dimension's block ranges (the plan's blocking of the result)."""

    def assemble(self, fmt: str) -> object:
        """The whole result as a ``fmt`` sparse array. Each block is dropped as soon as it
        is copied into the result, so the peak is the result and one block."""
        blocks = sorted(self.blocks, key=lambda item: tuple(s.start for s in item[0]),
                        reverse=True)
        self.blocks = []
        if fmt in ("csr_array", "csr_matrix") and len(self.shape) == 2:
            if len(self.bounds[1]) == 1:
                return self._stacked_rows(blocks, fmt)
            return self._csr(blocks, fmt)
        total = sum(block.nnz for _, block in blocks)
        coords = np.empty((len(self.shape), total), INDEX)
        values = np.empty(total, self.dtype)
        at = 0
        while blocks:
            slices, block = blocks.pop()
            coo = coo_of(block)
            del block
            offsets = np.asarray([s.start for s in slices], dtype=INDEX)
            coords[:, at:at + coo.nnz] = coo.coords + offsets[:, None]
            values[at:at + coo.nnz] = coo.values
            at += coo.nnz
        return from_coo_data(sort_and_sum(self.shape, coords, values), fmt)

    def _stacked_rows(self, blocks, fmt: str) -> object:
        """Row blocks (one block column) stacked into one CSR, in one pass."""
        rows, columns = self.shape
        total = sum(block.nnz for _, block in blocks)
        index = np.int32 if max(total, rows, columns) < 2**31 - 1 else np.int64
        data = np.empty(total, self.dtype)
        indices = np.empty(total, index)
        indptr = np.zeros(rows + 1, index)
        at = 0
        by_row = {slices[0].start: block for slices, block in blocks}
        blocks.clear()
        for top, bottom in self.bounds[0]:
            block = by_row.pop(top, None)
            if block is not None:
                csr = _without_zeros(csr_of(block))
                del block
                data[at:at + csr.nnz] = csr.data
                indices[at:at + csr.nnz] = csr.indices
                indptr[top + 1:bottom + 1] = csr.indptr[1:] + at
                at += csr.nnz
                del csr
            else:
                indptr[top + 1:bottom + 1] = at
        kind = sp.csr_matrix if fmt == "csr_matrix" else sp.csr_array
        return kind((data[:at], indices[:at], indptr), shape=self.shape)

    def _csr(self, blocks, fmt: str) -> object:
        rows, columns = self.bounds
        grid = [[None] * len(columns) for _ in rows]
        first_row = {start: k for k, (start, _) in enumerate(rows)}
        first_column = {start: k for k, (start, _) in enumerate(columns)}
        for slices, block in blocks:
            csr = _without_zeros(csr_of(block))
            grid[first_row[slices[0].start]][first_column[slices[1].start]] = csr
        for r, (top, bottom) in enumerate(rows):  # block_array sizes rows by their blocks
            for c, (left, right) in enumerate(columns):
                if grid[r][c] is None:
                    grid[r][c] = sp.csr_array((bottom - top, right - left), dtype=self.dtype)
        result = sp.block_array(grid, format="csr", dtype=self.dtype)
        return sp.csr_matrix(result) if fmt == "csr_matrix" else result


def _without_zeros(csr: sp.csr_array) -> sp.csr_array:
    """``csr`` with its stored zeros dropped: itself when it has none (a block received
    from another process is read-only, and most blocks hold no zero), else a copy when it
    cannot be changed in place."""
    if csr.data.all():
        return csr
    if not (csr.data.flags.writeable and csr.indices.flags.writeable):
        csr = csr.copy()
    csr.eliminate_zeros()
    return csr


def empty_result(shape: tuple[int, ...], dtype, fmt: str) -> object:
    return from_coo_data(CooData(tuple(shape), np.zeros((len(shape), 0), INDEX),
                                 np.zeros(0, dtype)), fmt)
