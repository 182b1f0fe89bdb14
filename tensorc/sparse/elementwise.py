"""Element-wise functions of sparse arrays: sparse while the function keeps zeros, dense
(a lazy ``tc.Array``) where it cannot, refused where densifying would break the budget.

Contract:

- :func:`apply` computes ``name`` (an array API element-wise function: ``multiply``, ``sin``,
  ``pow``, ``greater``...) on operands of which at least one is sparse (a scipy or pydata
  array, or a :class:`~tensorc.sparse.tensor.SparseTensor`); the others are Python or numpy
  scalars, numpy arrays or anything ``numpy.asarray`` takes (a ``tc.Array``).
- **Sparse result** when every position outside the operands' non-zeros gives 0:
  - with only sparse and scalar operands, when the function of zeros (and the scalars) is 0:
    ``x * 2``, ``x / 3``, ``x ** 2``, ``-x``, ``abs(x)``, ``sin(x)``, ``sqrt(x)``,
    ``x > 0``, ``x + y``, ``x * y``, ``maximum(x, y)`` of sparse ``x``, ``y``;
  - with a dense array operand, for ``multiply``, ``logical_and`` and ``bitwise_and`` (0
    times anything finite is 0) when the dense array is finite (0 × inf is nan in numpy:
    then the result is dense, as numpy's is);
  - every sparse operand has the result's shape (a dense operand may broadcast to it).
  The values are computed at the union of the operands' non-zeros, zeros produced there
  are dropped, and the result has numpy's dtype for the same dense operands. Its type: a
  ``SparseTensor`` when an operand was one, else the scipy or pydata type the operands
  imply (``tensorc.sparse.formats.result_format``).
- **Dense result** otherwise (``x + 1``, ``exp(x)``, ``x == 0``, ``x / y``): each sparse
  operand is densified and the array namespace's lazy function applied, so the result is a
  ``tc.Array``. Sparse operands whose dense forms together are larger than the memory
  budget (``tc.init(memory_limit=)``, else the executor's default) are refused with
  :class:`~tensorc.errors.MemoryLimitError`, which names the function, the largest
  operand and the sizes.
- The lazy functions are bound by ``tensorc/lazy/__init__.py`` (:func:`bind_dense`): this
  layer sits below the lazy arrays and cannot import them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from tensorc.codegen.coo import INDEX, CooData, linear_index
from tensorc.codegen.sparse_kernels import scipy_holds
from tensorc.codegen.sparse_loops import merge_sorted
from tensorc.errors import MemoryLimitError, TensorcError
from tensorc.planning.memory_fit import format_bytes
from tensorc.session import current
from tensorc.sparse.formats import (
    coordinates,
    from_coo_data,
    held,
    is_scipy,
    is_sparse,
    is_tensor,
    result_format,
    todense,
)

SCIPY_BINARY = {"add": lambda a, b: a + b, "subtract": lambda a, b: a - b,
                "multiply": lambda a, b: a.multiply(b)}
"""Functions of two sparse operands that scipy computes itself, for 2-d scipy arrays."""

ANNIHILATING = frozenset({"multiply", "logical_and", "bitwise_and"})
"""Functions whose value is 0 wherever one operand is 0 and the other is finite."""

_dense_functions: dict[str, Callable] = {}
_names_by_ufunc: dict[object, str] = {}


def bind_dense(functions: dict[str, Callable]) -> None:
    """Give this module the array namespace's lazy element-wise functions, by name (called
    once by ``tensorc/lazy/__init__.py``)."""
    _dense_functions.update(functions)
    for name in functions:
        found = getattr(np, name, None)
        if isinstance(found, np.ufunc):
            _names_by_ufunc.setdefault(found, name)


def name_of_ufunc(ufunc: np.ufunc) -> str | None:
    """The array namespace's name of a numpy ufunc (``np.arcsin`` → ``asin``), or ``None``."""
    return _names_by_ufunc.get(ufunc)


def apply(name: str, *args):
    """``name`` of ``args``, sparse where it keeps zeros (see the module docstring)."""
    args = tuple(a if is_sparse(a) or _is_scalar(a) or hasattr(a, "shape") else np.asarray(a)
                 for a in args)  # a list is an array, as numpy takes it
    sparse_at = [k for k, a in enumerate(args) if is_sparse(a)]
    shapes = [_shape_of(a) for a in args]
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError as err:
        raise TensorcError(f"tc.{name}: operands of shapes "
                           f"{', '.join(str(s) for s in shapes)} do not broadcast") from err
    function = getattr(np, name, None)
    if function is not None and shape and all(shapes[k] == shape for k in sparse_at):
        result = _sparse_result(name, function, args, sparse_at, shape)
        if result is not None:
            return result
    return _dense_result(name, args, sparse_at)


def _shape_of(value) -> tuple[int, ...]:
    return tuple(int(d) for d in np.shape(value))


def _is_scalar(value) -> bool:
    return isinstance(value, (bool, int, float, complex, np.generic)) or (
        isinstance(value, np.ndarray) and value.ndim == 0)


def _sparse_result(name: str, function, args, sparse_at: list[int], shape):
    """The sparse result, or ``None`` when some position outside the non-zeros is not 0."""
    dense_at = [k for k, a in enumerate(args) if k not in sparse_at and not _is_scalar(a)]
    if dense_at and name not in ANNIHILATING:
        return None
    dense = {k: np.asarray(args[k]) for k in dense_at}
    if any(d.dtype.kind in "fc" and not np.isfinite(d).all() for d in dense.values()):
        return None
    if not dense and len(sparse_at) == len(args) == 2 and name in SCIPY_BINARY:
        made = _by_scipy(name, *(held(a) for a in args))
        if made is not None:
            return _like_operands(made, args)
    coos = [coordinates(args[k]) for k in sparse_at]
    probe = [np.zeros(1, coos[sparse_at.index(k)].dtype) if k in sparse_at
             else np.ones(1, dense[k].dtype) if k in dense else a for k, a in enumerate(args)]
    with np.errstate(all="ignore"):
        at_zero = np.asarray(function(*probe))
    if at_zero.dtype.hasobject or np.any(at_zero != 0):
        return None
    coords, values = _union(coos, shape)
    inputs = list(args)
    for k, v in zip(sparse_at, values, strict=True):
        inputs[k] = v
    for k, d in dense.items():
        inputs[k] = np.broadcast_to(d, shape)[tuple(coords)]
    data = CooData(tuple(shape), coords, np.asarray(function(*inputs))).without_zeros()
    fmt = result_format([held(args[k]) for k in sparse_at], len(shape), data.dtype)
    return _like_operands(from_coo_data(data, fmt), args)


def _like_operands(made, args):
    """``made`` as a ``SparseTensor`` when an operand was one, else as it is."""
    tensors = [a for a in args if is_tensor(a)]
    return type(tensors[0])(made, copy=False) if tensors else made


def _by_scipy(name: str, a, b):
    """``a + b``, ``a - b`` or ``a * b`` of two 2-d scipy arrays of numbers by scipy's own
    kernel (one pass over both, zeros dropped), as a CSR array of the operands' kind; or
    ``None`` when scipy does not serve them."""
    if not (is_scipy(a) and is_scipy(b) and a.ndim == b.ndim == 2):
        return None
    if any(np.dtype(x.dtype).kind not in "iufc" or not scipy_holds(x.dtype) for x in (a, b)):
        return None
    made = SCIPY_BINARY[name](a.tocsr(), b.tocsr())
    fmt = result_format([a, b], 2, made.dtype)
    made = made.tocsr()
    return sp.csr_matrix(made) if fmt == "csr_matrix" else sp.csr_array(made)


def _union(coos: list[CooData], shape) -> tuple[np.ndarray, list[np.ndarray]]:
    """The row-major union of the operands' coordinates and each operand's values there
    (0 where it has none)."""
    first = coos[0]
    if all(c.nnz == first.nnz and np.array_equal(c.coords, first.coords) for c in coos[1:]):
        return first.coords, [c.values for c in coos]  # one pattern (R - P, P sampled on R)
    ids = [linear_index(c.coords, shape) for c in coos]
    if ids[0] is not None:  # canonical: row-major, so the positions are sorted
        union, places = ids[0], [np.arange(ids[0].shape[0])]
        for more in ids[1:]:
            union, at_union, at_more = merge_sorted(union, more)
            places = [at_union[p] for p in places] + [at_more]
        coords = np.empty((len(shape), union.shape[0]), INDEX)
        for axis, found in enumerate(np.unravel_index(union, shape)):
            coords[axis] = found
    else:  # too many positions for one int64 id: unique columns instead
        coords, inverse = np.unique(np.concatenate([c.coords for c in coos], axis=1),
                                    axis=1, return_inverse=True)
        bounds = np.cumsum([0] + [c.nnz for c in coos])
        places = [inverse.ravel()[bounds[k]:bounds[k + 1]] for k in range(len(coos))]
    values = []
    for c, at in zip(coos, places, strict=True):
        v = np.zeros(coords.shape[1], c.values.dtype)
        v[at] = c.values
        values.append(v)
    return coords, values


def _dense_result(name: str, args, sparse_at: list[int]):
    """The lazy function of the densified operands, within the memory budget."""
    budget, where = current().memory_budget()
    sizes = {k: math.prod(_shape_of(args[k])) * np.dtype(args[k].dtype).itemsize
             for k in sparse_at}
    if sum(sizes.values()) > budget:
        largest = max(sizes, key=sizes.get)
        value = args[largest]
        also = (f" (and {format_bytes(sum(sizes.values()))} with the other operand)"
                if len(sizes) > 1 else "")
        raise MemoryLimitError(
            f"tc.{name} would densify a sparse {_shape_of(value)} {np.dtype(value.dtype)} "
            f"array ({held(value).nnz:,} non-zeros) into {format_bytes(sizes[largest])}{also}, "
            f"over the memory budget of {format_bytes(budget)} ({where}); functions that "
            f"keep zeros (x * 2, x * y, x > 0, sin(x)) stay sparse")
    inputs = list(args)
    for k in sparse_at:
        inputs[k] = todense(args[k])
    function = _dense_functions.get(name)
    if function is None:
        raise TensorcError(f"tc.{name} of a sparse array: the array namespace is not loaded "
                           "(import tensorc)")
    return function(*inputs)

