"""Basic indexing (``x[1:5, ::2]``, integers, ``...``, ``None``) and ``take``: a key that
only adds axes (``None``) or selects everything (``...``, ``:``) is an index renaming; any
other key is a whole-array ``getitem`` (one task over the whole operand)."""

from __future__ import annotations

import operator

import numpy as np

from tensorc.codegen.whole_array import encode_index
from tensorc.errors import TypeCheckError
from tensorc.lazy.array_object import Array, expr_of, wrap
from tensorc.lazy.graph import Expr
from tensorc.lazy.manipulation import expand_dims


def _key(key) -> tuple:
    key = key if isinstance(key, tuple) else (key,)
    out = []
    for item in key:
        if isinstance(item, Array):
            if item.ndim != 0 or item.dtype.kind not in "iu":
                raise TypeCheckError("array indices are not supported (basic indexing only: "
                                     "slices, integers, ..., None); use take()")
            item = int(item)
        if isinstance(item, (bool, np.bool_)):
            raise TypeCheckError("boolean indices are not supported (their result shape "
                                 "depends on the data)")
        if isinstance(item, slice):  # bounds may be 0-d integer arrays (``__index__``)
            item = slice(*(None if b is None else operator.index(b)
                           for b in (item.start, item.stop, item.step)))
        if not (item is None or item is Ellipsis or isinstance(item, (slice, int, np.integer))):
            raise TypeCheckError(f"unsupported index {item!r}: basic indexing takes slices, "
                                 "integers, ... and None")
        out.append(int(item) if isinstance(item, np.integer) else item)
    return tuple(out)


def getitem(x, key) -> Array:
    node = expr_of(x)
    key = _key(key)
    probe = np.empty(node.shape, dtype=np.bool_)
    try:
        shape = probe[key].shape
    except IndexError as err:
        raise IndexError(f"index {key} for shape {node.shape}: {err}") from err
    if all(k is None or k is Ellipsis or k == slice(None) for k in key):
        added = []
        position = 0
        ellipsis_width = node.ndim - sum(1 for k in key if k is not None and k is not Ellipsis)
        for k in key:
            if k is None:
                added.append(position)
                position += 1
            elif k is Ellipsis:
                position += ellipsis_width
            else:
                position += 1
        return expand_dims(node, tuple(added)) if added else wrap(node)
    return wrap(Expr("whole", ("getitem", encode_index(key)), (node,), None, shape,
                     node.dtype))


def take(x, indices, /, *, axis=None) -> Array:
    node = expr_of(x)
    values = np.asarray(indices.numpy() if isinstance(indices, Array) else indices)
    if axis is None:
        if node.ndim != 1:
            raise TypeCheckError("take needs axis= for arrays of more than one dimension")
        axis = 0
    shape = np.take(np.empty(node.shape, np.bool_), values, axis=axis).shape
    op = ("take", tuple(int(v) for v in values.ravel()), axis)
    if values.ndim != 1:
        raise TypeCheckError("take takes a 1-d array of indices")
    return wrap(Expr("whole", op, (node,), None, shape, node.dtype))


def take_along_axis(x, indices, /, *, axis=-1) -> Array:
    node, index = expr_of(x), expr_of(indices)
    shape = np.take_along_axis(np.empty(node.shape, np.bool_),
                               np.zeros(index.shape, np.int64), axis=axis).shape
    return wrap(Expr("whole", ("take_along_axis", int(axis)), (node, index), None, shape,
                     node.dtype))
