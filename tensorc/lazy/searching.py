"""The standard's searching, sorting and set functions. ``argmax``/``argmin``, ``sort``,
``argsort`` and ``searchsorted`` run as one task over the whole operand; ``nonzero`` and
``unique_*``, whose result shape depends on the data, are synchronisation points
(:mod:`tensorc.lazy.data_dependent`: their operand is evaluated at the call, the rest stays
lazy)."""

from __future__ import annotations

import numpy as np

from tensorc.errors import ArgumentError, ShapeError
from tensorc.lazy.array_object import Array, expr_of, wrap
from tensorc.lazy.data_dependent import (  # noqa: F401 - the chapter's set functions
    nonzero,
    unique_all,
    unique_counts,
    unique_inverse,
    unique_values,
)
from tensorc.lazy.graph import ArrayNode, NodeKind
from tensorc.lazy.statistical import normalise_axes

INDEX = np.dtype("int64")


def _arg(name: str, x, axis, keepdims: bool) -> Array:
    node = expr_of(x)
    if 0 in node.shape:
        raise ValueError(f"attempt to get {name} of an empty sequence")
    if axis is None:
        shape = (1,) * node.ndim if keepdims else ()
    else:
        (axis,) = normalise_axes(axis, node.ndim)
        shape = tuple(1 if d == axis else n for d, n in enumerate(node.shape)
                      if keepdims or d != axis)
    return wrap(ArrayNode(NodeKind.WHOLE, (name, axis, bool(keepdims)), (node,), None, shape,
                          INDEX))


def argmax(x, /, *, axis=None, keepdims=False) -> Array:
    return _arg("argmax", x, axis, keepdims)


def argmin(x, /, *, axis=None, keepdims=False) -> Array:
    return _arg("argmin", x, axis, keepdims)


def sort(x, /, *, axis=-1, descending=False, stable=True) -> Array:
    node = expr_of(x)
    (axis,) = normalise_axes(axis, node.ndim)
    return wrap(ArrayNode(NodeKind.WHOLE, ("sort", axis, bool(descending), bool(stable)),
                          (node,), None, node.shape, node.dtype))


def argsort(x, /, *, axis=-1, descending=False, stable=True) -> Array:
    node = expr_of(x)
    (axis,) = normalise_axes(axis, node.ndim)
    return wrap(ArrayNode(NodeKind.WHOLE, ("argsort", axis, bool(descending), bool(stable)),
                          (node,), None, node.shape, INDEX))


def searchsorted(x1, x2, /, *, side="left", sorter=None) -> Array:
    """Insertion indices of ``x2`` in the sorted ``x1`` (numpy's); with ``sorter``, ``x1``
    is sorted by those indices and the result indexes ``x1[sorter]``."""
    a, v = expr_of(x1), expr_of(x2)
    if a.ndim != 1:
        raise ShapeError(f"searchsorted: x1 must be a 1-d sorted array, got {a.ndim}-d "
                         f"shape {a.shape}")
    if side not in ("left", "right"):
        raise ArgumentError(f"searchsorted: side must be 'left' or 'right' (got {side!r})")
    if sorter is not None:
        order = expr_of(sorter)
        if order.shape != a.shape or np.dtype(order.dtype).kind not in "iu":
            raise ShapeError(f"searchsorted: sorter must be integer indices of x1's shape "
                             f"{a.shape}, got {order.dtype}{list(order.shape)}")
        a = ArrayNode(NodeKind.WHOLE, ("take_along_axis", 0), (a, order), None, a.shape,
                      a.dtype)  # x1[sorter], sorted
    return wrap(ArrayNode(NodeKind.WHOLE, ("searchsorted", side), (a, v), None, v.shape, INDEX))
