"""The element-wise meaning of the IR, in numpy: shared by the reference interpreter and the
block kernels so both compute with the same definitions.

- :data:`MONOID_UFUNCS` — each monoid of ``ReduceByKey``/``Merge`` as a numpy ufunc;
- :data:`CALL_FUNCS` — each ``OpCall`` operator as a vectorised numpy function;
- :func:`evaluate_map_expr` — a ``Map`` expression over broadcast numpy values (a float
  operator whose operand is a temporary of the result's shape and dtype writes into it:
  the same values, one fresh block fewer per operator; the operands given are never
  written);
- :func:`align` — view an array keyed ``have`` with the axes of ``want`` (size-1 where it has
  none), the one primitive both joins and element-wise kernels need.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from tensorc.ir.nodes import CALL_ARITY, Arg, Const, Expr, OpCall

MONOID_UFUNCS: dict[str, np.ufunc] = {
    "+": np.add,
    "*": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
    "or": np.logical_or,
    "and": np.logical_and,
}

MONOID_IDENTITY: dict[str, float | bool] = {
    "+": 0,
    "*": 1,
    "max": -np.inf,
    "min": np.inf,
    "or": False,
    "and": True,
}
"""Each monoid's identity as a value (``MONOIDS`` in ``ir.nodes`` holds its printed form)."""



def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * np.asarray(x)) + 1.0)  # stable for large |x|


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


CALL_FUNCS: dict[str, Callable[..., np.ndarray]] = {
    "mul": np.multiply,
    "add": np.add,
    "sub": np.subtract,
    "div": np.true_divide,
    "neg": np.negative,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "abs": np.abs,
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
    "relu": _relu,
    "pow": np.power,
    "max": np.maximum,
    "min": np.minimum,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
    "and": np.logical_and,
    "or": np.logical_or,
    "not": np.logical_not,
    "select": np.where,
    "acos": np.arccos,
    "acosh": np.arccosh,
    "asin": np.arcsin,
    "asinh": np.arcsinh,
    "atan": np.arctan,
    "atanh": np.arctanh,
    "bitwise_invert": np.invert,
    "ceil": np.ceil,
    "conj": np.conj,
    "cos": np.cos,
    "cosh": np.cosh,
    "expm1": np.expm1,
    "floor": np.floor,
    "imag": np.imag,
    "isfinite": np.isfinite,
    "isinf": np.isinf,
    "isnan": np.isnan,
    "log1p": np.log1p,
    "log2": np.log2,
    "log10": np.log10,
    "positive": np.positive,
    "real": np.real,
    "reciprocal": np.reciprocal,
    "round": np.round,
    "sign": np.sign,
    "signbit": np.signbit,
    "sin": np.sin,
    "sinh": np.sinh,
    "square": np.square,
    "tan": np.tan,
    "trunc": np.trunc,
    "atan2": np.arctan2,
    "bitwise_and": np.bitwise_and,
    "bitwise_left_shift": np.left_shift,
    "bitwise_or": np.bitwise_or,
    "bitwise_right_shift": np.right_shift,
    "bitwise_xor": np.bitwise_xor,
    "copysign": np.copysign,
    "floor_divide": np.floor_divide,
    "hypot": np.hypot,
    "logaddexp": np.logaddexp,
    "xor": np.logical_xor,
    "nextafter": np.nextafter,
    "remainder": np.remainder,
}
"""The numpy meaning of every ``OpCall`` operator (vectorised; variadic ones fold left)."""


IN_PLACE_OPS = frozenset({"add", "sub", "mul", "div", "neg", "sqrt", "square", "abs",
                          "exp", "log", "reciprocal"})
"""Float operators computed into a temporary operand of the result's shape and dtype (a
ufunc written over its own input gives the values it would give into a fresh array)."""


def evaluate_map_expr(expr: Expr, values: Sequence[np.ndarray], dtype: np.dtype) -> np.ndarray:
    """The value of ``expr`` with ``Arg(k)`` bound to ``values[k]`` (numpy broadcasting);
    ``values`` are only read."""
    return _evaluate(expr, values, dtype)[0]


def _evaluate(expr: Expr, values: Sequence[np.ndarray], dtype: np.dtype):
    """``(value, owned)``: ``owned`` when the value is a temporary made here, which a later
    operator may write into."""
    if isinstance(expr, Arg):
        return values[expr.position], False
    if isinstance(expr, Const):
        return np.asarray(expr.value, dtype=dtype), False
    if isinstance(expr, OpCall):
        evaluated = [_evaluate(a, values, dtype) for a in expr.args]
        args = [value for value, _ in evaluated]
        owned = [value for value, mine in evaluated if mine]
        fn = CALL_FUNCS[expr.op]
        if CALL_ARITY[expr.op] is not None:
            result = _call(expr.op, fn, args, owned)
            return result, _owns(result, args, owned)
        result = _call(expr.op, fn, args[:2], owned)
        mine = _owns(result, args[:2], owned)
        for arg in args[2:]:
            step = _call(expr.op, fn, [result, arg], [result] if mine else [])
            mine = (mine and step is result) or _owns(step, [result, arg], [])
            result = step
        return result, mine
    raise TypeError(f"not an expression: {expr!r}")


def _owns(result, args, owned) -> bool:
    """Whether ``result`` is a temporary: one of the ``owned`` temporaries written into, or
    memory of its own that is none of ``args`` (``np.real`` of a real array returns its
    operand; a view is not its own memory)."""
    if any(result is t for t in owned):
        return True
    return (isinstance(result, np.ndarray) and result.flags.owndata
            and not any(result is a for a in args))


def _call(op: str, fn, args: list, owned: list) -> np.ndarray:
    """``fn(*args)``, into an owned temporary operand when that gives the same values."""
    if op in IN_PLACE_OPS and owned:
        target = next((t for t in owned if any(t is a for a in args)
                       and isinstance(t, np.ndarray) and t.ndim and t.dtype.kind == "f"
                       and t.flags.c_contiguous and t.flags.writeable), None)
        if (target is not None and all(isinstance(a, np.ndarray) and a.dtype == target.dtype
                                       for a in args)
                and np.broadcast_shapes(*(a.shape for a in args)) == target.shape):
            return fn(*args, out=target)
    return fn(*args)


def align(value: np.ndarray, have: Sequence[str], want: Sequence[str]) -> np.ndarray:
    """View ``value`` (axes named ``have``) with the axes ``want``, inserting size-1 axes."""
    have = tuple(have)
    order = [have.index(name) for name in want if name in have]
    moved = value.transpose(order) if order != list(range(len(order))) else value
    shape = []
    extents = iter(moved.shape)
    for name in want:
        shape.append(next(extents) if name in have else 1)
    return moved.reshape(shape)
