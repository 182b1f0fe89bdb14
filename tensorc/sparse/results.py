"""A sparse result, block by block: the sink the runtime writes the result's blocks into,
and the one sparse array they make.

Contract: :class:`SparseResultSink` is a :class:`~tensorc.stored.BlockSink` that keeps each
final block as it is (sparse, never densified; ``dense = False`` tells the task pool not
to turn blocks into ndarrays). :meth:`SparseResultSink.assemble` returns the result in the
requested format (a :func:`~tensorc.sparse.formats.result_format` name): a 2-d scipy
result is its CSR blocks' rows copied into one CSR (no sort); any other is the
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
        """Blocks of several block columns merged into one CSR, a block column at a time
        from the left (so each row's columns stay sorted where the blocks' are), each
        block dropped once copied:
        the peak is the result and the blocks not yet copied. ``scipy.sparse.block_array``
        went through COO copies of all of them (2.7x the result here)."""
        rows, columns = self.shape
        csrs = sorted(((slices[1].start, slices[0].start, _without_zeros(csr_of(block)))
                       for slices, block in blocks), key=lambda item: item[:2], reverse=True)
        blocks.clear()
        lengths = np.zeros(rows, np.int64)
        for _, top, csr in csrs:
            lengths[top:top + csr.shape[0]] += np.diff(csr.indptr)
        total = int(lengths.sum())
        index = np.int32 if max(total, rows, columns) < 2**31 - 1 else np.int64
        indptr = np.zeros(rows + 1, index)
        np.cumsum(lengths, out=indptr[1:])
        data, indices = np.empty(total, self.dtype), np.empty(total, index)
        filled = indptr[:-1].astype(np.int64)  # where each row's next entry goes
        in_order = all(csr.has_sorted_indices for _, _, csr in csrs)
        while csrs:
            left, top, csr = csrs.pop()
            bottom = top + csr.shape[0]
            counts = np.diff(csr.indptr)
            at = np.repeat(filled[top:bottom] - csr.indptr[:-1], counts)
            at += np.arange(csr.nnz)
            data[at] = csr.data
            indices[at] = csr.indices.astype(index) + left
            filled[top:bottom] += counts
            del csr, at
        kind = sp.csr_matrix if fmt == "csr_matrix" else sp.csr_array
        merged = kind((data, indices, indptr), shape=self.shape)
        merged.has_sorted_indices = in_order  # scipy's SpGEMM leaves each row unsorted
        return merged


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
