"""The standard's searching, sorting and set functions. ``argmax``/``argmin``, ``sort``,
``argsort`` and ``searchsorted`` run as one task over the whole operand; functions whose
result shape depends on the data (``nonzero``, ``unique_*``) raise
:class:`~tensorc.errors.UnsupportedError` naming themselves."""

from __future__ import annotations

import numpy as np

from tensorc.errors import ArgumentError, ShapeError, UnsupportedError
from tensorc.lazy.array_object import Array, expr_of, wrap
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
    if sorter is not None:
        raise UnsupportedError("searchsorted: sorter= is not supported; sort first")
    a, v = expr_of(x1), expr_of(x2)
    if a.ndim != 1:
        raise ShapeError(f"searchsorted: x1 must be a 1-d sorted array, got {a.ndim}-d "
                         f"shape {a.shape}")
    if side not in ("left", "right"):
        raise ArgumentError(f"searchsorted: side must be 'left' or 'right' (got {side!r})")
    return wrap(ArrayNode(NodeKind.WHOLE, ("searchsorted", side), (a, v), None, v.shape, INDEX))


def _data_dependent(name: str):
    def fn(*args, **kwargs):
        raise UnsupportedError(f"{name} is not supported: its result shape depends on the "
                               "data, which a planned program cannot know in advance; "
                               "gather with np.asarray(x) and use numpy")

    fn.__name__ = name
    return fn


nonzero = _data_dependent("nonzero")
unique_all = _data_dependent("unique_all")
unique_counts = _data_dependent("unique_counts")
unique_inverse = _data_dependent("unique_inverse")
unique_values = _data_dependent("unique_values")
