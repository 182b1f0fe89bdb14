"""The standard's element-wise functions: each adds one ``map`` node (broadcasting, Python
scalars, numpy's result types); :mod:`tensorc.lazy.lowering` fuses chains of them. With a
sparse operand (scipy, pydata or ``tc.asarray`` of one) a function is
:func:`tensorc.sparse.elementwise.apply`: sparse while it keeps zeros."""

from __future__ import annotations

from tensorc.lazy.array_object import Array, expr_of, operand, wrap
from tensorc.lazy.data_types import astype
from tensorc.lazy.graph import ArrayNode, mapped
from tensorc.sparse.elementwise import apply as sparse_apply
from tensorc.sparse.formats import is_sparse

UNARY = {
    "abs": "abs", "acos": "acos", "acosh": "acosh", "asin": "asin", "asinh": "asinh",
    "atan": "atan", "atanh": "atanh", "bitwise_invert": "bitwise_invert", "ceil": "ceil",
    "conj": "conj", "cos": "cos", "cosh": "cosh", "exp": "exp", "expm1": "expm1",
    "floor": "floor", "imag": "imag", "isfinite": "isfinite", "isinf": "isinf",
    "isnan": "isnan", "log": "log", "log1p": "log1p", "log2": "log2", "log10": "log10",
    "logical_not": "not", "negative": "neg", "positive": "positive", "real": "real",
    "reciprocal": "reciprocal", "round": "round", "sign": "sign", "signbit": "signbit",
    "sin": "sin", "sinh": "sinh", "square": "square", "sqrt": "sqrt", "tan": "tan",
    "tanh": "tanh", "trunc": "trunc", "sigmoid": "sigmoid",
}
BINARY = {
    "add": "add", "atan2": "atan2", "bitwise_and": "bitwise_and",
    "bitwise_left_shift": "bitwise_left_shift", "bitwise_or": "bitwise_or",
    "bitwise_right_shift": "bitwise_right_shift", "bitwise_xor": "bitwise_xor",
    "copysign": "copysign", "divide": "div", "equal": "eq", "floor_divide": "floor_divide",
    "greater": "gt", "greater_equal": "ge", "hypot": "hypot", "less": "lt",
    "less_equal": "le", "logaddexp": "logaddexp", "logical_and": "and", "logical_or": "or",
    "logical_xor": "xor", "maximum": "max", "minimum": "min", "multiply": "mul",
    "nextafter": "nextafter", "not_equal": "ne", "pow": "pow", "remainder": "remainder",
    "subtract": "sub",
}
"""The standard's names and the IR operators they add."""


def arguments(*values) -> list:
    """Graph operands of ``values``: arrays as nodes, Python scalars as they are (at least
    one array: when all are scalars the first becomes an array)."""
    found = [operand(v) for v in values]
    found = [expr_of(v) if f is NotImplemented else f for v, f in zip(values, found, strict=True)]
    if not any(isinstance(f, ArrayNode) for f in found):
        found[0] = expr_of(values[0])
    return found


def _unary(name: str, op: str):
    def fn(x, /) -> Array:
        if is_sparse(x):
            return sparse_apply(name, x)
        return wrap(mapped(op, expr_of(x)))

    fn.__name__ = name
    fn.__doc__ = f"Element-wise ``{name}`` (lazy)."
    return fn


def _binary(name: str, op: str):
    def fn(x1, x2, /) -> Array:
        if is_sparse(x1) or is_sparse(x2):
            return sparse_apply(name, x1, x2)
        return wrap(mapped(op, *arguments(x1, x2)))

    fn.__name__ = name
    fn.__doc__ = f"Element-wise ``{name}`` (lazy; arrays or Python scalars, broadcast)."
    return fn


FUNCTIONS = {**{n: _unary(n, op) for n, op in UNARY.items()},
             **{n: _binary(n, op) for n, op in BINARY.items()}}
globals().update(FUNCTIONS)


def clip(x, /, min=None, max=None) -> Array:  # noqa: A002 - the standard's names
    """``x`` limited to ``[min, max]`` (either may be ``None``)."""
    out = expr_of(x)
    dtype = out.dtype
    if min is not None:
        out = mapped("max", *arguments(out, min))
    if max is not None:
        out = mapped("min", *arguments(out, max))
    result = wrap(out)
    return result if result.dtype == dtype else astype(result, dtype)


def where(condition, x1, x2, /) -> Array:
    """``x1`` where ``condition`` holds, else ``x2`` (broadcast)."""
    return wrap(mapped("select", expr_of(condition), *arguments(x1, x2)))
