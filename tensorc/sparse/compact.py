"""The compact form of sparse blocks that travel between processes (issue 22, "On Ray"): a
block is its index and value arrays, never a pickled scipy or pydata object graph.

Contract:

- :func:`pack` turns one block a kernel made (a scipy matrix or array, a pydata array, a
  :class:`~tensorc.codegen.coo.CooData` or an ndarray) into a tuple of a tag, its shape and
  numpy arrays: ``("csr", shape, data, indices, indptr)`` for a 2-d scipy block,
  ``("coo", shape, coords, values)`` for any other sparse block, ``("dense", array)``;
  :func:`unpack` gives back a ``csr_array``, a ``CooData`` or the ndarray (the types the
  kernels and :class:`~tensorc.sparse.results.SparseResultSink` take). Ray serialises the
  arrays out of band (no copy on the receiving node).
- :func:`piece` is the part of one cut operand
  (:class:`~tensorc.sparse.blocks.SparseBlocks`, :class:`~tensorc.sparse.blocks.CsrRowBlocks`
  or :class:`~tensorc.sparse.blocks.CsrGridBlocks`, whose piece is in coordinate form)
  a node needs: only the listed non-empty blocks, their entries concatenated into one set of
  arrays. It answers ``block(slices)`` as the whole cut operand does (global slices, the
  block's entries local to it), so the same load kernels read it. It pickles as its arrays
  (``__reduce__``): coordinates, values and the blocks' keys and offsets for a coordinate
  operand; data, column indices, row pointers and each row block's first row for a CSR one.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from tensorc.codegen.coo import INDEX, CooData
from tensorc.codegen.sparse_kernels import coo_of, csr_of
from tensorc.sparse.blocks import CsrGridBlocks, CsrRowBlocks, CutOperand, SparseBlocks

DENSE, CSR, COO = "dense", "csr", "coo"


def pack(block: object) -> tuple:
    """One block as ``(tag, ...arrays)``; see the module docstring."""
    if isinstance(block, np.ndarray) or np.isscalar(block):
        return (DENSE, np.asarray(block))
    if sp.issparse(block) and block.ndim == 2:
        csr = csr_of(block)
        return (CSR, tuple(int(d) for d in csr.shape), csr.data, csr.indices, csr.indptr)
    coo = coo_of(block)
    return (COO, tuple(coo.shape), coo.coords, coo.values)


def unpack(packed: tuple) -> object:
    """The block :func:`pack` packed, as a ``csr_array``, ``CooData`` or ndarray."""
    tag = packed[0]
    if tag == DENSE:
        return packed[1]
    if tag == CSR:
        _, shape, data, indices, indptr = packed
        return sp.csr_array((data, indices, indptr), shape=shape)
    if tag == COO:
        _, shape, coords, values = packed
        return CooData(tuple(shape), coords, values)
    raise ValueError(f"not a packed block: tag {tag!r}")


def packed_bytes(packed: tuple) -> int:
    """The bytes of a packed block's arrays."""
    return sum(int(part.nbytes) for part in packed if isinstance(part, np.ndarray))


class CooPiece(SparseBlocks):
    """Some blocks of a :class:`SparseBlocks` operand (see the module docstring)."""

    def __init__(self, shape, steps, coords: np.ndarray, values: np.ndarray,
                 keys: np.ndarray, offsets: np.ndarray) -> None:  # noqa: D107 - no super()
        self.shape = tuple(int(d) for d in shape)
        self.ndim = len(self.shape)
        self.steps = tuple(int(s) for s in steps)
        self.grid = tuple(max(1, -(-n // s)) for n, s in zip(self.shape, self.steps,
                                                             strict=True))
        self.coords = coords
        self.values = values
        self.dtype = values.dtype
        self.nnz = int(values.shape[0])
        self.ranges = {tuple(int(c) for c in key): (int(a), int(b))
                       for key, a, b in zip(keys.reshape(len(offsets) - 1, self.ndim),
                                            offsets[:-1], offsets[1:], strict=True)}

    def __reduce__(self):
        keys = np.asarray(list(self.ranges), dtype=INDEX).reshape(len(self.ranges), self.ndim)
        offsets = np.asarray([0, *(b for _, b in self.ranges.values())], dtype=INDEX)
        return CooPiece, (self.shape, self.steps, self.coords, self.values, keys, offsets)


class CsrPiece:
    """Some row blocks of a :class:`CsrRowBlocks` operand (see the module docstring)."""

    def __init__(self, shape, step: int, data: np.ndarray, indices: np.ndarray,
                 indptr: np.ndarray, tops: np.ndarray, firsts: np.ndarray) -> None:
        self.shape = tuple(int(d) for d in shape)
        self.ndim = 2
        self.step = int(step)
        self.data, self.indices, self.indptr = data, indices, indptr
        self.dtype = data.dtype
        self.nnz = int(data.shape[0])
        self.tops, self.firsts = tops, firsts
        self._local = {int(top): int(first) for top, first in zip(tops, firsts, strict=True)}

    def __reduce__(self):
        return CsrPiece, (self.shape, self.step, self.data, self.indices, self.indptr,
                          self.tops, self.firsts)

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes + self.indices.nbytes + self.indptr.nbytes)

    def block(self, slices: tuple[slice, ...]) -> sp.csr_array:
        """The rows ``slices[0]`` (a row block this piece holds) as a CSR matrix."""
        top, bottom = slices[0].start, slices[0].stop
        first = self._local.get(top)
        if first is None:
            raise KeyError(f"rows {top}:{bottom} are not in this piece of the operand")
        rows = bottom - top
        pointers = self.indptr[first:first + rows + 1]
        start, stop = int(pointers[0]), int(pointers[-1])
        return sp.csr_array((self.data[start:stop], self.indices[start:stop],
                             pointers - start), shape=(rows, self.shape[1]))


def piece(blocks: CutOperand, keys: list[tuple[int, ...]]) -> CooPiece | CsrPiece:
    """The blocks ``keys`` of a cut operand, in compact form; see the module docstring."""
    keys = sorted(k for k in set(keys) if k in blocks.ranges)
    if isinstance(blocks, CsrRowBlocks):
        return _csr_piece(blocks, keys)
    if isinstance(blocks, CsrGridBlocks):
        return _grid_piece(blocks, keys)
    spans = [blocks.ranges[k] for k in keys]
    lengths = np.asarray([b - a for a, b in spans], dtype=INDEX)
    offsets = np.zeros(len(spans) + 1, dtype=INDEX)
    np.cumsum(lengths, out=offsets[1:])
    take = np.concatenate([np.arange(a, b, dtype=INDEX) for a, b in spans]) if spans else (
        np.zeros(0, INDEX))
    return CooPiece(blocks.shape, blocks.steps, blocks.coords[:, take], blocks.values[take],
                    np.asarray(keys, dtype=INDEX).reshape(len(keys), blocks.ndim), offsets)


def _grid_piece(blocks: CsrGridBlocks, keys: list[tuple[int, ...]]) -> CooPiece:
    """Blocks of a CSR matrix cut by rows and columns, as a coordinate piece (global
    coordinates, each block's entries in canonical row-major order)."""
    coords, values, offsets = [], [], [0]
    for key in keys:
        slices = tuple(slice(c * s, min((c + 1) * s, n))
                       for c, s, n in zip(key, blocks.steps, blocks.shape, strict=True))
        coo = coo_of(blocks.block(slices))  # sorted and summed when the block is not
        coords.append(coo.coords + np.asarray([[s.start] for s in slices], dtype=INDEX))
        values.append(coo.values)
        offsets.append(offsets[-1] + coo.nnz)
    return CooPiece(blocks.shape, blocks.steps,
                    np.concatenate(coords, axis=1) if keys else np.zeros((2, 0), INDEX),
                    np.concatenate(values) if keys else np.zeros(0, blocks.dtype),
                    np.asarray(keys, dtype=INDEX).reshape(len(keys), 2),
                    np.asarray(offsets, dtype=INDEX))


def _csr_piece(blocks: CsrRowBlocks, keys: list[tuple[int, ...]]) -> CsrPiece:
    matrix, step = blocks.matrix, blocks.steps[0]
    rows = blocks.shape[0]
    data, indices, pointers, tops, firsts = [], [], [], [], []
    at, first = 0, 0
    for key in keys:
        top = key[0] * step
        bottom = min(top + step, rows)
        start, stop = int(matrix.indptr[top]), int(matrix.indptr[bottom])
        data.append(matrix.data[start:stop])
        indices.append(matrix.indices[start:stop])
        local = matrix.indptr[top:bottom + 1] - start + at
        pointers.append(local if not pointers else local[1:])
        tops.append(top)
        firsts.append(first)
        first += bottom - top
        at += stop - start
    if not keys:
        return CsrPiece(blocks.shape, step, matrix.data[:0], matrix.indices[:0],
                        np.zeros(1, matrix.indptr.dtype), np.zeros(0, INDEX),
                        np.zeros(0, INDEX))
    return CsrPiece(blocks.shape, step, np.concatenate(data), np.concatenate(indices),
                    np.concatenate(pointers), np.asarray(tops, INDEX),
                    np.asarray(firsts, INDEX))
