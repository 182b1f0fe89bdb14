"""The standard's manipulation functions. Axis permutations and inserting or dropping
size-1 axes are index renamings (free: fused into the statements that read them);
other reshapes, ``concat``, ``stack``, ``broadcast_to``, ``flip``, ``roll``, ``tile`` and
``repeat`` are whole-array operations (one task over whole operands)."""

from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from tensorc.errors import AxisError, ShapeError, TypeCheckError
from tensorc.lazy.array_object import Array, expr_of, wrap
from tensorc.lazy.data_types import result_type
from tensorc.lazy.graph import ArrayNode, NodeKind, broadcast_shapes
from tensorc.lazy.statistical import normalise_axes


def _whole(op: tuple, args: tuple, shape, dtype) -> Array:
    return wrap(ArrayNode(NodeKind.WHOLE, op, args, None, tuple(shape), np.dtype(dtype)))


def _axes(name: str, what: str, axes, ndim: int) -> tuple[int, ...]:
    """``axes`` (an int or a sequence) as non-negative axes of an ``ndim``-d array, in the
    order given; an axis outside ``[-ndim, ndim)`` or a repeated one raises ``AxisError``
    (numpy's message, naming the function and the argument)."""
    axes = (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
    out = []
    for a in axes:
        a = operator.index(a)
        if not -ndim <= a < ndim:
            raise AxisError(f"{name}: {what}: axis {a} is out of bounds for array of "
                            f"dimension {ndim}")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise AxisError(f"{name}: repeated axis in {what} {axes}")
    return tuple(out)


def permute_dims(x, /, axes) -> Array:
    node = expr_of(x)
    axes = _axes("permute_dims", "axes", axes, node.ndim)
    if len(axes) != node.ndim:
        raise AxisError(f"permute_dims: axes {axes} are not a permutation of {node.ndim} "
                        "axes")
    if axes == tuple(range(node.ndim)):
        return wrap(node)
    shape = tuple(node.shape[a] for a in axes)
    return wrap(ArrayNode(NodeKind.PERMUTE, None, (node,), axes, shape, node.dtype))


def transpose(x, /, axes=None) -> Array:
    """numpy's ``transpose`` (not the standard's; ``permute_dims`` is): ``axes`` permuted,
    reversed when ``axes`` is ``None``."""
    node = expr_of(x)
    return permute_dims(node, tuple(reversed(range(node.ndim))) if axes is None else axes)


def matrix_transpose(x, /) -> Array:
    node = expr_of(x)
    if node.ndim < 2:
        raise ShapeError(f"matrix_transpose needs at least 2 dimensions, got {node.ndim}")
    axes = (*range(node.ndim - 2), node.ndim - 1, node.ndim - 2)
    return permute_dims(node, axes)


def expand_dims(x, /, axis=0) -> Array:
    node = expr_of(x)
    n = node.ndim + 1
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = tuple(sorted(normalise_axes(axes, n + len(axes) - 1)))
    shape = list(node.shape)
    for a in axes:
        shape.insert(a, 1)
    return wrap(ArrayNode(NodeKind.EXPAND, None, (node,), axes, tuple(shape), node.dtype))


def squeeze(x, /, axis) -> Array:
    node = expr_of(x)
    axes = normalise_axes(axis, node.ndim)
    if any(node.shape[a] != 1 for a in axes):
        raise ShapeError(f"cannot squeeze axes {axes} of shape {node.shape}: not of size 1")
    shape = tuple(n for d, n in enumerate(node.shape) if d not in axes)
    return wrap(ArrayNode(NodeKind.SQUEEZE, None, (node,), axes, shape, node.dtype))


def _sizes(name: str, what: str, sizes) -> tuple[int, ...]:
    """``sizes`` (an int or a sequence of ints) as a tuple of ints; anything else (a float)
    raises ``TypeCheckError`` naming the function and the argument."""
    if getattr(sizes, "ndim", None) == 0 or not hasattr(sizes, "__len__"):
        sizes = (sizes,)  # one size (an int, a 0-d integer array)
    try:
        return tuple(operator.index(n) for n in sizes)
    except TypeError as err:
        raise TypeCheckError(f"{name}: {what} must be integers, got {sizes!r}") from err


def reshape(x, /, shape, *, copy=None) -> Array:
    node = expr_of(x)
    shape = _sizes("reshape", "shape", shape)
    if shape.count(-1) > 1:
        raise ShapeError(f"reshape: at most one -1 in {shape}")
    if any(n < -1 for n in shape):
        raise ShapeError(f"reshape: negative dimensions other than one -1 are not allowed: "
                         f"{shape}")
    if -1 in shape:
        known = math.prod(n for n in shape if n != -1)
        if known == 0 or math.prod(node.shape) % known:
            raise ShapeError(f"cannot reshape {node.shape} into {shape}")
        shape = tuple(math.prod(node.shape) // known if n == -1 else n for n in shape)
    if math.prod(shape) != math.prod(node.shape):
        raise ShapeError(f"cannot reshape an array of shape {node.shape} into {shape}")
    if shape == node.shape:
        return wrap(node)
    if [n for n in shape if n != 1] == [n for n in node.shape if n != 1]:
        squeezed = [d for d, n in enumerate(node.shape) if n == 1]
        inner = squeeze(node, tuple(squeezed)) if squeezed else wrap(node)
        added = tuple(d for d, n in enumerate(shape) if n == 1)
        return expand_dims(inner, added) if added else inner
    return _whole(("reshape", shape), (node,), shape, node.dtype)


def broadcast_to(x, /, shape) -> Array:
    node = expr_of(x)
    shape = tuple(int(n) for n in shape)
    if broadcast_shapes(node.shape, shape) != shape:
        raise ShapeError(f"cannot broadcast shape {node.shape} to {shape}")
    if shape == node.shape:
        return wrap(node)
    return _whole(("broadcast_to", shape), (node,), shape, node.dtype)


def broadcast_arrays(*arrays) -> list[Array]:
    shape = broadcast_shapes(*(expr_of(a).shape for a in arrays))
    return [broadcast_to(a, shape) for a in arrays]


def concat(arrays, /, *, axis=0) -> Array:
    nodes = [expr_of(a) for a in arrays]
    if not nodes:
        raise ShapeError("concat needs at least one array")
    if axis is None:
        nodes = [expr_of(reshape(n, (-1,))) for n in nodes]
        axis = 0
    if any(n.ndim == 0 for n in nodes):
        raise ShapeError("concat: zero-dimensional arrays cannot be concatenated (use stack, "
                         "or axis=None)")
    (axis,) = _axes("concat", "axis", axis, nodes[0].ndim)
    first = nodes[0].shape
    for n in nodes:
        if n.ndim != len(first) or any(a != b for d, (a, b) in enumerate(
                zip(n.shape, first, strict=True)) if d != axis):
            raise ShapeError(f"concat: shapes {[m.shape for m in nodes]} differ off axis "
                             f"{axis}")
    shape = list(first)
    shape[axis] = sum(n.shape[axis] for n in nodes)
    return _whole(("concat", axis), tuple(nodes), shape, result_type(*(n.dtype for n in nodes)))


def stack(arrays, /, *, axis=0) -> Array:
    nodes = [expr_of(a) for a in arrays]
    if not nodes or any(n.shape != nodes[0].shape for n in nodes):
        raise ShapeError(f"stack needs arrays of one shape, got {[n.shape for n in nodes]}")
    (axis,) = normalise_axes(axis, nodes[0].ndim + 1)
    shape = list(nodes[0].shape)
    shape.insert(axis, len(nodes))
    return _whole(("stack", axis), tuple(nodes), shape, result_type(*(n.dtype for n in nodes)))


def unstack(x, /, *, axis=0) -> tuple[Array, ...]:
    node = expr_of(x)
    (axis,) = normalise_axes(axis, node.ndim)
    index = [slice(None)] * node.ndim
    out = []
    for k in range(node.shape[axis]):
        index[axis] = k
        out.append(wrap(node)[tuple(index)])
    return tuple(out)


def flip(x, /, *, axis=None) -> Array:
    node = expr_of(x)
    axes = normalise_axes(axis, node.ndim)
    return _whole(("flip", axes), (node,), node.shape, node.dtype)


def roll(x, /, shift, *, axis=None) -> Array:
    node = expr_of(x)
    one = getattr(shift, "ndim", None) == 0 or not hasattr(shift, "__len__")
    shifts = _sizes("roll", "shift", shift)
    shift = shifts[0] if one else shifts
    if axis is not None:
        axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
        for a in axes:  # repeated axes add up, as in numpy
            _axes("roll", "axis", a, node.ndim)
        axis = operator.index(axis) if isinstance(axis, (int, np.integer)) else tuple(
            operator.index(a) for a in axes)
        if len(shifts) != len(axes) and 1 not in (len(shifts), len(axes)):
            raise ShapeError(f"roll: shift {shift} and axis {axis} do not broadcast")
    elif len(shifts) != 1:
        raise ShapeError(f"roll: a sequence shift {shift} needs axis=")
    return _whole(("roll", shift, axis), (node,), node.shape, node.dtype)


def moveaxis(x, source, destination, /) -> Array:
    node = expr_of(x)
    src = _axes("moveaxis", "source", source, node.ndim)
    dst = _axes("moveaxis", "destination", destination, node.ndim)
    if len(src) != len(dst):
        raise ShapeError("moveaxis: `source` and `destination` arguments must have the same "
                         "number of elements")
    order = [a for a in range(node.ndim) if a not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return permute_dims(node, tuple(order))


def tile(x, repetitions, /) -> Array:
    node = expr_of(x)
    reps = tuple(int(r) for r in repetitions)
    shape = np.tile(np.empty(node.shape, np.bool_), reps).shape
    return _whole(("tile", reps), (node,), shape, node.dtype)


def repeat(x, repeats, /, *, axis=None) -> Array:
    """Each element of ``x`` repeated ``repeats`` times (numpy's). An ``Array`` of counts is
    evaluated here: the result's length is their sum, and an array's shape is known when it
    is made (the standard: a data-dependent output shape); ``x`` stays lazy."""
    node = expr_of(x)
    if not isinstance(repeats, int):
        counts = np.asarray(repeats.numpy() if isinstance(repeats, Array) else repeats)
        repeats = tuple(int(c) for c in counts.ravel()) if counts.ndim else int(counts)
    probe = np.repeat(np.empty(node.shape, np.bool_), repeats, axis=axis)
    return _whole(("repeat", repeats, axis), (node,), probe.shape, node.dtype)


def _matrices(name: str, x) -> ArrayNode:
    node = expr_of(x)
    if node.ndim < 2:
        raise ShapeError(f"{name}: x must have at least 2 dimensions (a stack of matrices), "
                         f"got {node.ndim}")
    return node


def tril(x, /, *, k=0) -> Array:
    node = _matrices("tril", x)
    return _whole(("tril", operator.index(k)), (node,), node.shape, node.dtype)


def triu(x, /, *, k=0) -> Array:
    node = _matrices("triu", x)
    return _whole(("triu", operator.index(k)), (node,), node.shape, node.dtype)


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None) -> Array:
    """``n``-th differences along ``axis`` (``prepend``/``append`` joined first)."""
    n = operator.index(n)
    if n < 0:
        raise ShapeError(f"diff: order n must be non-negative but got {n}")
    parts = [p for p in (prepend, x, append) if p is not None]
    if expr_of(x).ndim == 0:
        raise ShapeError("diff: x must have at least 1 dimension, got a 0-d array")
    node = expr_of(concat(parts, axis=axis)) if len(parts) > 1 else expr_of(x)
    (axis,) = normalise_axes(axis, node.ndim)
    shape = list(node.shape)
    shape[axis] = builtins.max(0, shape[axis] - n)
    return _whole(("diff", axis, int(n)), (node,), shape, node.dtype)
