"""``tc.linalg``: the standard's linear-algebra extension on lazy arrays.

Contractions (``matmul``, ``tensordot``, ``vecdot``, ``outer``, ``vector_norm``) are block
programs like any other; ``solve``, ``inv`` and ``det`` run as one task on the whole matrix
(they suit matrices that fit one node: a Newton step's Hessian). A singular matrix raises
:class:`~tensorc.errors.LinAlgError` (numpy's ``LinAlgError`` too) when the value is computed.
"""

from __future__ import annotations

import numpy as np

from tensorc.errors import LinAlgError, ShapeError
from tensorc.lazy import statistical
from tensorc.lazy.array_object import Array, expr_of, wrap
from tensorc.lazy.graph import Expr, mapped
from tensorc.lazy.linear import contract, matmul, matrix_transpose, tensordot, vecdot

__all__ = ["det", "diagonal", "inv", "matmul", "matrix_transpose", "outer", "solve",
           "tensordot", "trace", "vecdot", "vector_norm"]


def _square(a: Expr, name: str) -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise LinAlgError(f"{name}: last 2 dimensions of the array must be square, got shape "
                          f"{a.shape}")
    if a.dtype.kind not in "fc":
        raise LinAlgError(f"{name}: needs a floating-point matrix, got {a.dtype}")


def solve(x1, x2, /) -> Array:
    """``x`` with ``x1 @ x = x2`` (one task on the whole system)."""
    a, b = expr_of(x1), expr_of(x2)
    _square(a, "solve")
    if b.ndim == 1:
        if b.shape[0] != a.shape[-1]:
            raise ShapeError(f"solve: a is {a.shape} but b is {b.shape}")
        shape = (*a.shape[:-2], a.shape[-1])
    else:
        if b.shape[-2] != a.shape[-1]:
            raise ShapeError(f"solve: a is {a.shape} but b is {b.shape}")
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        shape = (*batch, *b.shape[-2:])
    dtype = np.result_type(a.dtype, b.dtype)
    return wrap(Expr("whole", ("solve",), (a, b), None, shape, dtype))


def inv(x, /) -> Array:
    """The inverse of a square matrix (one task on the whole matrix)."""
    a = expr_of(x)
    _square(a, "inv")
    return wrap(Expr("whole", ("inv",), (a,), None, a.shape, a.dtype))


def det(x, /) -> Array:
    a = expr_of(x)
    _square(a, "det")
    return wrap(Expr("whole", ("det",), (a,), None, a.shape[:-2], a.dtype))


def diagonal(x, /, *, offset=0) -> Array:
    a = expr_of(x)
    shape = np.diagonal(np.empty(a.shape, np.bool_), offset, axis1=-2, axis2=-1).shape
    return wrap(Expr("whole", ("diagonal", int(offset)), (a,), None, shape, a.dtype))


def trace(x, /, *, offset=0, dtype=None) -> Array:
    a = expr_of(x)
    out = np.dtype(dtype) if dtype is not None else np.trace(np.ones((1, 1), a.dtype)).dtype
    op = ("trace", int(offset), None if dtype is None else out.str)
    return wrap(Expr("whole", op, (a,), None, a.shape[:-2], out))


def outer(x1, x2, /) -> Array:
    a, b = expr_of(x1), expr_of(x2)
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(f"outer takes 1-d arrays, got {a.shape} and {b.shape}")
    return contract([a, b], [("i",), ("j",)], ("i", "j"))


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2) -> Array:  # noqa: A002
    a = wrap(mapped("abs", expr_of(x)))
    if ord == 2:
        squares = statistical.sum(wrap(mapped("square", a._expr)), axis=axis,  # noqa: SLF001
                                  keepdims=keepdims)
        return wrap(mapped("sqrt", squares._expr))  # noqa: SLF001
    if ord == 1:
        return statistical.sum(a, axis=axis, keepdims=keepdims)
    if ord == float("inf"):
        return statistical.max(a, axis=axis, keepdims=keepdims)
    if ord == -float("inf"):
        return statistical.min(a, axis=axis, keepdims=keepdims)
    powered = statistical.sum(wrap(mapped("pow", a._expr, float(ord))), axis=axis,  # noqa: SLF001
                              keepdims=keepdims)
    return wrap(mapped("pow", powered._expr, 1.0 / ord))  # noqa: SLF001

