"""The expression graph behind lazy arrays: one :class:`ArrayNode` per array operation.

(Not to be confused with the IR's or the front end's expressions: an ``ArrayNode`` is a node
of the lazy array graph only.)

Contract: an :class:`ArrayNode` knows its ``shape`` and ``dtype`` at once (numpy's own
promotion, found by applying the numpy function to one-element arrays, so every result type is
numpy's), its operation and its operands; ``value`` is set once it has been evaluated (a numpy
array or a :class:`~tensorc.runtime.ray.arrays.DistributedArray`), after which it is a leaf for
every program that reads it. Its ``kind`` is one of the closed enum :class:`NodeKind` (the
lowering handles every member, ``tests/test_lazy_arrays.py`` checks it):

- ``LEAF`` — a value (``value`` set from the start);
- ``MAP`` — an element-wise IR operator (``op``, a name of ``tensorc.ir.nodes.CALL_ARITY``)
  over arrays and Python scalars, broadcast by the standard's rules;
- ``REDUCE`` — fold ``axes`` with a monoid (``op``: ``+``, ``*``, ``max``, ``min``, ``or``,
  ``and``) in ``dtype``;
- ``CONTRACT`` — a sum of products (einsum): ``params = (operand index letters, output
  letters)``;
- ``PERMUTE`` (``params = axes``), ``EXPAND`` (insert size-1 axes at ``params``),
  ``SQUEEZE`` (drop the size-1 axes ``params``) — pure index renamings (:data:`RENAMINGS`);
- ``CAST`` — convert to ``dtype``;
- ``WHOLE`` — a whole-array operation (``op``, a tuple for
  :mod:`tensorc.codegen.whole_array`) whose result has the given shape and dtype;
- ``DEFERRED`` — work that is not one array program (a block program such as a large
  ``linalg.solve``, re-blocking an array on Ray): ``op`` is a callable, ``params`` its name.
  When the node's value is needed, its operands are evaluated first (their own program),
  then ``op(*operand values)`` runs and returns the value (a numpy array or a
  ``DistributedArray`` of the node's shape; :mod:`tensorc.lazy.evaluate`). Lowering never sees
  one not yet evaluated, except for ``explain()``, where it stands as an input.

Mutation: a node is not immutable. Exactly one change ever happens to it, on evaluation
(:meth:`ArrayNode.become_leaf`, called only by :mod:`tensorc.lazy.evaluate`): ``value`` goes
from ``None`` to the computed value, ``kind`` becomes ``LEAF``, ``op`` and ``params`` become
``None`` and ``args`` becomes ``()``. ``shape`` and ``dtype`` never change. Why in place:
every ``Array`` and every later node that refers to this node sees the value at once (no
re-evaluation, a later program reads it as an input), and dropping ``args`` releases the
operands, so the graph under an evaluated array (and its intermediate values) can be freed.
Identity matters for the same reason: common subexpressions of later programs are found by
the identity of leaf values, and ``explain()`` finds a node's program by the node. Nothing
else changes a node: ``x[k] = v`` and in-place operators give the ``Array`` a new node
(``Array._expr``) and leave the old one as it was. One exception: the leaf an immediate call
made gets that call's value made again when its first gather (``Array.numpy()``) finds a
block lost with a Ray node.
"""

from __future__ import annotations

import enum
import functools

import numpy as np

from tensorc.errors import ShapeError, TypeCheckError
from tensorc.ir.semantics import CALL_FUNCS


class NodeKind(enum.Enum):
    """The kind of an :class:`ArrayNode` (the module docstring says what each one means)."""

    LEAF = "leaf"
    MAP = "map"
    REDUCE = "reduce"
    CONTRACT = "contract"
    PERMUTE = "permute"
    EXPAND = "expand"
    SQUEEZE = "squeeze"
    CAST = "cast"
    WHOLE = "whole"
    DEFERRED = "deferred"


RENAMINGS = frozenset({NodeKind.PERMUTE, NodeKind.EXPAND, NodeKind.SQUEEZE})
"""Kinds that only rename indices: free inside any element-wise statement."""


class ArrayNode:
    """One node of the expression graph (see the module docstring)."""

    __slots__ = ("kind", "op", "args", "params", "shape", "dtype", "value", "__weakref__")

    def __init__(self, kind: NodeKind, op, args: tuple, params, shape: tuple[int, ...],
                 dtype: np.dtype, value=None) -> None:
        self.kind = kind
        self.op = op
        self.args = args
        self.params = params
        self.shape = tuple(int(n) for n in shape)
        self.dtype = np.dtype(dtype)
        self.value = value

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def become_leaf(self, value) -> None:
        """Hold the evaluated ``value`` and drop the operation and operands (the only change
        a node ever sees; see the module docstring)."""
        self.value = value
        self.kind, self.op, self.args, self.params = NodeKind.LEAF, None, (), None

    def __repr__(self) -> str:
        return (f"ArrayNode({self.kind.value}, {self.op!r}, shape={self.shape}, "
                f"dtype={self.dtype})")


def leaf(value) -> ArrayNode:
    """An evaluated value (numpy array or ``DistributedArray``) as a graph leaf."""
    return ArrayNode(NodeKind.LEAF, None, (), None, tuple(value.shape), value.dtype, value)


def deferred(fn, args: tuple, shape, dtype, name: str) -> ArrayNode:
    """A ``deferred`` node (module docstring): ``fn(*values of args)`` computes it."""
    return ArrayNode(NodeKind.DEFERRED, fn, tuple(args), name, shape, dtype)


@functools.lru_cache(maxsize=4096)
def _probe(op: str, kinds: tuple) -> np.dtype:
    """numpy's result dtype of ``op`` on ``kinds``: dtypes, and Python scalars as
    ``(type, value)`` pairs (``1``, ``1.0`` and ``True`` are equal keys, not equal kinds;
    the value matters only where numpy refuses an int the dtype cannot hold)."""
    values = [np.ones(1, dtype=k) if isinstance(k, np.dtype) else k[1] for k in kinds]
    with np.errstate(all="ignore"):
        return np.asarray(CALL_FUNCS[op](*values)).dtype


def map_dtypes(op: str, args: tuple) -> tuple[np.dtype, np.dtype]:
    """``(result dtype, compute dtype)`` of element-wise ``op`` on ``args`` (``ArrayNode`` or
    Python scalars), as numpy types it; a statement computes in the compute dtype (operands
    promoted; the result type when the operator makes floats of integers)."""
    kinds = tuple(a.dtype if isinstance(a, ArrayNode) else _scalar(a) for a in args)
    try:
        result = _probe(op, tuple(k if isinstance(k, np.dtype) else (type(k), k)
                                  for k in kinds))
        arrays = [k for k in kinds if isinstance(k, np.dtype)]
        scalars = [k for k in kinds if not isinstance(k, np.dtype)]
        compute = np.result_type(*arrays, *scalars)
    except TypeError as err:
        names = ", ".join(str(k) for k in kinds)
        raise TypeCheckError(f"{op} is not defined for ({names}): {err}") from err
    if result.kind in "fc" and compute.kind not in "fc":
        compute = result
    return result, compute


def _scalar(value):
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, complex):
        return complex(value)
    raise TypeCheckError(f"not an array or a Python scalar: {value!r}")


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The standard's broadcast of ``shapes`` (a ShapeError-like TypeCheckError otherwise)."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError as err:
        raise ShapeError(f"shapes {', '.join(map(str, shapes))} do not broadcast") from err


_COMPARISONS = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}
"""Comparison operators and each one's mirror (``s < x`` is ``x > s``)."""


def _in_range_comparison(op: str, args: tuple) -> tuple[str, tuple]:
    """``(op, args)`` of a comparison of an integer array with a Python int outside its
    dtype, rewritten against the dtype's nearest bound: numpy 2 compares by value
    (``uint8 < -1`` is all false), where converting the int would overflow."""
    if op not in _COMPARISONS or len(args) != 2:
        return op, args
    first, second = args
    if isinstance(first, ArrayNode) and type(second) is int:
        array, scalar = first, second
    elif isinstance(second, ArrayNode) and type(first) is int:
        array, scalar, op = second, first, _COMPARISONS[op]
    else:
        return op, args
    if array.dtype.kind not in "iu":
        return op, args
    info = np.iinfo(array.dtype)
    if scalar < info.min:  # x < s, x <= s, x == s never hold; x > s, x >= s, x != s always
        return ("lt" if op in ("lt", "le", "eq") else "ge"), (array, int(info.min))
    if scalar > info.max:  # x < s, x <= s, x != s always hold; x > s, x >= s, x == s never
        return ("le" if op in ("lt", "le", "ne") else "gt"), (array, int(info.max))
    return (op, args) if array is first else (_COMPARISONS[op], (scalar, array))


def mapped(op: str, *args) -> ArrayNode:
    """The element-wise ``op`` of ``args`` (at least one ``ArrayNode``)."""
    op, args = _in_range_comparison(op, args)
    shapes = [a.shape for a in args if isinstance(a, ArrayNode)]
    shape = broadcast_shapes(*shapes)
    result, _ = map_dtypes(op, args)
    return ArrayNode(NodeKind.MAP, op, tuple(args), None, shape, result)


def compute_dtype(expr: ArrayNode) -> np.dtype:
    """The dtype a statement rooted at ``expr`` computes in."""
    if expr.kind is NodeKind.MAP:
        return map_dtypes(expr.op, expr.args)[1]
    if expr.kind is NodeKind.CONTRACT:
        return np.result_type(*(a.dtype for a in expr.args))
    return expr.dtype
