"""numpy interoperability: numpy functions called on ``tc.Array`` stay on tensorc.

Contract: ``np.<ufunc>(x, …)`` (``__call__`` of a ufunc with a tensorc meaning) returns the
tensorc element-wise function's lazy result; ``np.<function>(x, …)`` for the functions in
:data:`FUNCTIONS` (``np.sum``, ``np.einsum``, ``np.tensordot``, ``np.matmul``, …) calls the
tensorc function. Anything else raises :class:`~tensorc.errors.UnsupportedError` naming the
numpy function, instead of gathering a possibly large array; ``np.asarray(x)`` gathers.
"""

from __future__ import annotations

import importlib

import numpy as np

from tensorc.errors import UnsupportedError

UFUNCS = {
    "add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide",
    "true_divide": "divide", "floor_divide": "floor_divide", "power": "pow",
    "remainder": "remainder", "negative": "negative", "positive": "positive",
    "absolute": "abs", "exp": "exp", "expm1": "expm1", "log": "log", "log1p": "log1p",
    "log2": "log2", "log10": "log10", "sqrt": "sqrt", "square": "square", "sin": "sin",
    "cos": "cos", "tan": "tan", "arcsin": "asin", "arccos": "acos", "arctan": "atan",
    "arctan2": "atan2", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "arcsinh": "asinh",
    "arccosh": "acosh", "arctanh": "atanh", "floor": "floor", "ceil": "ceil", "trunc": "trunc",
    "rint": "round", "sign": "sign", "signbit": "signbit", "isnan": "isnan", "isinf": "isinf",
    "isfinite": "isfinite", "maximum": "maximum", "minimum": "minimum", "greater": "greater",
    "greater_equal": "greater_equal", "less": "less", "less_equal": "less_equal",
    "equal": "equal", "not_equal": "not_equal", "logical_and": "logical_and",
    "logical_or": "logical_or", "logical_xor": "logical_xor", "logical_not": "logical_not",
    "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
    "invert": "bitwise_invert", "left_shift": "bitwise_left_shift",
    "right_shift": "bitwise_right_shift", "hypot": "hypot", "copysign": "copysign",
    "logaddexp": "logaddexp", "nextafter": "nextafter", "reciprocal": "reciprocal",
    "conjugate": "conj", "matmul": "matmul",
}
"""numpy ufunc name → the tensorc function it becomes."""

FUNCTIONS = {
    "sum": "sum", "prod": "prod", "max": "max", "amax": "max", "min": "min", "amin": "min",
    "mean": "mean", "var": "var", "std": "std", "any": "any", "all": "all",
    "argmax": "argmax", "argmin": "argmin", "where": "where", "einsum": "einsum",
    "tensordot": "tensordot", "matmul": "matmul", "dot": "_dot", "transpose": "_transpose",
    "reshape": "reshape", "concatenate": "concat", "stack": "stack",
    "expand_dims": "expand_dims", "squeeze": "squeeze", "broadcast_to": "broadcast_to",
    "clip": "clip", "sort": "sort", "argsort": "argsort", "flip": "flip", "roll": "roll",
    "moveaxis": "moveaxis", "tile": "tile", "repeat": "repeat", "cumsum": "cumulative_sum",
    "cumprod": "cumulative_prod", "outer": "_outer", "vecdot": "vecdot", "astype": "astype",
    "zeros_like": "zeros_like", "ones_like": "ones_like", "full_like": "full_like",
    "empty_like": "empty_like", "shape": "_shape", "ndim": "_ndim", "size": "_size",
    "result_type": "result_type", "isclose": "_isclose", "allclose": "_allclose",
    "count_nonzero": "count_nonzero", "take": "take", "trace": "_trace",
    "diagonal": "_diagonal", "linalg.solve": "linalg.solve", "linalg.inv": "linalg.inv",
    "linalg.det": "linalg.det", "linalg.norm": "_norm", "asarray": "_gather",
    "array": "_gather", "asanyarray": "_gather", "copy": "_gather",
}
"""numpy function name (``linalg.`` prefixed for ``np.linalg``) → tensorc function."""

def _namespace():
    return importlib.import_module("tensorc")


def array_ufunc(ufunc, method: str, inputs: tuple, kwargs: dict):
    name = UFUNCS.get(ufunc.__name__)
    if name is None or method != "__call__" or kwargs.get("out") is not None:
        what = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        raise UnsupportedError(f"{what} is not supported on tc.Array (tensorc would have to "
                               "gather the array); use the tensorc function or np.asarray(x)")
    extra = {k: v for k, v in kwargs.items() if k not in ("out",)}
    if extra:
        raise UnsupportedError(f"numpy.{ufunc.__name__} with {', '.join(extra)}= is not "
                               "supported on tc.Array")
    return getattr(_namespace(), name)(*inputs)


def array_function(func, types, args, kwargs):
    module = func.__module__ or ""
    prefix = "linalg." if "linalg" in module else ""
    name = FUNCTIONS.get(prefix + func.__name__)
    if name is None:
        raise UnsupportedError(f"numpy.{prefix}{func.__name__} is not supported on tc.Array "
                               "(tensorc would have to gather the array); use np.asarray(x) "
                               "to gather it explicitly")
    if name.startswith("_"):
        return globals()[name](*args, **kwargs)
    target = _namespace()
    for part in name.split("."):
        target = getattr(target, part)
    if name in ("sum", "prod", "max", "min", "mean", "any", "all", "var", "std"):
        kwargs = dict(kwargs)
        if kwargs.pop("out", None) is not None:
            raise UnsupportedError(f"numpy.{func.__name__}(out=...) on tc.Array")
        if name in ("var", "std") and "ddof" in kwargs:
            kwargs["correction"] = kwargs.pop("ddof")
    if name == "concat" and "axis" not in kwargs and len(args) > 1:
        return target(args[0], axis=args[1])
    return target(*args, **kwargs)


def _gather(a, *args, **kwargs):
    return np.asarray(a.numpy(), *args, **kwargs)


def _dot(a, b):
    tc = _namespace()
    if getattr(a, "ndim", 1) == 0 or getattr(b, "ndim", 1) == 0:
        return tc.multiply(a, b)
    if getattr(b, "ndim", 1) <= 2:
        return tc.matmul(a, b)
    return tc.tensordot(a, b, axes=([-1], [-2]))


def _transpose(a, axes=None):
    tc = _namespace()
    return tc.permute_dims(a, tuple(reversed(range(a.ndim))) if axes is None else axes)


def _outer(a, b):
    tc = _namespace()
    return tc.linalg.outer(tc.reshape(a, (-1,)), tc.reshape(b, (-1,)))


def _shape(a):
    return a.shape


def _ndim(a):
    return a.ndim


def _size(a, axis=None):
    return a.size if axis is None else a.shape[axis]


def _isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    tc = _namespace()
    close = tc.abs(a - b) <= atol + rtol * tc.abs(b)
    if equal_nan:
        close = close | (tc.isnan(a) & tc.isnan(b))
    return close


def _allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(_namespace().all(_isclose(a, b, rtol, atol, equal_nan)))


def _trace(a, offset=0):
    return _namespace().linalg.trace(a, offset=offset)


def _diagonal(a, offset=0):
    return _namespace().linalg.diagonal(a, offset=offset)


def _norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002
    if ord not in (None, 2) or (axis is None and x.ndim != 1 and ord is not None):
        raise UnsupportedError("numpy.linalg.norm on tc.Array supports the 2-norm / "
                               "Frobenius norm only")
    return _namespace().linalg.vector_norm(x, axis=axis, keepdims=keepdims)
