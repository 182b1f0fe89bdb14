"""``tc.fft``: the standard's FFT extension on lazy arrays. Each transform is one task on the
whole operand (numpy's ``numpy.fft``, so its dtypes: float32 and complex64 stay single
precision); ``fftfreq``/``rfftfreq`` make evaluated arrays like the creation functions."""

from __future__ import annotations

import operator

import numpy as np

from tensorc.errors import ShapeError
from tensorc.lazy.array_object import Array, expr_of, wrap
from tensorc.lazy.creation import DEFAULT_FLOAT, _check_device, _from_value
from tensorc.lazy.graph import ArrayNode, NodeKind
from tensorc.lazy.manipulation import roll
from tensorc.lazy.statistical import normalise_axes

__all__ = ["fft", "fftfreq", "fftn", "fftshift", "hfft", "ifft", "ifftn", "ifftshift", "ihfft",
           "irfft", "irfftn", "rfft", "rfftfreq", "rfftn"]

NORMS = ("backward", "ortho", "forward")

_HALF = {"rfft", "ihfft"}  # n points in, n // 2 + 1 out
_DOUBLE = {"irfft", "hfft"}  # n // 2 + 1 points in, n out (default n = 2 (m - 1))


def _norm(norm: str) -> str:
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
    return norm


def _length(name: str, size: int, n) -> tuple[int, int]:
    """``(points, output length)`` of a one-axis transform ``name`` of ``size`` points."""
    points = (2 * (size - 1) if name in _DOUBLE else size) if n is None else operator.index(n)
    if points < 1:
        raise ShapeError(f"{name}: invalid number of data points ({points}); it must be at "
                         "least 1")
    return points, points // 2 + 1 if name in _HALF else points


def _dtype(name: str, dtype: np.dtype) -> np.dtype:
    """numpy's result type of ``name`` on ``dtype``."""
    probe = np.ones(2, dtype)
    return getattr(np.fft, name)(probe, 2).dtype


def _one_axis(name: str, x, n, axis, norm) -> Array:
    node = expr_of(x)
    if node.ndim == 0:
        raise ShapeError(f"{name} needs an array of at least one dimension")
    (axis,) = normalise_axes(axis, node.ndim)
    points, length = _length(name, node.shape[axis], n)
    shape = tuple(length if d == axis else k for d, k in enumerate(node.shape))
    op = ("fft", name, (points,), (axis,), _norm(norm))
    return wrap(ArrayNode(NodeKind.WHOLE, op, (node,), None, shape, _dtype(name, node.dtype)))


def _many_axes(name: str, x, s, axes, norm) -> Array:
    node = expr_of(x)
    if axes is None:
        axes = tuple(range(node.ndim)) if s is None else tuple(
            range(node.ndim - len(s), node.ndim))
    axes = tuple(operator.index(a) for a in axes)
    normalise_axes(axes, node.ndim)  # in range, none repeated
    axes = tuple(a % node.ndim for a in axes)
    if s is not None and len(s) != len(axes):
        raise ShapeError(f"{name}: s {tuple(s)} and axes {axes} differ in length")
    sizes = [None] * len(axes) if s is None else [operator.index(k) for k in s]
    one = name[:-1]  # the last axis is the one a real transform halves or doubles
    shape = list(node.shape)
    points = []
    for k, (axis, size) in enumerate(zip(axes, sizes, strict=True)):
        last = k == len(axes) - 1
        count, length = _length(one if last else "fft", node.shape[axis], size)
        points.append(count)
        shape[axis] = length
    op = ("fft", name, tuple(points), axes, _norm(norm))
    return wrap(ArrayNode(NodeKind.WHOLE, op, (node,), None, shape, _dtype(one, node.dtype)))


def fft(x, /, *, n=None, axis=-1, norm="backward") -> Array:
    return _one_axis("fft", x, n, axis, norm)


def ifft(x, /, *, n=None, axis=-1, norm="backward") -> Array:
    return _one_axis("ifft", x, n, axis, norm)


def rfft(x, /, *, n=None, axis=-1, norm="backward") -> Array:
    return _one_axis("rfft", x, n, axis, norm)


def irfft(x, /, *, n=None, axis=-1, norm="backward") -> Array:
    return _one_axis("irfft", x, n, axis, norm)


def hfft(x, /, *, n=None, axis=-1, norm="backward") -> Array:
    return _one_axis("hfft", x, n, axis, norm)


def ihfft(x, /, *, n=None, axis=-1, norm="backward") -> Array:
    return _one_axis("ihfft", x, n, axis, norm)


def fftn(x, /, *, s=None, axes=None, norm="backward") -> Array:
    return _many_axes("fftn", x, s, axes, norm)


def ifftn(x, /, *, s=None, axes=None, norm="backward") -> Array:
    return _many_axes("ifftn", x, s, axes, norm)


def rfftn(x, /, *, s=None, axes=None, norm="backward") -> Array:
    return _many_axes("rfftn", x, s, axes, norm)


def irfftn(x, /, *, s=None, axes=None, norm="backward") -> Array:
    return _many_axes("irfftn", x, s, axes, norm)


def _frequencies(values: np.ndarray, dtype, device) -> Array:
    _check_device(device)
    dtype = DEFAULT_FLOAT if dtype is None else np.dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"frequencies are real floating-point, not {dtype}")
    return _from_value(values.astype(dtype))


def fftfreq(n, /, *, d=1.0, dtype=None, device=None) -> Array:
    """The sample frequencies of an ``n``-point transform with sample spacing ``d``."""
    return _frequencies(np.fft.fftfreq(operator.index(n), d), dtype, device)


def rfftfreq(n, /, *, d=1.0, dtype=None, device=None) -> Array:
    """The non-negative sample frequencies of an ``n``-point real transform."""
    return _frequencies(np.fft.rfftfreq(operator.index(n), d), dtype, device)


def _shift(x, axes, sign: int) -> Array:
    node = expr_of(x)
    axes = normalise_axes(axes, node.ndim)
    shifts = tuple(sign * (node.shape[a] // 2) for a in axes)
    return roll(node, shifts, axis=axes) if axes else wrap(node)


def fftshift(x, /, *, axes=None) -> Array:
    """The zero frequency moved to the middle (``roll`` by half of each axis)."""
    return _shift(x, axes, 1)


def ifftshift(x, /, *, axes=None) -> Array:
    """The inverse of :func:`fftshift`."""
    return _shift(x, axes, -1)
