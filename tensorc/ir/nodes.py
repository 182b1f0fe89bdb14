"""The tensor-algebra IR: a closed set of frozen nodes over keyed collections.

A value is a keyed collection: a tensor ``A[i,k]`` is the set of ``((i,k), a)``. Every node
is a frozen, slotted dataclass with structural equality, so equal subtrees are equal values
(CSE and plan caching come for free) and passes build new trees instead of editing.

Nodes (the closed set; the rule tables in ``keys``, ``verify``, ``printer`` and ``interpret``
answer every question about each of them):

- ``Scan(tensor, indices)`` — a declared input, one index name per dimension; a repeated
  name reads the diagonal (``Scan("A", ("i", "i"))`` is ``A[i,i]``).
- ``Join(inputs, on, path)`` — n-ary equi-join on the shared index names ``on``; its key is the
  union of the inputs' keys in first-occurrence order; its value is the tuple of values.
  ``path`` is the contraction order a product join's block kernel runs (set by the
  contraction-path pass; codegen runs exactly it).
- ``Map(fn, x, key)`` — apply the expression ``fn`` to each value of ``x`` (``Arg(k)`` is the
  k-th value of a joined tuple) and re-key it; ``key`` is a permutation of ``x``'s key.
- ``ReduceByKey(monoid, x, key)`` — group ``x`` by ``key`` (a subset of ``x``'s key, in the
  order given) and fold each group with ``monoid``.
- ``Merge(old, new, monoid)`` — accumulate ``new`` into ``old`` (the ``op=`` update).

Expressions inside ``Map`` are a second closed set: ``Arg``, ``Const`` and ``OpCall``.
A :class:`Function` wraps the output node with the declared inputs and every index size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MONOIDS: dict[str, str] = {
    "+": "0",
    "*": "1",
    "max": "-inf",
    "min": "+inf",
    "or": "false",
    "and": "true",
}
"""Each monoid's name and the printed form of its identity."""


def _cached_hash(node) -> int:
    """A node's hash, computed once from its fields and kept: nodes are immutable, and an
    uncached hash walks the whole subtree each time (a set of a program's nodes costs a
    hash per node per ancestor)."""
    found = node._hash
    if found is None:
        found = hash((type(node).__name__, *(getattr(node, f) for f in node.__match_args__)))
        object.__setattr__(node, "_hash", found)
    return found


def _rebuilt(node) -> tuple:
    """How a node pickles: its fields, never its kept hash (string hashes differ between
    processes)."""
    return type(node), tuple(getattr(node, f) for f in node.__match_args__)


def _hash_slot():
    """The field where a node keeps its hash (not an argument, not printed, not compared)."""
    return field(default=None, init=False, repr=False, compare=False)

CALL_ARITY: dict[str, int | None] = {
    "mul": None,
    "add": None,
    "sub": 2,
    "div": 2,
    "neg": 1,
    "exp": 1,
    "log": 1,
    "sqrt": 1,
    "abs": 1,
    "tanh": 1,
    "sigmoid": 1,
    "relu": 1,
    "pow": 2,
    "max": 2,
    "min": 2,
    "lt": 2,
    "le": 2,
    "gt": 2,
    "ge": 2,
    "eq": 2,
    "ne": 2,
    "and": None,
    "or": None,
    "not": 1,
    "select": 3,
    # the rest of the array API standard's element-wise functions, under its names
    **{name: 1 for name in (
        "acos", "acosh", "asin", "asinh", "atan", "atanh", "bitwise_invert", "ceil", "conj",
        "cos", "cosh", "expm1", "floor", "imag", "isfinite", "isinf", "isnan", "log1p", "log2",
        "log10", "positive", "real", "reciprocal", "round", "sign", "signbit", "sin", "sinh",
        "square", "tan", "trunc")},
    **{name: 2 for name in (
        "atan2", "bitwise_and", "bitwise_left_shift", "bitwise_or", "bitwise_right_shift",
        "bitwise_xor", "copysign", "floor_divide", "hypot", "logaddexp", "xor", "nextafter",
        "remainder")},
}
"""Each ``OpCall`` operator and its number of arguments (``None``: two or more, folded left)."""

CALL_OPS: frozenset[str] = frozenset(CALL_ARITY)
"""Operators a ``OpCall`` may apply element-wise (``tensorc.ir.semantics`` defines each)."""


@dataclass(frozen=True, slots=True)
class Arg:
    """The ``position``-th value of the tuple a ``Map`` receives."""

    position: int


@dataclass(frozen=True, slots=True, eq=False)
class Const:
    """A literal scalar. Two are equal when they are the same value of the same type, bit
    for bit (``-0.0`` is not ``0.0``, ``1`` is not ``1.0`` nor ``True``, NaN equals NaN):
    plans are cached by the IR, and those constants compute different results."""

    value: float | int | bool

    def _key(self) -> tuple:
        value = self.value
        return (type(value), value.hex() if isinstance(value, float) else value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Const) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


@dataclass(frozen=True, slots=True)
class OpCall:
    """An element-wise operator applied to sub-expressions."""

    op: str
    args: tuple[Expr, ...]
    _hash: int | None = _hash_slot()
    __hash__ = _cached_hash
    __reduce__ = _rebuilt


Expr = Arg | Const | OpCall


@dataclass(frozen=True, slots=True)
class Scan:
    tensor: str
    indices: tuple[str, ...]
    _hash: int | None = _hash_slot()
    __hash__ = _cached_hash
    __reduce__ = _rebuilt


@dataclass(frozen=True, slots=True)
class Join:
    inputs: tuple[Node, ...]
    on: tuple[str, ...]
    path: tuple[tuple[int, ...], ...] | None = None
    """The contraction order the block kernel of a product join runs (opt_einsum's linear
    format), chosen by the contraction-path pass; ``()`` is numpy's single einsum loop
    (``optimize=False``); ``None`` means not decided yet (before that pass, or a join whose
    map is not a product)."""
    _hash: int | None = _hash_slot()
    __hash__ = _cached_hash
    __reduce__ = _rebuilt


@dataclass(frozen=True, slots=True)
class Map:
    fn: Expr
    x: Node
    key: tuple[str, ...]
    _hash: int | None = _hash_slot()
    __hash__ = _cached_hash
    __reduce__ = _rebuilt


@dataclass(frozen=True, slots=True)
class ReduceByKey:
    monoid: str
    x: Node
    key: tuple[str, ...]
    _hash: int | None = _hash_slot()
    __hash__ = _cached_hash
    __reduce__ = _rebuilt


@dataclass(frozen=True, slots=True)
class Merge:
    old: Node
    new: Node
    monoid: str
    _hash: int | None = _hash_slot()
    __hash__ = _cached_hash
    __reduce__ = _rebuilt


Node = Scan | Join | Map | ReduceByKey | Merge
NODE_TYPES: tuple[type, ...] = (Scan, Join, Map, ReduceByKey, Merge)


@dataclass(frozen=True, slots=True)
class InputDecl:
    """A declared input: its name, shape and dtype (a numpy dtype string, e.g. ``float64``);
    ``sparse`` is ``None`` for a dense input, else the storage level of each dimension
    (``"dense"`` or ``"compressed"``) of a sparse one (a ``.tc`` input declared ``sparse``)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    sparse: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Function:
    """One statement's IR: declared inputs, the size of every index, the output node.

    ``dtype`` is the dtype every block kernel computes in (numpy's result dtype, or the
    ``dtype=`` the caller asked for).
    """

    inputs: tuple[InputDecl, ...]
    sizes: tuple[tuple[str, int], ...]
    output: Node
    dtype: str
    _hash: int | None = _hash_slot()
    __hash__ = _cached_hash
    __reduce__ = _rebuilt

    @property
    def size_of(self) -> dict[str, int]:
        return dict(self.sizes)

    def decl(self, name: str) -> InputDecl:
        for decl in self.inputs:
            if decl.name == name:
                return decl
        raise KeyError(name)

    def with_output(self, output: Node) -> Function:
        return Function(self.inputs, self.sizes, output, self.dtype)


def children(node: Node) -> tuple[Node, ...]:
    """The direct inputs of ``node``, in order."""
    if isinstance(node, Scan):
        return ()
    if isinstance(node, Join):
        return node.inputs
    if isinstance(node, (Map, ReduceByKey)):
        return (node.x,)
    if isinstance(node, Merge):
        return (node.old, node.new)
    raise TypeError(f"not an IR node: {node!r}")


def post_order(root: Node) -> list[Node]:
    """Every distinct node under ``root``, children before parents, deterministic."""
    order: list[Node] = []
    seen: set[Node] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            if node not in seen:
                seen.add(node)
                order.append(node)
            continue
        if node in seen:
            continue
        stack.append((node, True))
        for child in reversed(children(node)):
            stack.append((child, False))
    return order


def mul_of_args(count: int) -> Expr:
    """``#0 * #1 * … `` — the product a ``count``-way einsum join maps with."""
    if count == 1:
        return Arg(0)
    return OpCall("mul", tuple(Arg(k) for k in range(count)))


def is_product_of_args(fn: Expr, count: int) -> bool:
    """Whether ``fn`` is exactly the product of all ``count`` joined values, in order."""
    return fn == mul_of_args(count)
