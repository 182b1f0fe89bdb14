"""``tc.Array``: a lazy array of the array API standard, local or distributed.

Contract: an :class:`Array` is a node of an expression graph (:mod:`tensorc.lazy.graph`).
Operators and namespace functions add nodes and return new arrays at once (shape and dtype
known, nothing computed); a value is computed when it is needed — ``compute()``,
``tc.compute(a, b, …)``, ``np.asarray``, ``float``/``int``/``bool``, printing — and then the
whole graph under it is planned and run as one program (:mod:`tensorc.lazy.evaluate`), on
the Ray session when there is one, else in this process. ``x[key] = value`` and the in-place
operators (``x += y``) give ``x`` a new node that computes the updated array (lazily, as one
whole-array task for ``x[key] = value``); the old node, and every array built from it
before, keep the old values (no array is a view of another). An evaluated array on Ray
keeps its blocks on the nodes (``blocks``, ``block_nodes()``, ``grid``, ``block_shape``,
``node_grid``).

numpy functions keep arrays on tensorc (``__array_ufunc__``/``__array_function__``, see
:mod:`tensorc.lazy.interop`); a numpy function tensorc does not implement raises
:class:`~tensorc.errors.UnsupportedError` naming it rather than gathering the array.

Wiring: the chapter modules import this one (they build ``Array``s), so the methods that call
chapter functions (``.T``, ``.mT``, ``@``, ``x[k]``, ``x[k] = v``, ``explain()``, numpy
interop) reach them through :mod:`tensorc.lazy.namespace` (``_chapters()``), bound once by
``tensorc/lazy/__init__.py``; ``__array_namespace__()`` returns the ``tensorc`` module that
``tensorc/__init__.py`` registers there. This module imports no chapter and nothing loads a
module by name, so every import edge is visible to import-linter and there is no cycle.
"""

from __future__ import annotations

import math

import numpy as np

from tensorc.errors import NodeLostError, ShapeError, TypeCheckError
from tensorc.lazy import evaluate as _evaluate
from tensorc.lazy import namespace as _namespace
from tensorc.lazy.graph import ArrayNode, NodeKind, leaf, mapped
from tensorc.runtime.ray.arrays import DistributedArray

REPR_ELEMENTS = 1000
"""Arrays up to this size print their values (larger ones print a summary)."""


class Array:
    """A lazy array (see the module docstring)."""

    __slots__ = ("_expr", "_again", "__weakref__")
    __array_priority__ = 20

    def __init__(self, expr: ArrayNode) -> None:
        self._expr = expr
        self._again = None  # an immediate call's result: that call run again, until gathered

    # -- attributes ----------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._expr.shape

    @property
    def dtype(self) -> np.dtype:
        return self._expr.dtype

    @property
    def ndim(self) -> int:
        return self._expr.ndim

    @property
    def size(self) -> int:
        return math.prod(self._expr.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def device(self) -> str:
        return "cpu"

    def to_device(self, device, /, *, stream=None) -> Array:
        if device != "cpu":
            raise TypeCheckError(f"tensorc arrays live on device 'cpu', not {device!r}")
        return self

    @property
    def T(self) -> Array:  # noqa: N802 - the standard's name
        if self.ndim != 2:
            raise TypeCheckError(f".T needs a 2-d array, got {self.ndim}-d; use "
                                 "permute_dims or matrix_transpose")
        return _chapters().manipulation.permute_dims(self, (1, 0))

    @property
    def mT(self) -> Array:  # noqa: N802 - the standard's name
        return _chapters().linear.matrix_transpose(self)

    @property
    def evaluated(self) -> bool:
        """Whether the value exists (computed, or given)."""
        return self._expr.value is not None

    # -- evaluation ----------------------------------------------------------------------
    def compute(self) -> Array:
        """Evaluate (the whole graph under this array, as one program); returns ``self``."""
        _evaluate.evaluate_graph([self._expr])
        return self

    def value(self) -> np.ndarray | DistributedArray:
        """The evaluated value: a numpy array (local) or a ``DistributedArray`` (Ray)."""
        self.compute()
        return self._expr.value

    def numpy(self) -> np.ndarray:
        """Evaluate and gather into one numpy array. At the first gather of an immediate
        call's result, a block lost with its node (Ray cannot rebuild a block a node's call
        made) makes the call run again, once, on its operands while they live; otherwise the
        loss raises :class:`~tensorc.errors.NodeLostError`."""
        value = self.value()
        if not isinstance(value, DistributedArray):
            return np.asarray(value)
        again, self._again = self._again, None
        try:
            return value.numpy()
        except NodeLostError:
            fresh = again() if again is not None else None
            if fresh is None:
                raise
            self._expr.value = fresh  # the same call's value (graph module docstring)
            return fresh.numpy()

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        result = self.numpy()
        return result if dtype is None else result.astype(dtype, copy=False)

    def explain(self) -> str:
        """The program that computes this array, its plan and (once run) its statistics."""
        return _chapters().explaining.explain(self)

    # -- distributed layout (evaluated on Ray) -------------------------------------------
    def _blocks_value(self) -> DistributedArray:
        value = self.value()
        if not isinstance(value, DistributedArray):
            raise TypeCheckError("this array was computed in this process, not on Ray "
                                 "(tc.init(...) first)")
        return value

    @property
    def blocks(self):
        return self._blocks_value().blocks

    @property
    def grid(self) -> tuple[int, ...]:
        return self._blocks_value().grid

    @property
    def block_shape(self) -> tuple[int, ...]:
        return self._blocks_value().block_shape

    @property
    def node_grid(self) -> tuple[int, ...]:
        return self._blocks_value().node_grid

    def block_nodes(self) -> dict:
        return self._blocks_value().block_nodes()

    # -- Python protocol -----------------------------------------------------------------
    def _scalar(self, kind):
        """The value of a 0-d array as a Python ``kind`` (numpy 2: only 0-d arrays convert,
        a ``TypeError`` otherwise)."""
        if self.ndim != 0:
            raise TypeCheckError(f"only a 0-d array converts to {kind.__name__} (numpy: only "
                                 f"0-dimensional arrays can be converted to Python scalars), "
                                 f"this one has shape {self.shape}")
        return kind(self.numpy().item())

    def __bool__(self) -> bool:
        if self.size != 1:  # numpy's truth value: any one-element array has one
            what = "an empty array" if self.size == 0 else "an array with more than one element"
            raise ShapeError(f"the truth value of {what} (shape {self.shape}) is ambiguous; "
                             "use tc.any(x) or tc.all(x)")
        return bool(self.numpy().reshape(()).item())

    def __float__(self) -> float:
        return self._scalar(float)

    def __int__(self) -> int:
        return self._scalar(int)

    def __complex__(self) -> complex:
        return self._scalar(complex)

    def __index__(self) -> int:
        if self.dtype.kind not in "iu":
            raise TypeCheckError(f"only integer arrays are indices, not {self.dtype}")
        return self._scalar(int)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        for k in range(self.shape[0]):
            yield self[k]

    def __repr__(self) -> str:
        if self.size <= REPR_ELEMENTS:
            text = np.array2string(self.numpy(), separator=", ", prefix="tc.Array(")
            return f"tc.Array({text}, dtype={self.dtype})"
        where = "Ray" if isinstance(self._expr.value, DistributedArray) else "local"
        state = f"evaluated, {where}" if self.evaluated else "not evaluated"
        return f"tc.Array(shape={self.shape}, dtype={self.dtype}, {state})"

    __str__ = __repr__

    def __array_namespace__(self, /, *, api_version=None):
        if api_version not in (None, "2024.12", "2023.12", "2022.12", "2021.12"):
            raise ValueError(f"version {api_version!r} of the array API standard is not "
                             "supported: tensorc implements 2024.12 (and the earlier 2023.12, "
                             "2022.12, 2021.12)")
        return _namespace.get_namespace()

    def __dlpack__(self, /, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self.numpy().__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return (1, 0)

    def __setitem__(self, key, value) -> None:
        self._expr = _chapters().indexing.setitem(self, key, value)

    def _update(self, result) -> Array:
        """``self`` given ``result``'s values (an in-place operator): the shape must stay,
        the dtype is kept (numpy's ``same_kind`` casting)."""
        if result is NotImplemented:
            return NotImplemented
        node = result._expr
        if node.shape != self.shape:
            raise ShapeError(f"an in-place operation cannot change the shape {self.shape} "
                             f"into {node.shape}")
        if node.dtype != self.dtype:
            if not np.can_cast(node.dtype, self.dtype, casting="same_kind"):
                raise TypeCheckError(f"cannot cast the result {node.dtype} of an in-place "
                                     f"operation to the array's {self.dtype}")
            node = ArrayNode(NodeKind.CAST, None, (node,), None, node.shape, self.dtype)
        self._expr = node
        return self

    def __getitem__(self, key) -> Array:
        return _chapters().indexing.getitem(self, key)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _chapters().interop.array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return _chapters().interop.array_function(func, types, args, kwargs)

    # -- numpy's array methods -----------------------------------------------------------
    # What clients (scikit-learn, xarray, scipy) call on arrays, with numpy's signatures:
    # each is the numpy function on this array, which __array_function__ keeps on tensorc.
    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def real(self) -> Array:
        return np.real(self)

    @property
    def imag(self) -> Array:
        return np.imag(self)

    def transpose(self, *axes) -> Array:
        """numpy's ``x.transpose(*axes)`` / ``x.transpose(axes)``; no axes reverses them."""
        if len(axes) == 1 and (axes[0] is None or hasattr(axes[0], "__len__")):
            axes = axes[0]
        return np.transpose(self, tuple(axes) if axes else None)

    def reshape(self, *shape, order="C", copy=None) -> Array:
        if len(shape) == 1 and hasattr(shape[0], "__len__"):
            shape = shape[0]
        return np.reshape(self, tuple(shape), order=order, copy=copy)

    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True) -> Array:
        return np.astype(self, dtype, copy=copy)

    def copy(self, order="C") -> Array:
        """A new array of the same values (a node of its own: it shares no memory)."""
        node = self._expr
        return wrap(ArrayNode(NodeKind.CAST, None, (node,), None, node.shape, node.dtype))

    def ravel(self, order="C") -> Array:
        return np.ravel(self, order=order)

    def flatten(self, order="C") -> Array:
        return np.ravel(self.copy(), order=order)

    def squeeze(self, axis=None) -> Array:
        return np.squeeze(self, axis)

    def dot(self, b, out=None) -> Array:
        return np.dot(self, b, out=out)

    def round(self, decimals=0, out=None) -> Array:
        return np.round(self, decimals, out=out)

    def clip(self, min=None, max=None, out=None) -> Array:  # noqa: A002 - numpy's names
        return np.clip(self, min, max, out=out)

    def conj(self) -> Array:
        return np.conjugate(self)

    conjugate = conj

    # -- operators -----------------------------------------------------------------------
    def __matmul__(self, other):
        return _chapters().linear.matmul(self, other)

    def __imatmul__(self, other):
        return self._update(_chapters().linear.matmul(self, other))

    def __rmatmul__(self, other):
        return _chapters().linear.matmul(other, self)

    def __neg__(self):
        return wrap(mapped("neg", self._expr))

    def __pos__(self):
        return wrap(mapped("positive", self._expr))

    def __abs__(self):
        return wrap(mapped("abs", self._expr))

    def __invert__(self):
        op = "not" if self.dtype == np.bool_ else "bitwise_invert"
        return wrap(mapped(op, self._expr))


def _binary(op: str, reflected: bool = False):
    def method(self, other):
        other_expr = operand(other, self.dtype)
        if other_expr is NotImplemented:
            return NotImplemented
        args = (other_expr, self._expr) if reflected else (self._expr, other_expr)
        return wrap(mapped(op, *args))

    return method


_OPERATORS = {
    "add": "add", "sub": "sub", "mul": "mul", "truediv": "div", "floordiv": "floor_divide",
    "mod": "remainder", "pow": "pow", "lshift": "bitwise_left_shift",
    "rshift": "bitwise_right_shift",
}
def _inplace(name: str):
    def method(self, other):
        return self._update(getattr(self, f"__{name}__")(other))

    return method


for _name, _op in _OPERATORS.items():
    setattr(Array, f"__{_name}__", _binary(_op))
    setattr(Array, f"__r{_name}__", _binary(_op, reflected=True))
    setattr(Array, f"__i{_name}__", _inplace(_name))
for _name, _op in {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "eq": "eq",
                   "ne": "ne"}.items():
    setattr(Array, f"__{_name}__", _binary(_op))
for _name in ("and", "or", "xor"):
    def _logical(name):
        def forward(self, other, reflected=False):
            other_expr = operand(other, self.dtype)
            if other_expr is NotImplemented:
                return NotImplemented
            both = (self._expr, other_expr)
            is_bool = all(e.dtype == np.bool_ if isinstance(e, ArrayNode) else isinstance(e, bool)
                          for e in both)
            op = name if is_bool else f"bitwise_{name}"
            return wrap(mapped(op, *(both[::-1] if reflected else both)))

        return forward, lambda self, other: forward(self, other, True)

    _forward, _reflected = _logical(_name)
    setattr(Array, f"__{_name}__", _forward)
    setattr(Array, f"__r{_name}__", _reflected)
    setattr(Array, f"__i{_name}__", _inplace(_name))
Array.__hash__ = None  # arrays compare element-wise


def _numpy_method(name: str):
    function = getattr(np, name)

    def method(self, *args, **kwargs):
        return function(self, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = f"numpy's ``x.{name}(...)``: ``np.{name}(x, ...)`` (kept on tensorc)."
    return method


for _name in ("sum", "prod", "mean", "std", "var", "max", "min", "argmax", "argmin", "any",
              "all", "cumsum", "cumprod", "trace", "diagonal", "argsort"):
    setattr(Array, _name, _numpy_method(_name))


def wrap(expr: ArrayNode) -> Array:
    return Array(expr)


def operand(value, like_dtype=None):
    """The graph node of an operand: an ``Array``'s expression, a Python scalar as is, a
    numpy array or scalar as a leaf (a numpy scalar has its dtype, as in numpy 2, also
    ``np.float64``, which subclasses ``float``); ``NotImplemented`` for anything else."""
    if isinstance(value, Array):
        return value._expr  # noqa: SLF001 - this module's own class
    if isinstance(value, ArrayNode):
        return value
    if isinstance(value, np.generic):
        return leaf(np.asarray(value))
    if isinstance(value, (bool, int, float, complex)):
        return value
    if isinstance(value, np.ndarray):
        return leaf(value)
    if isinstance(value, DistributedArray):
        return leaf(value)
    return NotImplemented


def expr_of(value) -> ArrayNode:
    """The graph node of an array argument (an ``Array`` or anything numpy converts)."""
    found = operand(value)
    if isinstance(found, ArrayNode):
        return found
    if found is NotImplemented or isinstance(found, (bool, int, float, complex)):
        try:
            data = np.asarray(value)
        except Exception as err:  # noqa: BLE001 - reported as a type error
            raise TypeCheckError(f"not an array: {value!r}") from err
        if data.dtype.hasobject:
            raise TypeCheckError(f"not an array of numbers: {value!r}")
        return leaf(data)
    return found


def _chapters() -> _namespace.Chapters:
    """The chapter modules ``Array``'s methods call, bound by ``tensorc/lazy/__init__.py``
    (they import this module, so it cannot import them; :mod:`tensorc.lazy.namespace`)."""
    return _namespace.chapters
