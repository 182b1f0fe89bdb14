"""Sums of sparse arrays: ``tc.sum`` of a scipy or pydata array (or a ``tc.asarray`` of one),
over its non-zeros only.

Contract: :func:`sum_of` ``(value, axis=None, dtype=None, keepdims=False)`` returns numpy's
``np.sum`` of the dense array as an ndarray (a 0-d one for a whole sum), with numpy's
result dtype (``int32`` values sum as ``int64``, ``dtype=`` as numpy takes it), without
densifying: each non-zero is added into the position its kept coordinates name (one
``np.add.at`` pass). The result is dense: the sum over a sparse array's rows is as long as
its columns, whatever its density. ``axis`` is an int or a tuple, negative counting from the
end; one out of range or repeated is an :class:`~tensorc.errors.AxisError`.
"""

from __future__ import annotations

import math

import numpy as np

from tensorc.codegen.coo import linear_index
from tensorc.errors import AxisError
from tensorc.sparse.formats import coordinates


def sum_of(value, axis=None, dtype=None, keepdims: bool = False) -> np.ndarray:
    """``np.sum`` of the sparse ``value`` (module docstring)."""
    data = coordinates(value)
    shape, ndim = data.shape, data.ndim
    axes = _axes(axis, ndim)
    out_dtype = np.sum(np.zeros(1, data.dtype), dtype=dtype).dtype
    values = data.values.astype(out_dtype, copy=False)
    kept = [d for d in range(ndim) if d not in axes]
    kept_shape = tuple(shape[d] for d in kept)
    if not kept:
        out = np.asarray(np.sum(values, dtype=out_dtype))
    else:
        out = np.zeros(math.prod(kept_shape), out_dtype)
        if data.nnz:
            np.add.at(out, linear_index(data.coords[kept], kept_shape), values)
        out = out.reshape(kept_shape)
    if keepdims:
        out = out.reshape(tuple(1 if d in axes else shape[d] for d in range(ndim)))
    return out


def _axes(axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    found = []
    for a in (axis if isinstance(axis, tuple) else (axis,)):
        if not -ndim <= int(a) < ndim:
            raise AxisError(f"axis {a} is out of bounds for a sparse array of dimension {ndim}")
        a = int(a) % ndim
        if a in found:
            raise AxisError(f"axis {a} is repeated in {axis!r}")
        found.append(a)
    return tuple(found)
