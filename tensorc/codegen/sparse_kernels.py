"""Sparse block kernels: the callables the tasks of a sparse statement run.

A sparse block is a :class:`~tensorc.codegen.coo.CooData` (n-d, canonical) or a scipy
``csr_array`` (2-d, where a scipy kernel made or wants one); a dense block is an ndarray.
Every kernel is ``kernel(*blocks, out=None)`` like the dense ones
(:mod:`tensorc.codegen.kernels`): a block of a dense result is written into ``out`` when
given, a block of a sparse result is returned sparse. A sparse operand is never densified;
only a block of a *dense* result is ever made dense. Which kernel runs a step
(:func:`step_kernel`), and the library behind it:

- :class:`SparseMatmul` — a matrix product of two blocks, at least one sparse (SpMV, SpMM,
  SpGEMM, any transposes): ``scipy.sparse`` CSR/CSC ``@`` (dense or CSR); a CSR block
  times a dense matrix in float32/float64 as a compiled row loop instead
  (:mod:`~tensorc.codegen.sparse_loops`: the GIL released, so row blocks run side by side).
  In a sparse × sparse product a block whose dense form takes at most twice the memory of
  its compressed one (about a third full, or more) is multiplied as a dense one when the
  product fits in 64 MiB and both blocks' values are finite (``_dense_if_full``; a sparse
  result is still returned sparse): one block at a time, while its task runs, so a sparse
  operand as a whole is never densified.
- :class:`GatherScatter` — one sparse block times any dense blocks (MTTKRP
  ``ijk,jf,kf->if``, sampled products ``ij,ik,jk->ij``, scaling ``ij,j->ij``, reductions
  ``ij->i``): each non-zero gathers the dense rows it meets, the rows are multiplied (a
  broadcast product, or one opt_einsum expression when dense indices contract among
  themselves), and the products are summed into the non-zeros' output positions over
  sorted segments (``np.add.reduceat``). No library has this fused loop (pydata's
  ``einsum`` forms the whole outer product, scipy has no n-d arrays), so tensorc has it.
  Its commonest shape (one or two dense matrices gathered by one sparse index each, a
  dense result over one sparse and one free index: MTTKRP in any mode) runs as one
  compiled loop instead
  (:mod:`~tensorc.codegen.sparse_loops`: no sort, no per-non-zero temporaries), and so
  does the sampled product (``ij,if,jf->ij``: two dense matrices gathered by the two sparse
  indices, their shared index summed, the result on the sparse block's own pattern).
- :class:`PydataEinsum` — anything else with two or more sparse blocks (element-wise
  products of sparse arrays, batched or n-d sparse contractions): pydata
  ``sparse.einsum``.
- :class:`SparseReduce` — the sum of the partial blocks of one output block: sparse
  partials stay sparse for a sparse result (scipy's CSR addition, or coordinates
  concatenated and summed), and are added into the dense block of a dense result.
- :class:`SparseLoad` — one block of a sparse operand (its coordinates and values, or a
  CSR view of its rows), the
  diagonal a repeated index asks for, cast to the compute dtype, in the format its consumer
  takes (``"coo"`` or ``"csr"``; ``"native"``: as the operand holds it, not cast, for the
  sampled product's CSR loop). It ``allocates`` its block: the memory model counts it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import opt_einsum as oe
import scipy.sparse as sp

from tensorc.codegen import sparse_loops
from tensorc.codegen.coo import INDEX, CooData, empty, linear_index, sort_and_sum
from tensorc.codegen.kernels import equation

GATHER_ELEMENTS = 1 << 17
"""Elements of one gathered chunk (non-zeros × dense row length): the temporaries of
:class:`GatherScatter` are a few 1 MB arrays whatever the block's non-zeros (cache-sized
chunks measured faster than 8 or 32 MB ones)."""


def is_sparse_block(block: object) -> bool:
    return isinstance(block, CooData) or sp.issparse(block)


def coo_of(block: object) -> CooData:
    """A sparse block (``CooData``, scipy or pydata) in canonical coordinate form."""
    if isinstance(block, CooData):
        return block
    shape = tuple(int(d) for d in block.shape)
    if sp.issparse(block):
        coo = block.tocoo()
        coords = np.stack([np.asarray(c, dtype=INDEX) for c in coo.coords]) if shape else (
            np.zeros((0, coo.nnz), INDEX))
        canonical = block.format == "csr" and block.has_canonical_format
        if canonical:
            return CooData(shape, coords, coo.data)
        return sort_and_sum(shape, coords, coo.data)
    return sort_and_sum(shape, np.asarray(block.coords), np.asarray(block.data))


def csr_of(block: object) -> sp.csr_array:
    """A 2-d sparse block as a scipy ``csr_array`` (built from sorted coordinates in one
    pass, no sort)."""
    if sp.issparse(block):
        return block if block.format == "csr" else block.tocsr()
    coo = coo_of(block)
    rows, columns = coo.coords
    indptr = np.zeros(coo.shape[0] + 1, dtype=INDEX)
    np.cumsum(np.bincount(rows, minlength=coo.shape[0]), out=indptr[1:])
    return sp.csr_array((coo.values, columns, indptr), shape=coo.shape)


def from_dense(block: np.ndarray) -> CooData:
    """The non-zeros of a dense block (a partial of a sparse result made by a kernel with
    dense operands)."""
    block = np.asarray(block)
    coords = np.stack(np.nonzero(block)).astype(INDEX) if block.ndim else np.zeros(
        (0, int(block != 0)), INDEX)
    return CooData(block.shape, coords, block[tuple(coords)] if block.ndim else (
        block.reshape(1)[: coords.shape[1]]))


def add_into(target: np.ndarray, block: object) -> None:
    """``target += block`` for a dense target and a sparse or dense block."""
    if not is_sparse_block(block):
        target += block
        return
    coo = coo_of(block)
    if not coo.nnz:
        return
    if target.ndim == 0:
        target[...] += coo.values.sum()
    elif target.flags.c_contiguous:
        np.add.at(target.reshape(-1), linear_index(coo.coords, coo.shape), coo.values)
    else:
        np.add.at(target, tuple(coo.coords), coo.values)


def deliver(result: object, sparse_out: bool, out: np.ndarray | None, dtype) -> object:
    """A kernel's result as its task must hand it on: sparse (``CooData`` or CSR) for a
    sparse result, else dense, written into ``out`` when given."""
    if sparse_out:
        if isinstance(result, CooData):
            return result.astype(dtype)
        if sp.issparse(result):
            result = result.tocsr() if result.ndim == 2 else coo_of(result)
            return result.astype(dtype) if result.dtype != dtype else result
        return from_dense(np.asarray(result, dtype=dtype))
    if is_sparse_block(result):
        if out is None:
            out = np.zeros(result.shape, dtype=dtype)
        else:
            out[...] = 0
        add_into(out, result)
        return out
    if out is None:
        return np.asarray(result, dtype=dtype)
    np.copyto(out, result, casting="unsafe")
    return out


NATIVE = "native"
"""The load format of a block read as its operand holds it (:class:`SparseLoad`)."""


class SparseLoad:
    """One block of a sparse operand (see the module docstring). ``diagonal``: for a scan
    that repeats an index, the operand dimensions of each distinct index (first occurrence
    order); entries off the diagonal are dropped."""

    __slots__ = ("fmt", "dtype", "diagonal", "compact")
    allocates = True

    def __init__(self, fmt: str, dtype, diagonal: tuple[tuple[int, ...], ...] | None) -> None:
        self.fmt = fmt
        self.dtype = np.dtype(dtype)
        self.diagonal = diagonal
        self.compact = False

    def copies(self, operand, slices) -> bool:
        return False

    def identity(self, dtype) -> bool:
        return False

    def __call__(self, operand, slices: tuple[slice, ...], out=None) -> object:
        block = operand.block(slices)  # a CooData, or a CSR view of a CSR operand's rows
        if self.fmt == NATIVE and self.diagonal is None and out is None:
            return block  # its consumer reads it as it is (no conversion, no cast)
        if block.dtype != self.dtype:
            block = block.astype(self.dtype)
        if self.diagonal is not None:
            block = _diagonal(coo_of(block), self.diagonal)
        if out is not None:
            return deliver(block, False, out, self.dtype)
        return csr_of(block) if self.fmt == "csr" else coo_of(block)


def _diagonal(block: CooData, groups: tuple[tuple[int, ...], ...]) -> CooData:
    keep = np.ones(block.nnz, dtype=bool)
    for group in groups:
        for other in group[1:]:
            keep &= block.coords[group[0]] == block.coords[other]
    firsts = [group[0] for group in groups]
    return CooData(tuple(block.shape[d] for d in firsts), block.coords[firsts][:, keep],
                   block.values[keep])


# -- matrix products (scipy.sparse) ----------------------------------------------------------

def matmul_layout(keys: Sequence[Sequence[str]], output: Sequence[str],
                  sparse: Sequence[bool]) -> tuple[bool, bool, bool] | None:
    """``(transpose a, transpose b, transpose result)`` when the step ``keys -> output`` is
    one matrix product ``op(a) @ op(b)`` (vectors allowed, sparse operands 2-d), else
    ``None``."""
    if len(keys) != 2:
        return None
    a, b = (tuple(k) for k in keys)
    if any(len(k) not in (1, 2) for k in (a, b)) or any(
            s and len(k) != 2 for k, s in zip((a, b), sparse, strict=True)):
        return None
    shared = [n for n in a if n in b]
    if len(shared) != 1 or shared[0] in output:
        return None
    inner = shared[0]
    free_a = tuple(n for n in a if n != inner)
    free_b = tuple(n for n in b if n != inner)
    output = tuple(output)
    if not free_a + free_b or sorted(output) != sorted(free_a + free_b):
        return None
    return (len(a) == 2 and a[1] != inner, len(b) == 2 and b[0] != inner,
            len(output) == 2 and output != free_a + free_b)


class SparseMatmul:
    """``op(a) @ op(b)`` with scipy (see :func:`matmul_layout`): a sparse left operand is
    CSR (its transpose a CSC view), a dense left operand is turned round so the sparse one
    leads (``(Bᵀ Aᵀ)ᵀ``); sparse × sparse is scipy's SpGEMM."""

    __slots__ = ("layout", "sparse_out", "dtype", "formats", "library", "compiled")

    def __init__(self, layout: tuple[bool, bool, bool], sparse: Sequence[bool],
                 sparse_out: bool, dtype) -> None:
        self.layout = layout
        self.sparse_out = sparse_out
        self.dtype = np.dtype(dtype)
        self.formats = tuple("csr" if s else "dense" for s in sparse)
        kind = "SpGEMM" if all(sparse) else "SpMM/SpMV"
        self.library = f"scipy.sparse CSR @ {'CSR' if all(sparse) else 'dense'} ({kind})"
        self.compiled = not all(sparse) and not sparse_out and sparse_loops.served(self.dtype)
        """Whether a CSR block times a dense matrix runs as the compiled row loop."""
        if self.compiled:
            self.library += "; a CSR block times a dense matrix as a compiled row loop"

    def __call__(self, a, b, out=None) -> object:
        transpose_a, transpose_b, transpose_out = self.layout
        left = csr_of(a) if is_sparse_block(a) else a
        right = csr_of(b) if is_sparse_block(b) else b
        left = transposed(left) if transpose_a else left
        right = transposed(right) if transpose_b else right
        if (sp.issparse(left) and sp.issparse(right) and left.ndim == right.ndim == 2
                and _finite(left) and _finite(right)):  # 0 × inf is nan only when dense
            product = (left.shape[0], right.shape[1])
            left, right = _dense_if_full(left, product), _dense_if_full(right, product)
        if (sparse_loops.served(self.dtype) and sp.issparse(left) and left.format == "csr"
                and isinstance(right, np.ndarray) and right.ndim == 2):
            result = sparse_loops.csr_times_dense(left, right, self.dtype)  # GIL released
        elif isinstance(left, np.ndarray) and isinstance(right, np.ndarray):
            result = left @ right  # neither was sparse enough to stay so
        else:
            result = left @ right if sp.issparse(left) else (right.T @ left.T).T
        if transpose_out:
            result = result.T
        if self.sparse_out and isinstance(result, np.ndarray) and result.ndim == 2:
            result = _compressed(result)
        return deliver(result, self.sparse_out, out, self.dtype)

    def __repr__(self) -> str:
        return f"SparseMatmul({self.library})"


def transposed(value):
    """``value.T``; a CSR or CSC block's as the other format over the same arrays. scipy's
    ``.T`` goes through its constructor, which copies an index or value array under half of
    the array it views (``prune``): a row block of a larger matrix was copied on every
    transposed product (1.5 ms of a 7.5 ms PageRank step on a million edges)."""
    if not (sp.issparse(value) and value.format in ("csr", "csc")):
        return value.T
    arrays = isinstance(value, sp.sparray)
    kind = {("csr", True): sp.csc_array, ("csr", False): sp.csc_matrix,
            ("csc", True): sp.csr_array, ("csc", False): sp.csr_matrix}[value.format, arrays]
    flipped = kind(value.shape[::-1], dtype=value.dtype)
    flipped.indptr, flipped.indices, flipped.data = value.indptr, value.indices, value.data
    flipped.has_sorted_indices = bool(value.has_sorted_indices)
    flipped.has_canonical_format = bool(value.has_canonical_format)
    return flipped


DENSE_BLOCK_BYTES = 64 * 2**20
"""The most a block made dense in a sparse × sparse product (:func:`_dense_if_full`), and
the dense product it makes, may take."""


def _compressed(dense: np.ndarray) -> sp.csr_array:
    """A dense product block as the CSR block of its non-zeros: the compiled two-pass copy
    (GIL released) for a dtype the loops serve, scipy's own conversion for the others."""
    if not sparse_loops.served(dense.dtype):
        return sp.csr_array(dense)
    indptr, indices, data = sparse_loops.dense_to_csr(dense)
    block = sp.csr_array((data, indices, indptr), shape=dense.shape)
    block.has_sorted_indices = True
    block.has_canonical_format = True
    return block


def _finite(block) -> bool:
    """Whether a sparse block's stored values are all finite (a product with a dense
    block, whose zeros are stored, then gives what the sparse product does)."""
    return block.dtype.kind not in "fc" or bool(np.isfinite(block.data).all())


DENSE_BLOCK_FACTOR = 2
"""How many times its compressed bytes a block made dense (:func:`_dense_if_full`) may
take: a third full or more in float64 with 32-bit indices."""


def _dense_if_full(block, product: tuple[int, int]):
    """``block`` as a dense array when that takes at most :data:`DENSE_BLOCK_FACTOR` times
    the bytes of its compressed form and the product (of shape ``product``) fits in
    :data:`DENSE_BLOCK_BYTES`: SpGEMM's accumulator does a dense row's work entry by entry,
    ten times slower than a sparse × dense product (a 64 × 100,000 block of walk counts,
    fully dense, times a million-edge graph: 4.1 s by scipy's SpGEMM, 0.21 s as dense ×
    sparse; half full, in 13 row blocks: 0.78 s against 0.25 s). It is one block, made while
    its task runs, so a sparse operand as a whole is never densified. Else ``block`` as it
    is."""
    rows, cols = block.shape
    itemsize = np.dtype(block.dtype).itemsize
    compressed = block.nnz * (itemsize + block.indices.itemsize) + block.indptr.nbytes
    dense = rows * cols * itemsize
    biggest = max(dense, product[0] * product[1] * itemsize)
    if not dense or dense > DENSE_BLOCK_FACTOR * compressed or biggest > DENSE_BLOCK_BYTES:
        return block
    return block.toarray()


# -- one sparse block times dense blocks ------------------------------------------------------

class GatherScatter:
    """One sparse block times dense blocks, fused (see the module docstring)."""

    __slots__ = ("sparse_position", "dense", "product", "equation", "scatter", "free",
                 "output", "sparse_out", "dtype", "formats", "library", "sparse_key",
                 "compiled", "sampled")

    def __init__(self, keys: Sequence[Sequence[str]], sparse_position: int,
                 output: Sequence[str], sparse_out: bool, dtype) -> None:
        keys = [tuple(k) for k in keys]
        self.sparse_position = sparse_position
        self.sparse_key = sparse_key = keys[sparse_position]
        self.output = tuple(output)
        self.sparse_out = sparse_out
        self.dtype = np.dtype(dtype)
        self.free = tuple(n for n in output if n not in sparse_key)
        self.scatter = tuple(sparse_key.index(n) for n in output if n in sparse_key)
        letters = {n: oe.get_symbol(k + 1) for k, n in enumerate(dict.fromkeys(
            n for key in keys for n in key))}
        nnz = oe.get_symbol(0)
        self.dense = []  # (position, gathered sparse dims, transpose, label)
        terms = [nnz]
        for position, key in enumerate(keys):
            if position == sparse_position:
                continue
            gathered = tuple(n for n in key if n in sparse_key)
            rest = tuple(n for n in key if n not in sparse_key)
            transpose = tuple(key.index(n) for n in (*gathered, *rest))
            label = (nnz if gathered else "") + "".join(letters[n] for n in rest)
            self.dense.append((position, tuple(sparse_key.index(n) for n in gathered),
                               transpose, label, rest))
            terms.append(label)
        free_label = "".join(letters[n] for n in self.free)
        self.equation = ",".join(terms) + "->" + nnz + free_label
        self.product = all(set(rest) <= set(self.free) for *_, rest in self.dense)
        self.compiled = (not sparse_out and self.product and len(self.scatter) == 1
                         and len(self.free) == 1 and 1 <= len(self.dense) <= 2
                         and sparse_loops.served(self.dtype)
                         and all(len(dims) == 1 and rest == self.free
                                 for _, dims, _, _, rest in self.dense))
        """Whether calls run :mod:`~tensorc.codegen.sparse_loops`' compiled scatter loop: a dense
        result over one sparse and one free index, one or two dense matrices each gathered
        by one sparse index and spanning the free one, in a served dtype."""
        self.sampled = (sparse_out and self.output == sparse_key and not self.free
                        and len(self.dense) == 2 and sparse_loops.served(self.dtype)
                        and len({rest for *_, rest in self.dense}) == 1
                        and all(len(dims) == 1 and len(rest) == 1
                                for _, dims, _, _, rest in self.dense)
                        and self.dense[0][1] != self.dense[1][1])
        """Whether calls run the compiled sampled product: the result on the sparse block's
        pattern, each dense matrix gathered by one sparse index, one shared index summed."""
        self.formats = tuple((NATIVE if self.sampled else "coo") if k == sparse_position
                             else "dense" for k in range(len(keys)))
        self.library = ("tensorc gather-scatter (compiled loop)" if self.compiled
                        else "tensorc sampled product (compiled loop)" if self.sampled
                        else "tensorc gather-scatter (fused, numpy)")

    def _rows(self, values: np.ndarray, coords: np.ndarray, dense: list[np.ndarray],
              free_shape: tuple[int, ...]) -> np.ndarray:
        """The products of one chunk of non-zeros: ``(chunk, *free extents)``."""
        operands = [values]
        for (_, dims, _, _, _), block in zip(self.dense, dense, strict=True):
            operands.append(block[tuple(coords[d] for d in dims)] if dims else block)
        if not self.product:
            return oe.contract(self.equation, *operands, optimize="greedy")
        inputs, target = self.equation.split("->")
        result = np.empty((len(values), *free_shape), dtype=self.dtype)
        result[...] = _aligned(values, target[0], target)
        for label, operand in zip(inputs.split(",")[1:], operands[1:], strict=True):
            np.multiply(result, _aligned(operand, label, target), out=result)
        return result

    def __call__(self, *blocks, out=None) -> object:
        dense = []
        for position, _, transpose, _, _ in self.dense:
            block = np.asarray(blocks[position])
            dense.append(block.transpose(transpose) if transpose != tuple(range(block.ndim))
                         else block)
        raw = blocks[self.sparse_position]
        if self.sampled and sp.issparse(raw) and raw.format == "csr":
            return self._sampled_rows(raw, dense)
        sparse = coo_of(raw).astype(self.dtype)
        out_shape = self._out_shape(sparse, dense)
        if self.compiled:
            return self._scatter_compiled(sparse, dense, out_shape, out)
        if self.sampled:
            return self._sampled(sparse, dense)
        free_shape = tuple(out_shape[self.output.index(n)] for n in self.free)
        scatter_shape = tuple(sparse.shape[d] for d in self.scatter)
        coords, values = sparse.coords, sparse.values
        keys = (linear_index(coords[list(self.scatter)], scatter_shape) if self.scatter
                else np.zeros(len(values), INDEX))
        if keys is not None and len(keys) > 1 and not np.all(keys[1:] >= keys[:-1]):
            order = np.argsort(keys, kind="stable")
            keys, coords, values = keys[order], coords[:, order], values[order]
        row = max(1, math.prod(free_shape))
        chunk = max(1, GATHER_ELEMENTS // row)
        parts: list[tuple[np.ndarray, np.ndarray]] = []
        for start in range(0, len(values), chunk):
            stop = min(start + chunk, len(values))
            rows = np.asarray(self._rows(values[start:stop], coords[:, start:stop], dense,
                                         free_shape), dtype=self.dtype)
            rows = rows.reshape(stop - start, *free_shape)
            segment = keys[start:stop]
            starts = np.flatnonzero(np.concatenate(([True], segment[1:] != segment[:-1])))
            parts.append((segment[starts], np.add.reduceat(rows, starts, axis=0).astype(
                self.dtype, copy=False)))
        if self.sparse_out:
            return self._sparse(parts, out_shape, scatter_shape, free_shape)
        target = self._zeroed(out_shape, out)
        order = [self.output.index(n) for n in self.output if n in self.sparse_key] + [
            self.output.index(n) for n in self.free]
        view = target.transpose(order) if order != list(range(target.ndim)) else target
        for unique, sums in parts:
            if self.scatter:
                view[np.unravel_index(unique, scatter_shape)] += sums
            else:
                view += sums.sum(axis=0)
        return target

    def _scatter_compiled(self, sparse: CooData, dense: list[np.ndarray], out_shape,
                          out) -> np.ndarray:
        """The result by the compiled scatter loop (no sort, no per-non-zero temporaries)."""
        target = self._zeroed(out_shape, out)
        view = target if self.output.index(self.free[0]) == 1 else target.T
        coords = sparse.coords
        factors = [(coords[dims[0]], np.asarray(block, dtype=self.dtype))
                   for (_, dims, _, _, _), block in zip(self.dense, dense, strict=True)]
        sparse_loops.scatter_products(view, coords[self.scatter[0]], sparse.values, factors)
        return target

    def _sampled(self, sparse: CooData, dense: list[np.ndarray]) -> CooData:
        """The sampled product on the block's own pattern (zeros it makes dropped)."""
        (_, (d0,), _, _, _), (_, (d1,), _, _, _) = self.dense
        coords = sparse.coords
        values = sparse_loops.sampled_dots(sparse.values, coords[d0], coords[d1], dense[0],
                                           dense[1])
        return CooData(sparse.shape, coords, values).without_zeros()

    def _sampled_rows(self, block, dense: list[np.ndarray]) -> sp.csr_array:
        """The sampled product of a CSR block: its row pointers and column indices shared
        with the result, only the values made (zeros it makes dropped). scipy's COO of the
        block, coordinates widened to 64 bits and values converted took five times the
        result's values in temporaries."""
        (_, (d0,), _, _, _), _ = self.dense  # the dense matrix gathered by block rows
        by_row, by_column = (dense[0], dense[1]) if d0 == 0 else (dense[1], dense[0])
        values = sparse_loops.sampled_rows(block, by_row, by_column, self.dtype)
        if values.all():  # the operand's own index arrays, read-only views of them
            indptr, indices = block.indptr.view(), block.indices.view()
            indptr.flags.writeable = indices.flags.writeable = False
        else:  # made zeros: the result's own arrays, without them
            kept = values != 0
            before = np.zeros(kept.size + 1, block.indptr.dtype)
            np.cumsum(kept, out=before[1:])
            indptr, indices, values = before[block.indptr], block.indices[kept], values[kept]
        result = sp.csr_array(block.shape, dtype=self.dtype)
        result.indptr, result.indices, result.data = indptr, indices, values
        result.has_sorted_indices = bool(block.has_sorted_indices)
        return result

    def _zeroed(self, out_shape, out) -> np.ndarray:
        """The dense result's array, zeroed: ``out`` when given, else a new one."""
        if out is None:
            return np.zeros(out_shape, self.dtype)
        out[...] = 0
        return out

    def _out_shape(self, sparse: CooData, dense: list[np.ndarray]) -> tuple[int, ...]:
        extents = dict(zip(self.sparse_key, sparse.shape, strict=True))
        for (_, _, _, _, rest), block in zip(self.dense, dense, strict=True):
            extents.update(zip(rest, block.shape[block.ndim - len(rest):], strict=True))
        return tuple(extents[n] for n in self.output)

    def _sparse(self, parts, out_shape, scatter_shape, free_shape) -> CooData:
        if not parts:
            return empty(out_shape, self.dtype)
        unique = np.concatenate([u for u, _ in parts])
        sums = np.concatenate([s for _, s in parts])
        if len(parts) > 1:  # a segment cut by a chunk boundary is summed here
            starts = np.flatnonzero(np.concatenate(([True], unique[1:] != unique[:-1])))
            unique, sums = unique[starts], np.add.reduceat(sums, starts, axis=0)
        scattered = (np.stack(np.unravel_index(unique, scatter_shape)).astype(INDEX)
                     if self.scatter else np.zeros((0, len(unique)), INDEX))
        free_count = math.prod(free_shape)
        free = (np.stack(np.unravel_index(np.arange(free_count), free_shape)).astype(INDEX)
                if free_shape else np.zeros((0, 1), INDEX))
        columns = {}
        for k, d in enumerate(self.scatter):
            columns[self.sparse_key[d]] = np.repeat(scattered[k], free_count)
        for k, n in enumerate(self.free):
            columns[n] = np.tile(free[k], len(unique))
        coords = np.stack([columns[n] for n in self.output]) if self.output else np.zeros(
            (0, len(unique) * free_count), INDEX)
        return sort_and_sum(out_shape, coords, sums.reshape(-1))

    def __repr__(self) -> str:
        return f"GatherScatter({self.equation!r})"


def _aligned(operand: np.ndarray, label: str, target: str) -> np.ndarray:
    """``operand`` labelled ``label`` viewed with ``target``'s axes (size 1 where absent)."""
    order = sorted(range(len(label)), key=lambda k: target.index(label[k]))
    view = operand.transpose(order) if order != list(range(len(label))) else operand
    present = sorted(label, key=target.index)
    shape = [1] * len(target)
    for letter, extent in zip(present, view.shape, strict=True):
        shape[target.index(letter)] = extent
    return view.reshape(shape)


# -- the general case (pydata sparse) ---------------------------------------------------------

class PydataEinsum:
    """Any step over two or more sparse blocks that is not a matrix product: pydata
    ``sparse.einsum`` on the blocks (sparse blocks as pydata ``COO``, dense ones as they
    are)."""

    __slots__ = ("equation", "sparse_out", "dtype", "formats", "library")

    def __init__(self, keys: Sequence[Sequence[str]], output: Sequence[str],
                 sparse: Sequence[bool], sparse_out: bool, dtype) -> None:
        self.equation = equation(keys, output)
        self.sparse_out = sparse_out
        self.dtype = np.dtype(dtype)
        self.formats = tuple("coo" if s else "dense" for s in sparse)
        self.library = "pydata sparse.einsum"

    def __call__(self, *blocks, out=None) -> object:
        import sparse as pydata  # numba: loaded only when a step needs it

        operands = []
        for block in blocks:
            if is_sparse_block(block):
                coo = coo_of(block)
                block = pydata.COO(coo.coords, coo.values, shape=coo.shape,
                                   has_duplicates=False, sorted=True)
            operands.append(block)
        result = pydata.einsum(self.equation, *operands)
        if isinstance(result, pydata.SparseArray):
            if result.ndim:
                result = coo_of(result)
            else:  # a 0-d result may be held as the fill value
                result = np.asarray(result.data[0] if result.nnz else result.fill_value,
                                    dtype=self.dtype)
        return deliver(result, self.sparse_out, out, self.dtype)

    def __repr__(self) -> str:
        return f"PydataEinsum({self.equation!r})"


# -- reductions -------------------------------------------------------------------------------

class SparseReduce:
    """The sum of the partial blocks of one output block (see the module docstring)."""

    __slots__ = ("sparse_out", "dtype")

    def __init__(self, sparse_out: bool, dtype) -> None:
        self.sparse_out = sparse_out
        self.dtype = np.dtype(dtype)

    def __call__(self, *blocks, out=None) -> object:
        if not self.sparse_out:
            target = np.zeros(blocks[0].shape, self.dtype) if out is None else out
            if out is not None:
                target[...] = 0
            for block in blocks:
                add_into(target, block)
            return target
        if all(sp.issparse(b) and b.ndim == 2 for b in blocks):
            parts = list(blocks)
            while len(parts) > 1:  # pairwise, so each entry is copied log(k) times
                parts = [parts[k] + parts[k + 1] if k + 1 < len(parts) else parts[k]
                         for k in range(0, len(parts), 2)]
            return csr_of(parts[0]).astype(self.dtype)
        coos = [coo_of(b) if is_sparse_block(b) else from_dense(b) for b in blocks]
        return sort_and_sum(coos[0].shape, np.concatenate([c.coords for c in coos], axis=1),
                            np.concatenate([c.values for c in coos]).astype(self.dtype))


def scipy_holds(dtype) -> bool:
    """Whether scipy.sparse arrays hold ``dtype`` (not float16)."""
    return np.dtype(dtype).kind in "biuc" or np.dtype(dtype).itemsize >= 4


def step_kernel(keys: Sequence[Sequence[str]], sparse: Sequence[bool], output: Sequence[str],
                sparse_out: bool, dtype):
    """The kernel of one step over blocks keyed ``keys`` (``sparse``: which are sparse)
    producing a block keyed ``output`` (sparse or dense): a scipy matrix product where the
    step is one (and scipy holds the dtype), the fused gather-scatter when one block is
    sparse, pydata's einsum otherwise."""
    layout = matmul_layout(keys, output, sparse) if scipy_holds(dtype) else None
    if layout is not None:
        return SparseMatmul(layout, sparse, sparse_out, dtype)
    if sum(sparse) == 1:
        return GatherScatter(keys, list(sparse).index(True), output, sparse_out, dtype)
    return PydataEinsum(keys, output, sparse, sparse_out, dtype)
