"""numpy functions beyond the array API standard that clients (scikit-learn, xarray, scipy)
call on arrays, built lazily from the standard's functions: the nan reductions
(``nansum`` … ``nanargmin``), ``median``/``quantile``/``percentile`` and their nan forms
(method ``linear``; sort along the axis, then take and interpolate, numpy's own formulas)
and ``pad`` (modes ``constant``, ``edge``, ``reflect``, ``symmetric``, ``wrap``). Every
result's shape is known when it is made. numpy reaches them through
:mod:`tensorc.lazy.interop` (``np.nanmean(x)`` on a ``tc.Array``); they are not part of
``tc.__all__`` (the standard has none of them).

All-NaN slices give numpy's values (``nan``; numpy's ``RuntimeWarning`` is not raised);
``nanargmax``/``nanargmin`` of an all-NaN slice raise numpy's ``ValueError`` when the
result is computed (a deferred check on a 0-d flag: the operand stays lazy).
"""

from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from tensorc.errors import ShapeError, UnsupportedError
from tensorc.lazy import elementwise as ew
from tensorc.lazy import statistical as st
from tensorc.lazy.array_object import Array, expr_of, wrap
from tensorc.lazy.creation import full
from tensorc.lazy.data_types import astype
from tensorc.lazy.graph import deferred
from tensorc.lazy.indexing import getitem, take, take_along_axis
from tensorc.lazy.manipulation import (
    broadcast_to,
    concat,
    expand_dims,
    flip,
    moveaxis,
    permute_dims,
    reshape,
    squeeze,
)
from tensorc.lazy.searching import argmax, argmin, sort


def _inexact(x: Array) -> bool:
    return x.dtype.kind in "fc"


def _keep(result: Array, axes: tuple[int, ...], keepdims: bool) -> Array:
    return expand_dims(result, axes) if keepdims and axes else result


# -- nan reductions -----------------------------------------------------------------------
def _replaced(x: Array, value) -> Array:
    """``x`` with its NaNs replaced by ``value`` (``x`` itself for exact dtypes)."""
    return ew.where(ew.isnan(x), value, x) if _inexact(x) else x


def nansum(x, /, *, axis=None, dtype=None, keepdims=False) -> Array:
    x = wrap(expr_of(x))
    return st.sum(_replaced(x, 0), axis=axis, dtype=dtype, keepdims=keepdims)


def nanprod(x, /, *, axis=None, dtype=None, keepdims=False) -> Array:
    x = wrap(expr_of(x))
    return st.prod(_replaced(x, 1), axis=axis, dtype=dtype, keepdims=keepdims)


def _nanfold(fold, fill: float, x, axis, keepdims) -> Array:
    x = wrap(expr_of(x))
    if x.dtype.kind != "f":
        return fold(x, axis=axis, keepdims=keepdims)
    folded = fold(_replaced(x, fill), axis=axis, keepdims=keepdims)
    all_nan = st.all(ew.isnan(x), axis=axis, keepdims=keepdims)
    return astype(ew.where(all_nan, float("nan"), folded), x.dtype, copy=False)


def nanmax(x, /, *, axis=None, keepdims=False) -> Array:
    return _nanfold(st.max, float("-inf"), x, axis, keepdims)


def nanmin(x, /, *, axis=None, keepdims=False) -> Array:
    return _nanfold(st.min, float("inf"), x, axis, keepdims)


def _count(x: Array, axis, keepdims: bool) -> Array:
    return st.sum(ew.logical_not(ew.isnan(x)), axis=axis, keepdims=keepdims, dtype="int64")


def _divide(total: Array, count: Array) -> Array:
    """numpy's ``_divide_by_count``: ``total / count`` in ``total``'s dtype."""
    return ew.divide(total, astype(count, total.dtype))


def nanmean(x, /, *, axis=None, dtype=None, keepdims=False) -> Array:
    x = wrap(expr_of(x))
    if not _inexact(x):
        return st.mean(x if dtype is None else astype(x, dtype), axis=axis, keepdims=keepdims)
    total = nansum(x, axis=axis, dtype=dtype, keepdims=keepdims)
    return _divide(total, _count(x, axis, keepdims))


def nanvar(x, /, *, axis=None, dtype=None, correction=0.0, keepdims=False) -> Array:
    x = wrap(expr_of(x))
    if not _inexact(x):
        return st.var(x if dtype is None else astype(x, dtype), axis=axis,
                      correction=correction, keepdims=keepdims)
    mask = ew.isnan(x)
    arr = ew.where(mask, 0, x)
    average = _divide(st.sum(arr, axis=axis, dtype=dtype, keepdims=True),
                      _count(x, axis, True))
    centred = ew.where(mask, 0, astype(ew.subtract(arr, average), x.dtype, copy=False))
    squares = (ew.real(ew.multiply(centred, ew.conj(centred))) if x.dtype.kind == "c"
               else ew.multiply(centred, centred))
    total = st.sum(squares, axis=axis, dtype=dtype, keepdims=keepdims)
    dof = ew.subtract(_count(x, axis, keepdims), correction)
    return ew.where(ew.greater(dof, 0), _divide(total, dof), float("nan"))


def nanstd(x, /, *, axis=None, dtype=None, correction=0.0, keepdims=False) -> Array:
    return ew.sqrt(nanvar(x, axis=axis, dtype=dtype, correction=correction,
                          keepdims=keepdims))


def _raise_all_nan(result, all_nan):
    flag = all_nan.numpy() if hasattr(all_nan, "numpy") else np.asarray(all_nan)
    if np.any(flag):
        raise ValueError("All-NaN slice encountered")
    return result


def _nanarg(arg, fill: float, x, axis, keepdims) -> Array:
    x = wrap(expr_of(x))
    result = arg(_replaced(x, fill), axis=axis, keepdims=keepdims)
    if x.dtype.kind != "f" or x.size == 0:
        return result
    flag = st.any(st.all(ew.isnan(x), axis=axis))
    node = expr_of(result)
    return wrap(deferred(_raise_all_nan, (node, expr_of(flag)), node.shape, node.dtype,
                         "All-NaN check"))


def nanargmax(x, /, *, axis=None, keepdims=False) -> Array:
    return _nanarg(argmax, float("-inf"), x, axis, keepdims)


def nanargmin(x, /, *, axis=None, keepdims=False) -> Array:
    return _nanarg(argmin, float("inf"), x, axis, keepdims)


# -- median, quantile, percentile -----------------------------------------------------------
def _along(x: Array, axis) -> tuple[Array, tuple[int, ...]]:
    """``x`` with the ``axis`` (``None``, an int or a tuple) reduced moved last and merged
    into one, and the normalised axes (for ``keepdims``)."""
    axes = st.normalise_axes(axis, x.ndim)
    rest = [d for d in range(x.ndim) if d not in axes]
    moved = permute_dims(x, (*rest, *axes))
    shape = tuple(x.shape[d] for d in rest)
    return reshape(moved, (*shape, math.prod(x.shape[d] for d in axes))), axes


def _finish(result: Array, axes: tuple[int, ...], keepdims: bool, leading: int = 0) -> Array:
    """``result`` (the reduced axis gone, ``leading`` quantile axes first) with the reduced
    axes kept as size 1 when ``keepdims``."""
    if not keepdims:
        return result
    return expand_dims(result, tuple(leading + a for a in axes))


def _last(x: Array, k) -> Array:
    return getitem(x, (Ellipsis, k))


def _nan_fix(result: Array, ordered: Array) -> Array:
    """NaN where the slice holds a NaN (sorted last), as numpy's median/quantile."""
    if not _inexact(ordered) or ordered.shape[-1] == 0:
        return result
    return ew.where(ew.isnan(_last(ordered, -1)), float("nan"), result)


def median(x, /, *, axis=None, keepdims=False) -> Array:
    x = wrap(expr_of(x))
    flat, axes = _along(x, axis)
    n = flat.shape[-1]
    if n == 0:
        raise ShapeError("median of an empty slice")
    ordered = sort(flat, axis=-1)
    middle = [n // 2] if n % 2 else [n // 2 - 1, n // 2]
    result = st.mean(take(ordered, middle, axis=-1), axis=-1)
    return _finish(_nan_fix(result, ordered), axes, keepdims)


def _check_method(method: str, name: str) -> None:
    if method != "linear":
        raise UnsupportedError(f"numpy.{name} with method={method!r} is not supported on "
                               "tc.Array (method='linear' is)")


def _lerp(a: Array, b: Array, t, rest=None) -> Array:
    """numpy's ``_lerp``: ``a + (b - a) t``, or ``b - (b - a)(1 - t)`` where ``t >= 0.5``
    (``rest`` is ``1 - t`` when ``t`` is an array computed wider than it is applied)."""
    diff = ew.subtract(b, a)
    if isinstance(t, float):
        return (ew.subtract(b, ew.multiply(diff, 1 - t)) if t >= 0.5
                else ew.add(a, ew.multiply(diff, t)))
    low = ew.add(a, ew.multiply(diff, t))
    high = ew.subtract(b, ew.multiply(diff, ew.subtract(1, t) if rest is None else rest))
    return ew.where(ew.greater_equal(t, 0.5), high, low)


def quantile(x, q, /, *, axis=None, method="linear", keepdims=False) -> Array:
    """numpy's ``quantile`` (``q`` a number or a sequence in [0, 1]; its axes come first)."""
    _check_method(method, "quantile")
    x = wrap(expr_of(x))
    weak = type(q) in (int, float)
    qs = np.asanyarray(q)
    if x.dtype.kind == "c":
        raise TypeError("a must be an array of real numbers")
    if qs.dtype.kind not in "iuf" or np.any((qs < 0) | (qs > 1)):
        raise ValueError("Quantiles must be in the range [0, 1]")
    flat, axes = _along(x, axis)
    n = flat.shape[-1]
    if n == 0:
        raise ShapeError("quantile of an empty slice")
    out_dtype = _probe_dtype(np.quantile, x, q, axis)
    ordered = sort(flat, axis=-1)
    virtual = np.atleast_1d(np.asanyarray((n - 1) * qs)).ravel()
    previous = np.floor(virtual).astype(np.intp)
    following = np.minimum(previous + 1, n - 1)
    gamma = virtual - previous
    a = take(ordered, [int(i) for i in previous], axis=-1)
    b = take(ordered, [int(i) for i in following], axis=-1)
    a, b = moveaxis(a, -1, 0), moveaxis(b, -1, 0)
    if qs.ndim == 0 and weak:
        result = squeeze(_lerp(a, b, float(gamma[0])), 0)
    else:
        t = gamma.reshape((gamma.size,) + (1,) * (a.ndim - 1))
        result = _lerp(a, b, wrap(expr_of(t)))
        result = reshape(result, (*qs.shape, *result.shape[1:]))
    result = _nan_fix(result, expand_dims(ordered, 0) if qs.ndim else ordered)
    return astype(_finish(result, axes, keepdims, qs.ndim), out_dtype, copy=False)


def _probe_dtype(function, x: Array, q, axis) -> np.dtype:
    """numpy's result dtype of ``function`` (a quantile) on an array like ``x`` (numpy's
    depends on the dtype, ``q``'s type and whether it reshapes)."""
    return np.asarray(function(np.zeros((2,) * x.ndim, x.dtype), q, axis=axis)).dtype


def percentile(x, q, /, *, axis=None, method="linear", keepdims=False) -> Array:
    weak = type(q) in (int, float)
    qs = np.true_divide(q, 100)
    return quantile(x, float(qs) if weak else qs, axis=axis, method=method, keepdims=keepdims)


def _nan_positions(ordered: Array, count: Array, q: float) -> Array:
    """The ``q`` quantile of each sorted slice of ``ordered`` whose first ``count`` elements
    are numbers (NaN after them): ``nan`` for a slice of NaNs."""
    virtual = ew.multiply(astype(ew.subtract(count, 1), np.float64), q)
    previous = ew.floor(virtual)
    gamma = ew.subtract(virtual, previous)
    first = astype(previous, np.int64)
    second = ew.minimum(ew.add(first, 1), ew.subtract(count, 1))
    a = take_along_axis(ordered, first, axis=-1)
    b = take_along_axis(ordered, second, axis=-1)
    rest = ew.subtract(1, gamma)  # numpy: 1 - t in float64, applied in the array's dtype
    return _lerp(a, b, astype(gamma, ordered.dtype, copy=False),
                 astype(rest, ordered.dtype, copy=False))


def nanquantile(x, q, /, *, axis=None, method="linear", keepdims=False) -> Array:
    _check_method(method, "nanquantile")
    x = wrap(expr_of(x))
    if not _inexact(x):
        return quantile(x, q, axis=axis, keepdims=keepdims)
    qs = np.asanyarray(q)
    if np.any((qs < 0) | (qs > 1)):
        raise ValueError("Quantiles must be in the range [0, 1]")
    flat, axes = _along(x, axis)
    ordered = sort(flat, axis=-1)
    count = _count(flat, -1, True)
    parts = [squeeze(_nan_positions(ordered, count, float(v)), -1) for v in qs.ravel()]
    out_dtype = _probe_dtype(np.nanquantile, x, q, axis)
    if qs.ndim == 0:
        result = parts[0]
    else:
        from_parts = _stacked(parts)
        result = reshape(from_parts, (*qs.shape, *from_parts.shape[1:]))
    return astype(_finish(result, axes, keepdims, qs.ndim), out_dtype, copy=False)


def _stacked(parts: list[Array]) -> Array:
    """``parts`` (one shape) stacked on a new first axis."""
    return concat([expand_dims(p, 0) for p in parts], axis=0)


def nanpercentile(x, q, /, *, axis=None, method="linear", keepdims=False) -> Array:
    weak = type(q) in (int, float)
    qs = np.true_divide(q, 100)
    return nanquantile(x, float(qs) if weak else qs, axis=axis, method=method,
                       keepdims=keepdims)


def nanmedian(x, /, *, axis=None, keepdims=False) -> Array:
    x = wrap(expr_of(x))
    if not _inexact(x):
        return median(x, axis=axis, keepdims=keepdims)
    flat, axes = _along(x, axis)
    ordered = sort(flat, axis=-1)
    count = _count(flat, -1, True)
    low = take_along_axis(ordered, ew.floor_divide(ew.subtract(count, 1), 2), axis=-1)
    high = take_along_axis(ordered, ew.floor_divide(count, 2), axis=-1)
    result = squeeze(ew.divide(ew.add(low, high), 2), -1)
    result = astype(result, np.asarray(np.nanmedian(np.zeros(2, x.dtype))).dtype, copy=False)
    return _finish(result, axes, keepdims)


# -- pad ----------------------------------------------------------------------------------
def _pairs(value, ndim: int, name: str) -> np.ndarray:
    """numpy's ``_as_pairs``: ``value`` as ``(ndim, 2)`` (before, after) per axis."""
    try:
        return np.broadcast_to(np.asarray(value), (ndim, 2))
    except ValueError as err:
        raise ShapeError(f"pad: {name} {value!r} does not fit {ndim} axes") from err


def _slice(x: Array, axis: int, start: int, stop: int) -> Array:
    return getitem(x, (slice(None),) * axis + (slice(start, stop),))


def pad(x, pad_width, /, mode="constant", *, constant_values=0) -> Array:
    """numpy's ``pad`` for modes ``constant``, ``edge``, ``reflect``, ``symmetric`` and
    ``wrap`` (a reflected or wrapped width at most the axis' length), lazily: each axis is
    the concatenation of the array with its pads."""
    out = wrap(expr_of(x))
    widths = _pairs(pad_width, out.ndim, "pad_width")
    if widths.dtype.kind not in "iu":
        raise TypeError("`pad_width` must be of integral type.")
    if np.any(widths < 0):
        raise ValueError("index can't contain negative values")
    if mode not in ("constant", "edge", "reflect", "symmetric", "wrap"):
        raise UnsupportedError(f"numpy.pad with mode={mode!r} is not supported on tc.Array "
                               "(constant, edge, reflect, symmetric and wrap are)")
    values = _pairs(constant_values, out.ndim, "constant_values")
    for axis in range(out.ndim):
        before, after = (operator.index(int(w)) for w in widths[axis])
        if not before and not after:
            continue
        n = out.shape[axis]
        if n == 0 and mode != "constant":
            raise ValueError(f"can't extend empty axis {axis} using modes other than "
                             "'constant' or 'empty'")
        limit = n - 1 if mode == "reflect" else n
        if mode in ("reflect", "symmetric", "wrap") and builtins.max(before, after) > limit:
            raise UnsupportedError(f"numpy.pad mode={mode!r} with a width over {limit} on an "
                                   f"axis of length {n} is not supported on tc.Array")
        parts = []
        for width, side in ((before, 0), (after, 1)):
            if not width:
                parts.append(None)
                continue
            shape = list(out.shape)
            shape[axis] = width
            if mode == "constant":
                fill = np.asarray(values[axis][side]).astype(out.dtype)
                part = full(tuple(shape), fill[()], dtype=out.dtype)
            elif mode == "edge":
                edge = _slice(out, axis, 0, 1) if side == 0 else _slice(out, axis, n - 1, n)
                part = broadcast_to(edge, tuple(shape))
            elif mode == "wrap":
                part = _slice(out, axis, n - width, n) if side == 0 else _slice(out, axis, 0,
                                                                                 width)
            else:
                skip = 1 if mode == "reflect" else 0
                part = flip(_slice(out, axis, skip, skip + width) if side == 0 else
                            _slice(out, axis, n - skip - width, n - skip), axis=axis)
            parts.append(part)
        pieces = [p for p in (parts[0], out, parts[1]) if p is not None]
        out = concat(pieces, axis=axis)
    return out
