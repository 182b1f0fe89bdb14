"""Indexing (``x[1:5, ::2]``, integers, ``...``, ``None``, integer arrays), ``x[key] = value``
and ``take``: a key that only adds axes (``None``) or selects everything (``...``, ``:``) is
an index renaming; any other key is a whole-array ``getitem`` (one task over the whole
operand, the key's arrays its further operands). Selecting by a boolean mask (``x[mask]``,
``x[mask, :]``, a mask first in the key; or after full slices, ``x[:, mask]``, which selects
with the masked axes moved first and puts the result axis back where numpy does) is a
synchronisation
point (:func:`tensorc.lazy.data_dependent.select`: the result's shape depends on the data,
so its operands are evaluated at the call); assigning through one (``x[mask] = value``)
keeps the shape and stays lazy."""

from __future__ import annotations

import operator

import numpy as np

from tensorc.codegen.whole_array import encode_index
from tensorc.errors import AxisError, ShapeError, TypeCheckError, UnsupportedError
from tensorc.lazy import data_dependent
from tensorc.lazy.array_object import Array, expr_of, wrap
from tensorc.lazy.graph import ArrayNode, NodeKind, broadcast_shapes, leaf
from tensorc.lazy.manipulation import expand_dims, moveaxis, permute_dims


def _key(key, arrays: list, masks: bool = False) -> tuple:
    """The key as plain items. Integer arrays of at least one dimension (and, with
    ``masks``, boolean arrays) go to ``arrays`` and stand in the key as ``_ArrayIndex``
    markers; a 0-d integer array is an integer."""
    key = key if isinstance(key, tuple) else (key,)
    out = []
    for item in key:
        if isinstance(item, np.ndarray):
            item = Array(leaf(item))
        if isinstance(item, Array):
            if item.dtype == np.bool_ and not masks:
                raise UnsupportedError(
                    "a boolean mask is supported first in the key (x[mask], x[mask, :]) "
                    "and not combined with integer arrays")
            if item.dtype.kind not in "iub":
                raise IndexError(f"arrays used as indices must be of integer or boolean "
                                 f"type, not {item.dtype}")
            if item.ndim == 0 and item.dtype.kind in "iu":
                item = int(item)
            else:
                arrays.append(item)
                out.append(_ArrayIndex(len(arrays) - 1, item))
                continue
        if isinstance(item, (bool, np.bool_)):
            raise TypeCheckError("a Python bool index is supported only as the whole key "
                                 "(x[True], x[False])")
        if isinstance(item, slice):  # bounds may be 0-d integer arrays (``__index__``)
            item = slice(*(None if b is None else operator.index(b)
                           for b in (item.start, item.stop, item.step)))
        if not (item is None or item is Ellipsis or isinstance(item, (slice, int, np.integer))):
            raise TypeCheckError(f"unsupported index {item!r}: indexing takes slices, "
                                 "integers, ..., None and integer arrays")
        out.append(int(item) if isinstance(item, np.integer) else item)
    return tuple(out)


class _ArrayIndex:
    """An array in a key: its position among the key's arrays, and the array."""

    __slots__ = ("number", "array")

    def __init__(self, number: int, array: Array) -> None:
        self.number, self.array = number, array

    def probe(self) -> np.ndarray:
        """A stand-in of the array's shape and kind (zeros: every axis has index 0, unless
        it is empty, where numpy rightly refuses any index)."""
        kind = np.bool_ if self.array.dtype == np.bool_ else np.intp
        return np.zeros(self.array.shape, kind)


def _encoded(key: tuple) -> tuple:
    """``encode_index`` of a key whose arrays are ``("array", number)``."""
    return tuple(("array", k.number) if isinstance(k, _ArrayIndex) else encode_index((k,))[0]
                 for k in key)


def _probe_key(key: tuple) -> tuple:
    return tuple(k.probe() if isinstance(k, _ArrayIndex) else k for k in key)


def _selected_shape(shape: tuple, key: tuple) -> tuple[int, ...]:
    try:
        return np.empty(shape, dtype=np.bool_)[_probe_key(key)].shape
    except IndexError as err:
        raise IndexError(f"index {key} for shape {shape}: {err}") from err


def _mask_first(key):
    """``(mask, rest)`` when ``key`` selects by a boolean mask first (``x[mask, ...]``):
    the mask as an ``Array`` (a Python bool as a 0-d one), the rest of the key."""
    items = key if isinstance(key, tuple) else (key,)
    if not items:
        return None
    first = items[0]
    if isinstance(first, (bool, np.bool_)):
        return Array(leaf(np.asarray(first, np.bool_))), items[1:]
    if isinstance(first, np.ndarray) and first.dtype == np.bool_:
        return Array(leaf(first)), items[1:]
    if isinstance(first, Array) and first.dtype == np.bool_:
        return first, items[1:]
    return None


def _mask_after_slices(key):
    """``(d, mask, rest)`` when ``key`` is ``d >= 1`` full slices, then a boolean mask of one
    or more dimensions, then slices only (``x[:, mask]``, ``x[:, :, mask, 1:]``): numpy keeps
    the selected axis at position ``d``."""
    items = key if isinstance(key, tuple) else (key,)
    d = 0
    while d < len(items) and isinstance(items[d], slice) and items[d] == slice(None):
        d += 1
    if d == 0 or d == len(items):
        return None
    mask = items[d]
    if isinstance(mask, np.ndarray) and mask.dtype == np.bool_ and mask.ndim >= 1:
        mask = Array(leaf(mask))
    if not (isinstance(mask, Array) and mask.dtype == np.bool_ and mask.ndim >= 1):
        return None
    rest = items[d + 1:]
    if not all(isinstance(item, slice) for item in rest):
        return None
    return d, mask, rest


def getitem(x, key) -> Array:
    node = expr_of(x)
    later = _mask_after_slices(key)
    if later is not None:  # move the masked axes first, select, put the result axis back
        d, mask, rest = later
        m = mask.ndim
        if d + m > node.ndim:
            raise IndexError(f"too many indices for array: array is {node.ndim}-dimensional, "
                             f"but {d + m} were indexed")
        order = (*range(d, d + m), *range(d), *range(d + m, node.ndim))
        chosen = getitem(permute_dims(wrap(node), order), (mask, *([slice(None)] * d), *rest))
        return moveaxis(chosen, 0, d)
    masked = _mask_first(key)
    if masked is not None:
        mask, rest = masked
        arrays: list[Array] = []
        rest = _key(rest, arrays) if rest else ()
        if arrays:
            raise UnsupportedError("a boolean mask combined with integer array indices is "
                                   "not supported; index in two steps")
        first = key[0] if isinstance(key, tuple) else key
        if isinstance(first, (bool, np.bool_)):  # the shape is known: no synchronisation
            chosen = data_dependent.scalar_mask(node, bool(first))
            return chosen[(slice(None), *rest)] if rest else chosen
        return data_dependent.select(node, mask, rest)
    arrays: list[Array] = []
    key = _key(key, arrays)
    if arrays:  # integer array indexing (numpy's)
        shape = _selected_shape(node.shape, key)
        operands = (node, *(expr_of(a) for a in arrays))
        return wrap(ArrayNode(NodeKind.WHOLE, ("getitem_arrays", _encoded(key)), operands,
                              None, shape, node.dtype))
    shape = _selected_shape(node.shape, key)
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
    return wrap(ArrayNode(NodeKind.WHOLE, ("getitem", encode_index(key)), (node,), None, shape,
                          node.dtype))


def setitem(x, key, value) -> ArrayNode:
    """The expression of ``x`` with ``x[key] = value`` (``Array.__setitem__``): the same
    shape and dtype as ``x``; ``value`` is converted to ``x``'s dtype as numpy assigns (a
    Python scalar now, so one that does not fit raises here). ``key`` is any index
    ``getitem`` takes, or a boolean mask (its shape matching the leading axes)."""
    node = expr_of(x)
    arrays: list[Array] = []
    key = _key(key, arrays, masks=True)
    masks = [k for k in key if isinstance(k, _ArrayIndex) and k.array.dtype == np.bool_]
    if masks and len(key) != 1:
        raise UnsupportedError("a boolean mask in x[key] = value must be the whole key")
    if isinstance(value, (bool, int, float, complex, np.generic)):
        value_node = leaf(np.asarray(value, dtype=node.dtype))
    else:
        value_node = expr_of(value)
    if masks:
        mask = masks[0].array
        if mask.ndim > node.ndim or any(m != n for m, n in zip(mask.shape, node.shape,
                                                                strict=False)):
            raise IndexError(f"boolean index of shape {mask.shape} does not match the "
                             f"array's shape {node.shape}")
        rest = node.shape[mask.ndim:]
        try:
            fits = broadcast_shapes(value_node.shape, (1, *rest))[1:] == rest
        except ShapeError:
            fits = False
        if not fits or value_node.ndim > len(rest) + 1:
            raise ShapeError(f"cannot assign a value of shape {value_node.shape} to the "
                             f"elements a mask selects in an array of shape {node.shape}")
    else:
        target = _selected_shape(node.shape, key)
        try:
            fits = broadcast_shapes(value_node.shape, target) == target
        except ShapeError:
            fits = False
        if not fits:
            raise ShapeError(f"cannot assign a value of shape {value_node.shape} to x[key] "
                             f"of shape {target}")
    operands = (node, value_node, *(expr_of(a) for a in arrays))
    return ArrayNode(NodeKind.WHOLE, ("setitem", _encoded(key)), operands, None, node.shape,
                     node.dtype)


def take(x, indices, /, *, axis=None) -> Array:
    """The elements of ``x`` at ``indices`` (1-d integers) along ``axis``. Given indices
    are part of the operation; an ``Array`` of indices stays lazy: it is the operand of a
    whole-array ``x[:, …, indices]`` (integer array indexing, numpy's ``take``)."""
    node = expr_of(x)
    if axis is None:
        if node.ndim != 1:
            raise TypeCheckError("take needs axis= for arrays of more than one dimension")
        axis = 0
    if isinstance(indices, Array):
        if indices.ndim != 1:
            raise TypeCheckError("take takes a 1-d array of indices")
        if indices.dtype.kind not in "iu":
            raise IndexError(f"take: indices must be an integer array, not {indices.dtype}")
        axis = operator.index(axis)
        if not -node.ndim <= axis < node.ndim:
            raise AxisError(f"take: axis {axis} is out of bounds for array of dimension "
                            f"{node.ndim}")
        return getitem(wrap(node), (slice(None),) * (axis % node.ndim) + (indices,))
    values = np.asarray(indices)
    shape = np.take(np.empty(node.shape, np.bool_), values, axis=axis).shape
    op = ("take", tuple(int(v) for v in values.ravel()), axis)
    if values.ndim != 1:
        raise TypeCheckError("take takes a 1-d array of indices")
    return wrap(ArrayNode(NodeKind.WHOLE, op, (node,), None, shape, node.dtype))


def take_along_axis(x, indices, /, *, axis=-1) -> Array:
    node, index = expr_of(x), expr_of(indices)
    if index.dtype.kind not in "iu":
        raise TypeCheckError(f"take_along_axis: indices must be an integer array, not "
                             f"{index.dtype}")
    axis = operator.index(axis)
    if not -node.ndim <= axis < node.ndim:
        raise AxisError(f"take_along_axis: axis {axis} is out of bounds for array of "
                        f"dimension {node.ndim}")
    try:
        shape = np.take_along_axis(np.empty(node.shape, np.bool_),
                                   np.zeros(index.shape, np.int64), axis=axis).shape
    except (ValueError, IndexError) as err:
        raise ShapeError(f"take_along_axis: indices of shape {index.shape} do not fit x of "
                         f"shape {node.shape} along axis {axis}: {err}") from err
    return wrap(ArrayNode(NodeKind.WHOLE, ("take_along_axis", axis), (node, index), None, shape,
                          node.dtype))
