"""``tc.lib.stride_tricks``: numpy's ``sliding_window_view`` for clients that ask the namespace
for it (xarray's ``rolling`` does), lazily.

Contract: :func:`sliding_window_view(x, window_shape, axis=None)` has numpy's result: for each
window axis the axis shrinks to ``n - w + 1`` and a trailing axis of length ``w`` holds the
window, in the order the axes are given. tensorc has no strided views, so each window axis is
built from ``w`` shifted slices stacked along the new axis (``w`` times the input's size:
meant for the short windows rolling statistics use). The result is read-only in numpy too.
"""

from __future__ import annotations

import operator

from tensorc.errors import ShapeError
from tensorc.lazy.array_object import Array, expr_of
from tensorc.lazy.manipulation import stack


def sliding_window_view(x, window_shape, axis=None, *, subok=False, writeable=False) -> Array:
    """numpy's ``sliding_window_view`` (see the module docstring); ``writeable=True`` is
    refused, as tc arrays are immutable."""
    if writeable:
        raise ValueError("sliding_window_view: tc arrays are immutable; writeable=True is "
                         "not possible")
    node = expr_of(x)
    windows = (window_shape,) if isinstance(window_shape, int) else tuple(window_shape)
    windows = tuple(operator.index(w) for w in windows)
    if axis is None:
        if len(windows) != node.ndim:
            raise ShapeError(f"sliding_window_view: window_shape {windows} needs one entry "
                             f"per axis of x (x has {node.ndim})")
        axes = tuple(range(node.ndim))
    else:
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        axes = tuple(operator.index(a) % node.ndim for a in axes)
        if len(axes) != len(windows):
            raise ShapeError(f"sliding_window_view: {len(windows)} window size(s) for "
                             f"{len(axes)} axis(es)")
    result = x
    for w, a in zip(windows, axes, strict=True):
        n = result.shape[a]
        if w < 0 or w > n:
            raise ValueError(f"sliding_window_view: window {w} does not fit axis {a} of "
                             f"length {n}")
        shifted = []
        for start in range(w):
            key = [slice(None)] * result.ndim
            key[a] = slice(start, start + n - w + 1)
            shifted.append(result[tuple(key)])
        result = stack(shifted, axis=-1)
    return result
