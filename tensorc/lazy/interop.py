"""numpy interoperability: numpy functions called on ``tc.Array`` stay on tensorc.

Contract: ``np.<ufunc>(x, …)`` (``__call__`` of a ufunc with a tensorc meaning) returns the
tensorc element-wise function's lazy result; ``np.<function>(x, …)`` for the functions in
:data:`FUNCTIONS` (``np.sum``, ``np.einsum``, ``np.tensordot``, ``np.matmul``, …) calls the
tensorc function, its arguments bound to numpy's own signature first (a positional
``axis``, ``a_min``/``a_max``, ``dtype=``, ``ddof=``, numpy's flattening when ``axis`` is
``None``). Anything else — a function, or an argument such as ``out=`` or ``where=`` — raises
:class:`~tensorc.errors.UnsupportedError` naming it, instead of gathering a possibly large
array; ``np.asarray(x)`` gathers. numpy's functions beyond the standard (the nan
reductions, ``median``/``quantile``/``percentile``, ``pad``) are
:mod:`tensorc.lazy.numpy_functions`.

Memory (``np.may_share_memory``, ``np.shares_memory``; nothing is computed): two tensorc
arrays share memory when they are the same array, or when following index renamings (axis
permutations, inserted or dropped size-1 axes: the graph's views) from each reaches one
node; a tensorc array and a numpy array (or two tensorc arrays over leaves) when the node so
reached is a leaf holding a numpy array that numpy's own test finds sharing memory with the
other. An empty array shares nothing. Anything else (a computed result, a copy) shares
nothing: ``x[key] = value`` gives ``x`` a new node and never writes into another array.

The ``tensorc`` functions are reached through :func:`tensorc.lazy.namespace.get_namespace`
(registered by ``tensorc/__init__.py``), never by importing ``tensorc`` back.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from tensorc.errors import ArgumentError, UnsupportedError
from tensorc.lazy import numpy_functions as nf
from tensorc.lazy.array_object import Array
from tensorc.lazy.graph import RENAMINGS, ArrayNode, NodeKind
from tensorc.lazy.namespace import get_namespace

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

def _namespace():
    """The ``tensorc`` module (numpy functions become ``tc.<function>``, which includes
    ``tc.einsum`` from a layer above this one), as ``tensorc/__init__.py`` registers it in
    :mod:`tensorc.lazy.namespace`."""
    return get_namespace()


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


@functools.cache
def _signature(func) -> inspect.Signature:
    """numpy's own signature of ``func``, read once per function."""
    return inspect.signature(func)


def array_function(func, types, args, kwargs):
    module = func.__module__ or ""
    name = ("linalg." if "linalg" in module else "") + func.__name__
    adapter = FUNCTIONS.get(name)
    if adapter is None:
        raise UnsupportedError(f"numpy.{name} is not supported on tc.Array (tensorc would "
                               "have to gather the array); use np.asarray(x) to gather it "
                               "explicitly")
    try:
        arguments = _signature(func).bind(*args, **kwargs).arguments
    except TypeError as err:
        raise ArgumentError(f"numpy.{name}: {err}") from err
    return adapter(_Call(name, dict(arguments)))


class _Call:
    """The arguments of one numpy call, bound to numpy's own signature by name."""

    def __init__(self, name: str, arguments: dict) -> None:
        self.name, self.arguments = name, arguments

    def __getitem__(self, param: str):
        return self.arguments[param]

    def get(self, param: str, default=None):
        """The argument, or ``default`` when it is not given (or numpy's ``_NoValue``)."""
        value = self.arguments.get(param, default)
        return default if value is np._NoValue else value  # noqa: SLF001 - numpy's marker

    def only_defaults(self, **defaults) -> None:
        """Refuse an argument tensorc has no meaning for unless it has its default value."""
        for param, default in defaults.items():
            value = self.arguments.get(param, default)
            plain = value is np._NoValue or value is default or (  # noqa: SLF001
                isinstance(value, str) and value == default)
            if not plain:
                shown = repr(value) if isinstance(value, (str, int, float)) else "..."
                raise UnsupportedError(f"numpy.{self.name} with {param}={shown} is not "
                                       "supported on tc.Array; use the tensorc function or "
                                       "np.asarray(x)")
        extra = self.arguments.get("kwargs")
        if extra:
            raise UnsupportedError(f"numpy.{self.name} with {', '.join(extra)}= is not "
                                   "supported on tc.Array")

    def axis(self, default=None):
        axis = self.get("axis", default)
        return tuple(axis) if isinstance(axis, list) else axis


def _flat(x, call: _Call):
    """``x`` and the axis of a numpy function that flattens when ``axis`` is ``None``."""
    axis = call.axis()
    return (_namespace().reshape(x, (-1,)), 0) if axis is None else (x, axis)


def _cast(x, dtype):
    return x if dtype is None else _namespace().astype(x, dtype)


def _sum_like(target: str):
    def adapt(call: _Call):
        call.only_defaults(out=None, initial=np._NoValue, where=True)  # noqa: SLF001
        return getattr(_namespace(), target)(call["a"], axis=call.axis(),
                                             dtype=call.get("dtype"),
                                             keepdims=call.get("keepdims", False))

    return adapt


def _fold(target: str):
    def adapt(call: _Call):
        call.only_defaults(out=None, initial=np._NoValue, where=True)  # noqa: SLF001
        return getattr(_namespace(), target)(call["a"], axis=call.axis(),
                                             keepdims=call.get("keepdims", False))

    return adapt


def _moment(target: str):
    def adapt(call: _Call):
        call.only_defaults(out=None, where=True, mean=np._NoValue)  # noqa: SLF001
        kwargs = {}
        if target in ("var", "std"):
            kwargs["correction"] = call.get("correction", call.get("ddof", 0))
        return getattr(_namespace(), target)(_cast(call["a"], call.get("dtype")),
                                             axis=call.axis(),
                                             keepdims=call.get("keepdims", False), **kwargs)

    return adapt


def _arg(target: str):
    def adapt(call: _Call):
        call.only_defaults(out=None)
        return getattr(_namespace(), target)(call["a"], axis=call.axis(),
                                             keepdims=call.get("keepdims", False))

    return adapt


def _cumulative(target: str):
    def adapt(call: _Call):
        call.only_defaults(out=None)
        x, axis = _flat(call["a"], call)
        return getattr(_namespace(), target)(x, axis=axis, dtype=call.get("dtype"))

    return adapt


def _sorting(target: str):
    def adapt(call: _Call):  # kind= only chooses numpy's algorithm: tensorc's is stable
        call.only_defaults(order=None)
        x, axis = call["a"], call.axis(-1)
        if axis is None:
            x, axis = _namespace().reshape(x, (-1,)), 0
        return getattr(_namespace(), target)(x, axis=axis)

    return adapt


def _where(call: _Call):
    if "x" not in call.arguments and "y" not in call.arguments:
        return _namespace().nonzero(call["condition"])  # numpy: where(c) is nonzero(c)
    if "x" not in call.arguments or "y" not in call.arguments:
        raise ValueError("either both or neither of x and y should be given")
    return _namespace().where(call["condition"], call["x"], call["y"])


def _nonzero(call: _Call):
    return _namespace().nonzero(call["a"])


def _flatnonzero(call: _Call):
    xp = _namespace()
    return xp.nonzero(xp.reshape(call["a"], (-1,)))[0]


def _argwhere(call: _Call):
    xp = _namespace()
    x = call["a"]
    if x.ndim == 0:  # numpy: argwhere(atleast_1d(x))[:, :0], no column for no axis
        return xp.stack(xp.nonzero(xp.reshape(x, (1,))), axis=1)[:, :0]
    return xp.stack(xp.nonzero(x), axis=1)


def _extract(call: _Call):
    xp = _namespace()
    condition = xp.astype(xp.asarray(call["condition"]), xp.bool)
    return xp.reshape(call["arr"], (-1,))[xp.reshape(condition, (-1,))]


def _unique(call: _Call):
    """``np.unique`` from ``unique_all``'s fields. numpy merges every NaN into one
    (``equal_nan=True``, its default) where the standard's functions keep each NaN apart,
    so a floating input needs ``equal_nan=False`` (an integer or bool input has no NaN)."""
    xp = _namespace()
    x = call["ar"]
    call.only_defaults(axis=None, sorted=True)
    floating = np.dtype(x.dtype).kind in "fc"
    if floating and call.get("equal_nan", True):
        raise UnsupportedError("numpy.unique with equal_nan=True (its default) merges every "
                               "NaN into one, which tensorc's unique does not; pass "
                               "equal_nan=False, or use tc.unique_values")
    found = xp.unique_all(x)  # values flattened, inverse_indices in x's shape: numpy 2's
    out = [found.values]
    if call.get("return_index", False):
        out.append(found.indices)
    if call.get("return_inverse", False):
        out.append(found.inverse_indices)
    if call.get("return_counts", False):
        out.append(found.counts)
    return out[0] if len(out) == 1 else tuple(out)


def _unique_part(name: str):
    return lambda call: getattr(_namespace(), name)(call["x"])


def _clip(call: _Call):
    call.only_defaults(out=None)
    low = call.get("a_min", call.get("min"))
    high = call.get("a_max", call.get("max"))
    return _namespace().clip(call["a"], low, high)


def _squeeze(call: _Call):
    x, axis = call["a"], call.axis()
    if axis is None:
        axis = tuple(d for d, n in enumerate(x.shape) if n == 1)
    return _namespace().squeeze(x, axis)


def _tile(call: _Call):
    reps = call["reps"]
    reps = tuple(reps) if hasattr(reps, "__len__") else (reps,)
    return _namespace().tile(call["A"], reps)


def _take(call: _Call):
    call.only_defaults(out=None, mode="raise")
    x, axis = _flat(call["a"], call)
    return _namespace().take(x, call["indices"], axis=axis)


def _joined(target: str):
    def adapt(call: _Call):
        call.only_defaults(out=None, casting="same_kind")
        out = getattr(_namespace(), target)(list(call["arrays"]), axis=call.get("axis", 0))
        return _cast(out, call.get("dtype"))

    return adapt


def _like(target: str):
    def adapt(call: _Call):
        call.only_defaults(order="K", subok=True)
        tc, x = _namespace(), call["a"]
        kwargs = {"dtype": call.get("dtype"), "device": call.get("device")}
        shape = call.get("shape")
        if target == "full_like":
            if shape is None:
                return tc.full_like(x, call["fill_value"], **kwargs)
            return tc.full(shape, call["fill_value"], **{**kwargs, "dtype": kwargs["dtype"]
                                                         or x.dtype})
        if shape is None:
            return getattr(tc, target)(x, **kwargs)
        return getattr(tc, target.removesuffix("_like"))(
            shape, **{**kwargs, "dtype": kwargs["dtype"] or x.dtype})

    return adapt


def _matrix_axes(x, call: _Call):
    """``x`` with numpy's ``axis1``/``axis2`` moved last (the standard's matrix axes)."""
    axes = (call.get("axis1", 0), call.get("axis2", 1))
    return _namespace().moveaxis(x, axes, (-2, -1))


def _qr(call: _Call):
    mode = call.get("mode", "reduced")
    if mode not in ("reduced", "complete", "r"):
        raise UnsupportedError(f"numpy.linalg.qr with mode={mode!r} is not supported on "
                               "tc.Array (reduced, complete and r are)")
    result = _namespace().linalg.qr(call["a"], mode="reduced" if mode == "r" else mode)
    return result.R if mode == "r" else result


def _svd(call: _Call):
    call.only_defaults(hermitian=False)
    tc = _namespace()
    if not call.get("compute_uv", True):
        return tc.linalg.svdvals(call["a"])
    return tc.linalg.svd(call["a"], full_matrices=call.get("full_matrices", True))


def _lower_only(target: str):
    def adapt(call: _Call):
        call.only_defaults(UPLO="L")
        return getattr(_namespace().linalg, target)(call["a"])

    return adapt


def _direct(target: str, *params: str, **keywords: str):
    """Call ``target`` with numpy's ``params`` positionally and its ``keywords`` (numpy name
    → tensorc name) by keyword; ``out=`` is refused."""
    def adapt(call: _Call):
        call.only_defaults(out=None)
        fn = _namespace()
        for part in target.split("."):
            fn = getattr(fn, part)
        positional = [call[p] for p in params if p in call.arguments]
        named = {mine: call.get(theirs) for theirs, mine in keywords.items()
                 if theirs in call.arguments}
        return fn(*positional, **named)

    return adapt


def _einsum(call: _Call):
    call.only_defaults(out=None)  # optimize= is a hint: tensorc plans the contraction itself
    return _namespace().einsum(*call["operands"])


def _bound(fn):
    """A helper below taking numpy's own arguments by name."""
    return lambda call: fn(**{k: v for k, v in call.arguments.items()
                              if v is not np._NoValue})  # noqa: SLF001


def _gather(a, *args, **kwargs):
    return np.asarray(a.numpy(), *args, **kwargs)


def _dot(a, b):
    tc = _namespace()
    if getattr(a, "ndim", 1) == 0 or getattr(b, "ndim", 1) == 0:
        return tc.multiply(a, b)
    if getattr(b, "ndim", 1) <= 2:
        return tc.matmul(a, b)
    return tc.tensordot(a, b, axes=([-1], [-2]))


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


def _norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002
    if ord not in (None, 2) or (axis is None and x.ndim != 1 and ord is not None):
        raise UnsupportedError("numpy.linalg.norm on tc.Array supports the 2-norm / "
                               "Frobenius norm only")
    return _namespace().linalg.vector_norm(x, axis=axis, keepdims=keepdims)


def _nan_reduction(target, *, dtype: bool = True, moment: bool = False):
    """``np.nan<target>``: numpy's arguments to :mod:`tensorc.lazy.numpy_functions`."""
    def adapt(call: _Call):
        call.only_defaults(out=None, initial=np._NoValue, where=True,  # noqa: SLF001
                           mean=np._NoValue)  # noqa: SLF001
        kwargs = {"axis": call.axis(), "keepdims": bool(call.get("keepdims", False))}
        if dtype:
            kwargs["dtype"] = call.get("dtype")
        if moment:
            kwargs["correction"] = call.get("correction", call.get("ddof", 0))
        return target(call["a"], **kwargs)

    return adapt


def _quantile_like(target, *, q: bool = True):
    def adapt(call: _Call):
        call.only_defaults(out=None, overwrite_input=False, weights=None, interpolation=None)
        kwargs = {"axis": call.axis(), "keepdims": bool(call.get("keepdims", False))}
        if q:
            kwargs["method"] = call.get("method", "linear")
            return target(call["a"], call["q"], **kwargs)
        return target(call["a"], **kwargs)

    return adapt


def _pad(call: _Call):
    extra = dict(call.get("kwargs") or {})
    values = extra.pop("constant_values", 0)
    if extra:
        raise UnsupportedError(f"numpy.pad with {', '.join(extra)}= is not supported on "
                               "tc.Array")
    return nf.pad(call["array"], call["pad_width"], call.get("mode", "constant"),
                  constant_values=values)


def _round(call: _Call):
    """numpy's ``round``: ``rint`` of ``x`` scaled by ``10**decimals`` and scaled back (an
    integer array with ``decimals >= 0`` is itself)."""
    call.only_defaults(out=None)
    tc, x, decimals = _namespace(), call["a"], int(call.get("decimals", 0))
    if x.dtype.kind in "iub":
        if decimals >= 0:
            return tc.astype(x, x.dtype, copy=True)
        raise UnsupportedError("numpy.round of an integer array with decimals < 0 is not "
                               "supported on tc.Array")
    if decimals == 0:
        return tc.round(x)
    factor = 10.0 ** abs(decimals)
    if decimals > 0:
        return tc.divide(tc.round(tc.multiply(x, factor)), factor)
    return tc.multiply(tc.round(tc.divide(x, factor)), factor)


def _diff(call: _Call):
    tc = _namespace()
    ends = {side: call.get(side) for side in ("prepend", "append")}
    x = call["a"]
    axis = call.get("axis", -1)
    for side, value in ends.items():
        if value is not None and getattr(value, "ndim", np.ndim(value)) == 0:
            shape = list(x.shape)
            shape[axis] = 1
            # numpy makes the scalar an array first (a Python int is int64), then joins
            ends[side] = tc.full(tuple(shape), value, dtype=np.result_type(
                x.dtype, np.asarray(value).dtype) if not isinstance(value, Array)
                else value.dtype)
    return tc.diff(x, axis=axis, n=call.get("n", 1), **ends)


def _base(node: ArrayNode) -> ArrayNode:
    """The node ``node`` is an index renaming (a view) of, following renamings down."""
    while node.kind in RENAMINGS:
        node = node.args[0]
    return node


def _buffer(value):
    """The numpy array a tensorc array's memory is, if it has one here."""
    if isinstance(value, Array):
        base = _base(value._expr)  # noqa: SLF001 - tc.Array's graph node
        return base.value if base.kind is NodeKind.LEAF and isinstance(
            base.value, np.ndarray) else None
    return value if isinstance(value, np.ndarray) else None


def _sharing(numpy_test):
    """``np.may_share_memory``/``np.shares_memory`` (the rule: README, "numpy interop")."""
    def test(a, b, max_work=None):
        if any(getattr(v, "size", 1) == 0 for v in (a, b)):
            return False
        if a is b:
            return True
        if isinstance(a, Array) and isinstance(b, Array) and (
                _base(a._expr) is _base(b._expr)):  # noqa: SLF001
            return True
        first, second = _buffer(a), _buffer(b)
        if first is None or second is None:
            return False
        return bool(numpy_test(first, second))

    return lambda call: test(call["a"], call["b"])


def _ravel(call: _Call):
    call.only_defaults(order="C")
    return _namespace().reshape(call["a"], (-1,))


def _part(name: str):
    def adapt(call: _Call):
        x = call["val"]
        if name == "imag" and x.dtype.kind != "c":
            return _namespace().zeros_like(x)
        return getattr(_namespace(), name)(x) if x.dtype.kind == "c" else x

    return adapt


FUNCTIONS = {
    "sum": _sum_like("sum"), "prod": _sum_like("prod"),
    "max": _fold("max"), "amax": _fold("max"), "min": _fold("min"), "amin": _fold("min"),
    "any": _fold("any"), "all": _fold("all"),
    "mean": _moment("mean"), "var": _moment("var"), "std": _moment("std"),
    "argmax": _arg("argmax"), "argmin": _arg("argmin"),
    "count_nonzero": _direct("count_nonzero", "a", axis="axis", keepdims="keepdims"),
    "cumsum": _cumulative("cumulative_sum"), "cumprod": _cumulative("cumulative_prod"),
    "sort": _sorting("sort"), "argsort": _sorting("argsort"),
    "where": _where, "nonzero": _nonzero, "flatnonzero": _flatnonzero,
    "argwhere": _argwhere, "extract": _extract, "unique": _unique,
    "unique_values": _unique_part("unique_values"),
    "unique_counts": _unique_part("unique_counts"),
    "unique_inverse": _unique_part("unique_inverse"),
    "unique_all": _unique_part("unique_all"),
    "clip": _clip, "squeeze": _squeeze, "tile": _tile, "take": _take,
    "concatenate": _joined("concat"), "stack": _joined("stack"),
    "zeros_like": _like("zeros_like"), "ones_like": _like("ones_like"),
    "empty_like": _like("empty_like"), "full_like": _like("full_like"),
    "einsum": _einsum,
    "tensordot": _direct("tensordot", "a", "b", axes="axes"),
    "dot": _bound(lambda a, b, out=None: _dot(a, b)),
    "outer": _bound(lambda a, b, out=None: _outer(a, b)),
    "transpose": _bound(lambda a, axes=None: _namespace().transpose(a, axes)),
    "reshape": lambda call: (call.only_defaults(order="C"), _namespace().reshape(
        call["a"], call["shape"], copy=call.get("copy")))[1],
    "expand_dims": _direct("expand_dims", "a", axis="axis"),
    "broadcast_to": lambda call: (call.only_defaults(subok=False), _namespace().broadcast_to(
        call["array"], call["shape"]))[1],
    "flip": _direct("flip", "m", axis="axis"),
    "roll": _direct("roll", "a", "shift", axis="axis"),
    "moveaxis": _direct("moveaxis", "a", "source", "destination"),
    "repeat": _direct("repeat", "a", "repeats", axis="axis"),
    "astype": _direct("astype", "x", "dtype", copy="copy", device="device"),
    "result_type": lambda call: _namespace().result_type(*call["arrays_and_dtypes"]),
    "shape": _bound(_shape), "ndim": _bound(_ndim), "size": _bound(_size),
    "isclose": _bound(_isclose), "allclose": _bound(_allclose),
    "trace": lambda call: (call.only_defaults(out=None), _namespace().linalg.trace(
        _matrix_axes(call["a"], call), offset=call.get("offset", 0),
        dtype=call.get("dtype")))[1],
    "diagonal": lambda call: _namespace().linalg.diagonal(
        _matrix_axes(call["a"], call), offset=call.get("offset", 0)),
    "linalg.solve": _direct("linalg.solve", "a", "b"),
    "linalg.inv": _direct("linalg.inv", "a"),
    "linalg.det": _direct("linalg.det", "a"),
    "linalg.slogdet": _direct("linalg.slogdet", "a"),
    "linalg.matrix_power": _direct("linalg.matrix_power", "a", "n"),
    "linalg.svdvals": _direct("linalg.svdvals", "x"),
    "linalg.cholesky": _direct("linalg.cholesky", "a", upper="upper"),
    "linalg.qr": _qr, "linalg.svd": _svd,
    "linalg.eigh": _lower_only("eigh"), "linalg.eigvalsh": _lower_only("eigvalsh"),
    "linalg.norm": _bound(lambda x, ord=None, axis=None, keepdims=False:  # noqa: A006
                          _norm(x, ord, axis, keepdims)),
    "asarray": _bound(lambda a, *args, **kwargs: _gather(a, *args, **kwargs)),
    "array": _bound(lambda object, *args, **kwargs: _gather(object, *args, **kwargs)),  # noqa: A006
    "asanyarray": _bound(lambda a, *args, **kwargs: _gather(a, *args, **kwargs)),
    "copy": _bound(lambda a, *args, **kwargs: _gather(a, *args, **kwargs)),
    "nansum": _nan_reduction(nf.nansum), "nanprod": _nan_reduction(nf.nanprod),
    "nanmean": _nan_reduction(nf.nanmean),
    "nanvar": _nan_reduction(nf.nanvar, moment=True),
    "nanstd": _nan_reduction(nf.nanstd, moment=True),
    "nanmax": _nan_reduction(nf.nanmax, dtype=False),
    "nanmin": _nan_reduction(nf.nanmin, dtype=False),
    "nanargmax": _nan_reduction(nf.nanargmax, dtype=False),
    "nanargmin": _nan_reduction(nf.nanargmin, dtype=False),
    "median": _quantile_like(nf.median, q=False),
    "nanmedian": _quantile_like(nf.nanmedian, q=False),
    "quantile": _quantile_like(nf.quantile), "percentile": _quantile_like(nf.percentile),
    "nanquantile": _quantile_like(nf.nanquantile),
    "nanpercentile": _quantile_like(nf.nanpercentile),
    "pad": _pad, "round": _round, "around": _round, "diff": _diff, "ravel": _ravel,
    "real": _part("real"), "imag": _part("imag"),
    "may_share_memory": _sharing(np.may_share_memory),
    "shares_memory": _sharing(np.shares_memory),
}
"""numpy function name (``linalg.`` prefixed for ``np.linalg``) → its adapter, which takes
the call's arguments bound to numpy's signature and calls the tensorc function (numpy's
positional ``axis``, ``a_min``/``a_max``, ``dtype=``, ``ddof=``, flattening when ``axis`` is
``None``); an argument tensorc has no meaning for raises ``UnsupportedError`` naming it."""
