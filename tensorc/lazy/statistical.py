"""The standard's statistical and utility reductions: ``reduce`` nodes (a monoid over
axes), fused with the element-wise work under them; ``mean``/``var``/``std`` are built
from them; cumulative sums are whole-array operations."""

from __future__ import annotations

import builtins
import math

import numpy as np

from tensorc.errors import AxisError
from tensorc.lazy.array_object import Array, expr_of, wrap
from tensorc.lazy.graph import ArrayNode, NodeKind, mapped
from tensorc.sparse.formats import is_sparse
from tensorc.sparse.reductions import sum_of


def normalise_axes(axis, ndim: int) -> tuple[int, ...]:
    """``axis`` (``None``, an int or a tuple) as sorted non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < builtins.max(ndim, 1) or (ndim == 0 and a not in (0, -1)):
            raise AxisError(f"axis {a} is out of bounds for an array of dimension {ndim}")
        out.append(a % ndim if ndim else 0)
    if len(set(out)) != len(out):
        raise AxisError(f"repeated axis in {axis}")
    return tuple(sorted(out))


def keep_dims(node: ArrayNode, axes: tuple[int, ...], ndim: int) -> ArrayNode:
    """``node`` with size-1 axes inserted at ``axes`` (``keepdims=True``)."""
    shape = list(node.shape)
    for a in axes:
        shape.insert(a, 1)
    return ArrayNode(NodeKind.EXPAND, None, (node,), axes, tuple(shape), node.dtype)


def reduce(monoid: str, x, axis, keepdims: bool, dtype) -> Array:
    node = expr_of(x)
    axes = normalise_axes(axis, node.ndim)
    shape = tuple(n for d, n in enumerate(node.shape) if d not in axes)
    out = ArrayNode(NodeKind.REDUCE, monoid, (node,), axes, shape, np.dtype(dtype))
    return wrap(keep_dims(out, axes, node.ndim) if keepdims else out)


def _sum_dtype(x: ArrayNode, dtype) -> np.dtype:
    if dtype is not None:
        return np.dtype(dtype)
    return np.sum(np.ones(1, x.dtype)).dtype


def sum(x, /, *, axis=None, dtype=None, keepdims=False) -> Array:  # noqa: A001
    if is_sparse(x):  # over its non-zeros (tensorc.sparse.reductions), never densified
        return wrap(expr_of(sum_of(x, axis=axis, dtype=dtype, keepdims=keepdims)))
    node = expr_of(x)
    return reduce("+", node, axis, keepdims, _sum_dtype(node, dtype))


def prod(x, /, *, axis=None, dtype=None, keepdims=False) -> Array:
    node = expr_of(x)
    return reduce("*", node, axis, keepdims, _sum_dtype(node, dtype))


def max(x, /, *, axis=None, keepdims=False) -> Array:  # noqa: A001
    node = expr_of(x)
    _nonempty(node, axis, "max")
    return reduce("max", node, axis, keepdims, node.dtype)


def min(x, /, *, axis=None, keepdims=False) -> Array:  # noqa: A001
    node = expr_of(x)
    _nonempty(node, axis, "min")
    return reduce("min", node, axis, keepdims, node.dtype)


def _nonempty(node: ArrayNode, axis, name: str) -> None:
    axes = normalise_axes(axis, node.ndim)
    if builtins.any(node.shape[a] == 0 for a in axes):
        raise ValueError(f"zero-size array to reduction operation {name} which has no "
                         "identity")


def any(x, /, *, axis=None, keepdims=False) -> Array:  # noqa: A001
    return reduce("or", expr_of(x), axis, keepdims, np.bool_)


def all(x, /, *, axis=None, keepdims=False) -> Array:  # noqa: A001
    return reduce("and", expr_of(x), axis, keepdims, np.bool_)


def _count(node: ArrayNode, axis) -> int:
    return math.prod(node.shape[a] for a in normalise_axes(axis, node.ndim))


def mean(x, /, *, axis=None, keepdims=False) -> Array:
    node = expr_of(x)
    total = sum(node, axis=axis, keepdims=keepdims)
    count = _count(node, axis)
    return wrap(mapped("div", total._expr, float(count) if count else float("nan")))  # noqa: SLF001


def var(x, /, *, axis=None, correction=0.0, keepdims=False, ddof=None) -> Array:
    """The variance (``ddof=``, numpy's name for ``correction``, is accepted too: xarray
    passes it to the namespace's ``var``/``std``)."""
    correction = correction if ddof is None else ddof
    node = expr_of(x)
    centred = mapped("sub", node, mean(node, axis=axis, keepdims=True)._expr)  # noqa: SLF001
    squares = sum(wrap(mapped("square", centred)), axis=axis, keepdims=keepdims)
    dof = _count(node, axis) - correction
    return wrap(mapped("div", squares._expr, float(dof) if dof > 0 else float("nan")))  # noqa: SLF001


def std(x, /, *, axis=None, correction=0.0, keepdims=False, ddof=None) -> Array:
    return wrap(mapped("sqrt", var(x, axis=axis, correction=correction, keepdims=keepdims,
                                   ddof=ddof)._expr))  # noqa: SLF001


def count_nonzero(x, /, *, axis=None, keepdims=False) -> Array:
    node = expr_of(x)
    return sum(wrap(mapped("ne", node, 0)), axis=axis, keepdims=keepdims, dtype="int64")


def _cumulative(name: str, x, axis, dtype, include_initial: bool) -> Array:
    node = expr_of(x)
    if axis is None:
        if node.ndim > 1:
            raise AxisError(f"{name} needs axis= for a {node.ndim}-d array")
        axis = 0
    (axis,) = normalise_axes(axis, node.ndim)
    out_dtype = _sum_dtype(node, dtype)
    shape = list(node.shape)
    shape[axis] += 1 if include_initial else 0
    op = (name, axis, None if dtype is None else out_dtype.str, bool(include_initial))
    return wrap(ArrayNode(NodeKind.WHOLE, op, (node,), None, tuple(shape), out_dtype))


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False) -> Array:
    return _cumulative("cumulative_sum", x, axis, dtype, include_initial)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False) -> Array:
    return _cumulative("cumulative_prod", x, axis, dtype, include_initial)
