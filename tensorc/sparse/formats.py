"""Sparse arrays in and out: which objects are sparse, their canonical coordinates, and the
type of a sparse result.

Contract:

- :func:`is_sparse` answers from the object's type alone (no import of pydata ``sparse``):
  a ``scipy.sparse`` matrix or array, a pydata ``sparse`` array (``COO``, ``GCXS``,
  ``DOK``, ...), or a :class:`~tensorc.sparse.tensor.SparseTensor` (``tc.asarray`` of one).
- :func:`canonical` turns one into a :class:`~tensorc.codegen.coo.CooData`: ``int64``
  coordinates (one row per dimension) sorted in row-major order, duplicates summed,
  explicit zeros dropped, values in the array's dtype. Already canonical input (scipy's
  canonical CSR, pydata's sorted ``COO``) is not sorted again. A pydata array whose fill
  value is not zero is refused.
- :func:`coordinates` is an operand's canonical form (a ``SparseTensor``'s own when it made
  one); :func:`todense` its dense ndarray.
- :func:`source` is what a sparse operand is planned from: a 2-d scipy array as CSR (cut
  by rows without a copy, :class:`~tensorc.sparse.blocks.CsrRowBlocks`), any other as its
  canonical coordinates.
- :func:`from_coo_data` makes the sparse result type :func:`result_format` names from a
  ``CooData``: pydata ``COO`` or ``GCXS``, scipy ``csr_array``/``csr_matrix`` (2-d) or
  ``coo_array`` (other ranks).

pydata ``sparse`` is imported when first needed (it loads numba): a program that passes
only scipy matrices never imports it.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from tensorc.codegen.coo import INDEX, CooData, sort_and_sum
from tensorc.codegen.sparse_kernels import scipy_holds
from tensorc.errors import UnsupportedError


def pydata():
    """The pydata ``sparse`` module, imported on first use (it loads numba)."""
    import sparse

    return sparse


def is_tensor(value: object) -> bool:
    """Whether ``value`` is a :class:`~tensorc.sparse.tensor.SparseTensor` (by the marker
    its class carries: that module imports this one)."""
    return getattr(type(value), "is_tensorc_sparse", False)


def held(value: object) -> object:
    """The scipy or pydata array a ``SparseTensor`` holds; any other value as it is."""
    return value.wrapped if is_tensor(value) else value


def is_sparse(value: object) -> bool:
    """Whether ``value`` is a scipy or pydata sparse array (by its type's module) or a
    :class:`~tensorc.sparse.tensor.SparseTensor`."""
    if is_tensor(value):
        return True
    module = type(value).__module__
    return module.startswith("scipy.sparse") or module == "sparse" or module.startswith(
        "sparse.")


def is_scipy(value: object) -> bool:
    return type(value).__module__.startswith("scipy.sparse")


def canonical(value: object) -> CooData:
    """The canonical coordinates of a scipy or pydata sparse array (see the module
    docstring)."""
    if is_scipy(value):
        shape = tuple(int(d) for d in value.shape)
        if value.format == "csr" and len(shape) == 2:
            if not value.has_canonical_format:  # scipy sorts and sums row by row, in C++
                value = value.copy()
                value.sum_duplicates()
            rows = np.repeat(np.arange(shape[0], dtype=INDEX), np.diff(value.indptr))
            coords, values = np.stack([rows, value.indices.astype(INDEX)]), value.data
            stored_zero = values == 0
            if stored_zero.any():
                coords, values = coords[:, ~stored_zero], values[~stored_zero]
            return CooData(shape, coords, values)  # row-major, each entry once: canonical
        if value.format == "csr" and value.has_canonical_format:
            return sort_and_sum(shape, value.indices.astype(INDEX)[None, :], value.data)
        coo = value.tocoo()
        coords = np.stack([np.asarray(c, dtype=INDEX) for c in coo.coords]) if shape else (
            np.zeros((0, coo.nnz), INDEX))
        return sort_and_sum(shape, coords, coo.data)
    fill = getattr(value, "fill_value", 0)
    if np.asarray(fill).item() != 0:
        raise UnsupportedError(
            f"a pydata sparse array with fill value {fill!r}: tensorc computes with sparse "
            "arrays whose fill value is 0")
    coo = value if type(value).__name__ == "COO" else value.asformat("coo")
    shape = tuple(int(d) for d in coo.shape)
    return sort_and_sum(shape, np.asarray(coo.coords), np.asarray(coo.data))


def source(value: object) -> CooData | sp.csr_array:
    """What a sparse operand is planned and cut from: a 2-d scipy array as a ``csr_array``
    (a CSR input as it is, shared, not copied; CSC, COO... converted once), any other as its
    canonical coordinates. A CSR source need not be canonical: scipy's kernels take
    repeated or unsorted entries, and the coordinate form sums and sorts them. A
    ``SparseTensor``'s is the one it made once."""
    if is_tensor(value):
        return value.source
    if is_scipy(value) and value.ndim == 2:
        if value.format != "csr":
            value = value.tocsr()
        return value if isinstance(value, sp.csr_array) else sp.csr_array(value)
    return canonical(value)


def coordinates(value: object) -> CooData:
    """The canonical coordinates of a sparse operand: a ``SparseTensor``'s own when it made
    them (its source), else :func:`canonical` of the array."""
    if is_tensor(value) and isinstance(value.source, CooData):
        return value.source
    return canonical(held(value))


def todense(value: object) -> np.ndarray:
    """A scipy or pydata sparse array (or a ``SparseTensor``) as a dense ndarray."""
    value = held(value)
    return value.toarray() if is_scipy(value) else value.todense()


# -- result types -----------------------------------------------------------------------------

def result_format(sparse_operands: list[object], ndim: int, dtype=np.float64) -> str:
    """The sparse result type a call with these sparse operands returns (the README's
    rule): scipy when every sparse operand is scipy (``csr_array`` for a 2-d result,
    ``csr_matrix`` when every one is an ``spmatrix``; ``coo_array`` for other ranks), else
    pydata (``GCXS`` when every pydata operand is ``GCXS``, else ``COO``); pydata also for
    a dtype scipy does not hold (``float16``)."""
    if all(is_scipy(op) for op in sparse_operands) and scipy_holds(dtype):
        if ndim == 2:
            matrices = all(isinstance(op, sp.spmatrix) for op in sparse_operands)
            return "csr_matrix" if matrices else "csr_array"
        return "coo_array"
    pydata_operands = [op for op in sparse_operands if not is_scipy(op)]
    if all(type(op).__name__ == "GCXS" for op in pydata_operands):
        return "gcxs"
    return "coo"


def from_coo_data(data: CooData, fmt: str) -> object:
    """``data`` as a sparse array of format ``fmt`` (a :func:`result_format` name)."""
    if fmt in ("csr_array", "csr_matrix"):
        rows, cols = data.coords
        indptr = np.zeros(data.shape[0] + 1, dtype=INDEX)
        np.cumsum(np.bincount(rows, minlength=data.shape[0]), out=indptr[1:])
        kind = sp.csr_array if fmt == "csr_array" else sp.csr_matrix
        index = _index_dtype(data.nnz, data.shape)
        return kind((data.values, cols.astype(index), indptr.astype(index)), shape=data.shape)
    if fmt == "coo_array":
        coords = tuple(c.astype(_index_dtype(data.nnz, data.shape)) for c in data.coords)
        return sp.coo_array((data.values, coords), shape=data.shape)
    sparse = pydata()
    coo = sparse.COO(data.coords, data.values, shape=data.shape, has_duplicates=False,
                     sorted=True, fill_value=data.values.dtype.type(0))
    return sparse.GCXS.from_coo(coo) if fmt == "gcxs" else coo


def _index_dtype(nnz: int, shape: tuple[int, ...]) -> type:
    """scipy's choice: ``int32`` indices while every count fits, else ``int64``."""
    return np.int32 if max((nnz, *shape), default=0) < 2**31 - 1 else np.int64
