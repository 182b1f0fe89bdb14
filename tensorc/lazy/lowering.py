"""Lower an expression graph to one SSA statement program (the IR ``.tc`` programs use).

Contract: ``lower_graph(roots) -> LoweredGraph`` turns the graph under ``roots`` (``ArrayNode``
nodes not yet evaluated) into an :class:`~tensorc.frontend.tc_lower.Unrolled` program whose
statements are IR ``Function``s (join / map / reduceByKey) or whole-array operations, plus the
input values by label and the label of each root.

- Common subexpressions are shared: structurally equal nodes over the same leaf values
  become one statement.
- Element-wise work is fused (Spartan's whole-expression tiling): a ``map`` or index
  renaming used once is inlined into the element-wise or reduction statement that reads it
  when both compute in the same dtype, so ``sum((x - m) ** 2, axis=0)`` is one statement with
  no temporary. A small element-wise expression (up to ``RECOMPUTE_MAPS`` operations) read
  by up to ``RECOMPUTE_USES`` such statements is recomputed in each instead of stored: a
  statement costs a round of calls on Ray, a few more operations per element do not.
  Renamings (``.T``, ``permute_dims``, inserting or dropping size-1 axes) are
  free everywhere, also under a contraction, which keeps its operands as plain scans so its
  block kernel stays a BLAS product. A product ``a * b`` read once by a contraction is
  spread into two of its operands (``X.T @ (X * w[:, None])`` is one ``ij,i,ik->jk``).
- Broadcasting follows the standard: a size-1 axis against a longer one gets its own index
  of extent 1, folded away by the statement; an output axis of extent 1 that no operand has
  reads a one-element ``unit`` input.
- Every statement's node is listed with its label (``LoweredGraph.intermediates`` for those
  that are not roots), so an evaluation can keep their values: a later program reading such
  a node then reads its value instead of computing it again.
- Labels are deterministic (inputs ``x0, x1, …``, statements ``t0, t1, …`` in dependency
  order), so the same computation on new data lowers to an equal program and reuses its
  plans. The lowering itself is reused too: a graph of the same shape (the same nodes,
  scalars, leaf shapes and dtypes and sharing, whatever the leaves' values) gets the
  program lowered the first time (the same ``Unrolled`` object, so its plans are found
  without building its IR again), with its own values bound to the input labels. A graph
  with a ``deferred`` node is lowered afresh each time.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from tensorc.frontend.tc_lower import Statement, Unrolled
from tensorc.ir.keys import join_of, key_of
from tensorc.ir.nodes import (
    Arg,
    Const,
    Function,
    InputDecl,
    Map,
    OpCall,
    ReduceByKey,
    Scan,
    mul_of_args,
)
from tensorc.lazy.graph import RENAMINGS, ArrayNode, NodeKind, compute_dtype

REDUCTION_NAMES = {"+": "sum", "*": "prod", "max": "max", "min": "min", "or": "any",
                   "and": "all"}

INLINED_INTO = frozenset({NodeKind.MAP, NodeKind.REDUCE, *RENAMINGS})
"""Statement kinds whose element-wise operands may be fused into them."""
RECOMPUTE_USES = 3  # an element-wise expression read by at most this many statements and
RECOMPUTE_MAPS = 6  # of at most this many operations is recomputed in each, not stored

LOWERED_AS = {
    NodeKind.LEAF: "an input",
    NodeKind.DEFERRED: "an input (its value computed before the program)",
    NodeKind.MAP: "inlined into the statement reading it, or an element-wise statement",
    NodeKind.PERMUTE: "an index renaming inlined into its reader, or an element-wise statement",
    NodeKind.EXPAND: "an index renaming inlined into its reader, or an element-wise statement",
    NodeKind.SQUEEZE: "an index renaming inlined into its reader, or an element-wise statement",
    NodeKind.REDUCE: "a reduction statement",
    NodeKind.CONTRACT: "a contraction statement (sum of products)",
    NodeKind.CAST: "a cast statement",
    NodeKind.WHOLE: "a whole-array statement",
}
"""How each :class:`~tensorc.lazy.graph.NodeKind` is lowered (``_Lowering.label`` and
``_Lowering.statement`` handle exactly these; a test checks every kind is listed)."""


@dataclass(frozen=True)
class LoweredGraph:
    """A lowered graph: its statements (``Unrolled``), its input values by label, each
    root's label, and each other node computed as a statement with its label."""

    unrolled: Unrolled
    inputs: dict
    labels: tuple[str, ...]
    intermediates: tuple[tuple[ArrayNode, str], ...] = ()


def post_order(roots: list[ArrayNode]) -> list[ArrayNode]:
    order, seen, stack = [], set(), [(r, False) for r in reversed(roots)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        if node.value is None:
            for arg in reversed(node.args):
                if isinstance(arg, ArrayNode) and id(arg) not in seen:
                    stack.append((arg, False))
    return order


def scalar_key(value) -> tuple:
    """A hashable key of a Python scalar operand, equal exactly for the same type and bits:
    ``0.0`` and ``-0.0`` differ (``a / -0.0`` is ``-inf``), every NaN is one key."""
    if isinstance(value, float):
        return ("scalar", "float", value.hex())
    if isinstance(value, complex):
        return ("scalar", "complex", value.real.hex(), value.imag.hex())
    return ("scalar", type(value).__name__, value)


def _canonical(roots: list[ArrayNode]) -> tuple[dict[int, ArrayNode], list[ArrayNode],
                                                 tuple | None]:
    """Each node's representative: structurally equal nodes map to one (CSE); the
    representatives in post order (a node's class number is its position); and the graph's
    shape as a key of :data:`_CACHE` (each class's key with a leaf's value replaced by its
    shape and dtype, so the same computation on new values has the same key), ``None``
    when a ``deferred`` node is in it (its callable is no part of a reusable key)."""
    number_of_node: dict[int, int] = {}  # a node's class, as a small integer: keys stay flat
    chosen: dict[tuple, tuple[int, ArrayNode]] = {}  # (hashing nested keys of a shared graph
    rep: dict[int, ArrayNode] = {}  # would cost time exponential in its depth)
    classes: list[ArrayNode] = []
    shape_keys: list[tuple] | None = []
    for node in post_order(roots):
        if node.value is not None:
            key = (NodeKind.LEAF, id(node.value))
        else:
            args = tuple(("expr", number_of_node[id(a)]) if isinstance(a, ArrayNode)
                         else scalar_key(a) for a in node.args)
            key = (node.kind, node.op, node.params, node.shape, node.dtype.str, args)
        number, representative = chosen.setdefault(key, (len(chosen), node))
        number_of_node[id(node)] = number
        rep[id(node)] = representative
        if number == len(classes):
            classes.append(node)
            if shape_keys is not None:
                if node.value is not None:
                    shape_keys.append((NodeKind.LEAF, node.shape, node.dtype.str))
                elif node.kind is NodeKind.DEFERRED:
                    shape_keys = None
                else:
                    shape_keys.append(key)
    if shape_keys is None:
        return rep, classes, None
    return rep, classes, (tuple(shape_keys), tuple(number_of_node[id(r)] for r in roots))


@dataclass(frozen=True)
class _Cached:
    """A lowering to reuse for a graph of the same shape: the program, and by class number
    (:func:`_canonical`) the nodes that are its inputs, roots and other statements."""

    unrolled: Unrolled
    inputs: tuple[tuple[str, int], ...]
    constants: tuple[tuple[str, object], ...]
    labels: tuple[str, ...]
    intermediates: tuple[tuple[int, str], ...]


CACHE_SIZE = 256
_CACHE: OrderedDict[tuple, _Cached] = OrderedDict()
"""Lowerings by the graph's shape key (most recently used last; :data:`CACHE_SIZE` kept)."""


class _Lowering:
    def __init__(self, roots: list[ArrayNode], rep: dict[int, ArrayNode]) -> None:
        self.rep = rep
        self.roots = [self.rep[id(r)] for r in roots]
        self.uses: dict[int, int] = {}
        for node in post_order(self.roots):
            if node.value is None:
                for arg in node.args:
                    if isinstance(arg, ArrayNode):
                        arg = self.rep[id(arg)]
                        self.uses[id(arg)] = self.uses.get(id(arg), 0) + 1
        self.requested = {id(r) for r in self.roots}
        self.labels: dict[int, str] = {}
        self.node_of: dict[int, ArrayNode] = {}
        self.inputs: dict[str, object] = {}
        self.statements: list[Statement] = []
        self.statement_nodes: list[tuple[ArrayNode, str]] = []

    def arg(self, a):
        return self.rep[id(a)] if isinstance(a, ArrayNode) else a

    # -- which node is a statement -------------------------------------------------------
    def inlined(self, child: ArrayNode, parent_kind: NodeKind, dtype: np.dtype) -> bool:
        """Whether ``child`` is computed inside the statement reading it."""
        if child.value is not None or id(child) in self.requested:
            return False
        if child.kind in RENAMINGS and parent_kind is not NodeKind.WHOLE:
            # free to repeat (X.T read twice is two scans of X), unless it would repeat
            # element-wise work fused under it
            inner = self.arg(child.args[0])
            single = inner.value is None and self.uses.get(id(inner), 0) == 1 and (
                inner.kind is NodeKind.MAP or inner.kind in RENAMINGS)
            return self.uses.get(id(child), 0) == 1 or not single
        fusable = (child.kind is NodeKind.MAP and parent_kind in INLINED_INTO
                   and compute_dtype(child) == dtype)
        if self.uses.get(id(child), 0) != 1:  # recomputing a few element-wise operations
            return (fusable and self.uses.get(id(child), 0) <= RECOMPUTE_USES  # beats a
                    and self._map_count(child) <= RECOMPUTE_MAPS)  # statement between them
        return fusable

    def _map_count(self, node: ArrayNode) -> int:
        """Element-wise operations a statement reading ``node`` would compute for it,
        counting every map under it that could be inlined (used once, or small enough to be
        recomputed itself), each time it is reached; stops past :data:`RECOMPUTE_MAPS`, so a
        chain of shared expressions costs a bounded walk, never an exponential one."""
        count, stack = 0, [node]
        while stack:
            current = stack.pop()
            count += 1
            if count > RECOMPUTE_MAPS:
                return count
            for arg in current.args:
                arg = self.arg(arg)
                if (isinstance(arg, ArrayNode) and arg.value is None
                        and arg.kind is NodeKind.MAP
                        and id(arg) not in self.requested
                        and self.uses.get(id(arg), 0) <= RECOMPUTE_USES):
                    stack.append(arg)
        return count

    def label(self, node: ArrayNode) -> str:
        """The label of an evaluated leaf (an input) or a statement (lowered on demand)."""
        found = self.labels.get(id(node))
        if found is not None:
            return found
        if node.value is not None or node.kind is NodeKind.DEFERRED:
            label = f"x{len(self.inputs)}"  # a deferred node is computed before the
            self.inputs[label] = node.value if node.value is not None else node  # program
        else:
            label = self.statement(node)
            self.statement_nodes.append((node, label))
        self.labels[id(node)] = label
        self.node_of[id(node)] = node
        return label

    def product_operands(self, root: ArrayNode) -> list[tuple[ArrayNode, tuple]]:
        """A contraction's operands with its element-wise products spread out: an operand
        ``a * b`` used only here (same compute dtype) becomes the two operands ``a`` and
        ``b`` (a broadcast axis gets its own letter of extent 1), so ``X.T @ (X * w[:, None])``
        is one contraction ``ij,i,ik->jk`` with no ``n x d`` temporary between statements."""
        letters = root.params[0]
        used = {c for subs in letters for c in subs} | set(root.params[1])
        spare = (f"broadcast{k}" for k in itertools.count() if f"broadcast{k}" not in used)
        dtype = compute_dtype(root)

        def spread(node: ArrayNode, subs: tuple) -> list[tuple[ArrayNode, tuple]]:
            if not (node.kind is NodeKind.MAP and node.op == "mul" and node.value is None
                    and id(node) not in self.requested and self.uses.get(id(node), 0) == 1
                    and compute_dtype(node) == dtype
                    and all(isinstance(a, ArrayNode) for a in node.args)):
                return [(node, subs)]
            found = []
            for child in node.args:
                child = self.arg(child)
                offset = node.ndim - child.ndim
                child_subs = tuple(
                    next(spare) if extent == 1 and node.shape[offset + d] != 1
                    else subs[offset + d] for d, extent in enumerate(child.shape))
                found.extend(spread(child, child_subs))
            return found

        operands = []
        for arg, subs in zip(root.args, letters, strict=True):
            operands.extend(spread(self.arg(arg), subs))
        return operands

    # -- statements ----------------------------------------------------------------------
    def statement(self, root: ArrayNode) -> str:
        if root.kind is NodeKind.WHOLE:
            operands = tuple(self.label(self.arg(a)) for a in root.args)
            label = f"t{len(self.statements)}"
            text = f"{label} = {root.op[0]}({', '.join(operands)})"
            self.statements.append(Statement(label, label, text, 0, root.shape,
                                             str(root.dtype), None, operands, whole=root.op))
            return label
        body = _Body(self, compute_dtype(root), root)
        if root.kind is NodeKind.REDUCE:
            x = self.arg(root.args[0])
            names = body.fresh_names(x.shape)
            out = tuple(n for d, n in enumerate(names) if d not in root.params)
            fn = body.emit(x, names, NodeKind.REDUCE)
            monoid = root.op
        elif root.kind is NodeKind.CONTRACT:
            letters, output = root.params
            operands = self.product_operands(root)
            by_letter: dict[str, str] = {}
            for arg, subs in operands:
                for letter, extent in zip(subs, arg.shape, strict=True):
                    if letter not in by_letter:
                        by_letter[letter] = body.fresh(extent)
            out = tuple(by_letter[c] for c in output)
            args = [body.emit(a, tuple(by_letter[c] for c in subs), NodeKind.CONTRACT,
                              share=False)
                    for a, subs in operands]
            fn = mul_of_args(len(args)) if args == [Arg(k) for k in range(len(args))] else (
                OpCall("mul", tuple(args)) if len(args) > 1 else args[0])
            monoid = "+"
        elif root.kind is NodeKind.CAST:
            out = body.fresh_names(root.shape)
            fn = body.emit(self.arg(root.args[0]), out, NodeKind.CAST)
            monoid = "+"
        elif root.kind is NodeKind.MAP or root.kind in RENAMINGS:
            out = body.fresh_names(root.shape)
            fn = body.emit(root, out, NodeKind.MAP, top=True)
            monoid = "or" if body.dtype == np.bool_ else "+"
        else:  # LEAF and DEFERRED are inputs (see label), never statements
            raise TypeError(f"a {root.kind.value} node is not a statement")
        node = body.assemble(fn, out, monoid)
        label = f"t{len(self.statements)}"
        decls = tuple(InputDecl(f"in{k}", shape, dtype)
                      for k, (_, shape, dtype) in enumerate(body.scans))
        program = Function(decls, tuple(sorted(body.sizes.items())), node, str(body.dtype))
        operands = tuple(lab for lab, _, _ in body.scans)
        what = (REDUCTION_NAMES[root.op] if root.kind is NodeKind.REDUCE else
                root.op if root.kind is NodeKind.MAP else root.kind.value)
        text = f"{label} = {what}({', '.join(dict.fromkeys(operands))})"
        self.statements.append(Statement(label, label, text, 0, root.shape, str(root.dtype),
                                         program, operands))
        return label


class _Body:
    """The expression of one IR statement as it is built: scans, index names and sizes."""

    def __init__(self, lowering: _Lowering, dtype: np.dtype, root: ArrayNode) -> None:
        self.lowering = lowering
        self.dtype = np.dtype(dtype)
        self.sizes: dict[str, int] = {}
        self.scans: list[tuple[str, tuple[int, ...], str]] = []
        self.leaves: list[Scan] = []
        self.shared: dict[tuple, int] = {}

    def fresh(self, extent: int) -> str:
        name = f"i{len(self.sizes)}"
        self.sizes[name] = int(extent)
        return name

    def fresh_names(self, shape) -> tuple[str, ...]:
        return tuple(self.fresh(n) for n in shape)

    def scan(self, node: ArrayNode, names: tuple[str, ...], share: bool = True) -> Arg:
        label = self.lowering.label(node)
        key = (label, names)
        if share and key in self.shared:
            return Arg(self.shared[key])
        position = len(self.leaves)
        self.scans.append((label, node.shape, str(node.dtype)))
        self.leaves.append(Scan(f"in{position}", names))
        self.shared[key] = position
        return Arg(position)

    def emit(self, node: ArrayNode, names: tuple[str, ...], parent: NodeKind, *,
             top: bool = False, share: bool = True):
        """The IR expression of ``node`` with its axes named ``names``."""
        low = self.lowering
        if not top and not low.inlined(node, parent, self.dtype):
            return self.scan(node, names, share)
        if node.kind is NodeKind.PERMUTE:
            inner = [""] * len(names)
            for j, axis in enumerate(node.params):
                inner[axis] = names[j]
            return self.emit(low.arg(node.args[0]), tuple(inner), parent, share=share)
        if node.kind is NodeKind.EXPAND:
            inner = tuple(n for j, n in enumerate(names) if j not in node.params)
            return self.emit(low.arg(node.args[0]), inner, parent, share=share)
        if node.kind is NodeKind.SQUEEZE:
            child = low.arg(node.args[0])
            it = iter(names)
            inner = tuple(self.fresh(1) if d in node.params else next(it)
                          for d in range(child.ndim))
            return self.emit(child, inner, parent, share=share)
        args = []
        for arg in node.args:
            arg = low.arg(arg)
            if not isinstance(arg, ArrayNode):
                args.append(Const(arg))
                continue
            offset = node.ndim - arg.ndim
            inner = tuple(
                self.fresh(1) if extent == 1 and node.shape[offset + d] != 1
                else names[offset + d]
                for d, extent in enumerate(arg.shape))
            args.append(self.emit(arg, inner, NodeKind.MAP, share=share))
        return OpCall(node.op, tuple(args))

    def assemble(self, fn, out: tuple[str, ...], monoid: str):
        """The statement's IR node: a map, or a fold of every index not in ``out``."""
        covered = {name for scan in self.leaves for name in scan.indices}
        for name in out:
            if name not in covered:  # an output axis of extent 1 no operand has
                unit = f"unit:{self.dtype.str}"
                self.lowering.inputs.setdefault(unit, np.ones(1, dtype=self.dtype))
                self.scans.append((unit, (1,), str(self.dtype)))
                self.leaves.append(Scan(f"in{len(self.leaves)}", (name,)))
                covered.add(name)
        self.sizes = {n: e for n, e in self.sizes.items() if n in covered}
        source = self.leaves[0] if len(self.leaves) == 1 else join_of(self.leaves)
        key = key_of(source)
        if set(key) == set(out) and len(key) == len(out):
            return Map(fn, source, out)
        return ReduceByKey(monoid, Map(fn, source, key), out)


def lower_graph(roots: list[ArrayNode]) -> LoweredGraph:
    """Lower the graph under ``roots`` (see the module docstring)."""
    rep, classes, shape_key = _canonical(roots)
    cached = _CACHE.get(shape_key) if shape_key is not None else None
    if cached is not None:
        _CACHE.move_to_end(shape_key)
        inputs = {label: classes[number].value if classes[number].value is not None
                  else classes[number] for label, number in cached.inputs}
        inputs.update(cached.constants)
        return LoweredGraph(cached.unrolled, inputs, cached.labels,
                            tuple((classes[number], label)
                                  for number, label in cached.intermediates))
    lowering = _Lowering(roots, rep)
    labels = tuple(lowering.label(r) for r in lowering.roots)
    outputs = tuple((label, label) for label in dict.fromkeys(labels))
    unrolled = Unrolled(tuple(lowering.statements), outputs)
    intermediates = tuple((node, label) for node, label in lowering.statement_nodes
                          if id(node) not in lowering.requested)
    if shape_key is not None:
        number = {id(node): k for k, node in enumerate(classes)}
        by_label = {label: node for node_id, label in lowering.labels.items()
                    for node in (lowering.node_of[node_id],)}
        _CACHE[shape_key] = _Cached(
            unrolled,
            tuple((label, number[id(by_label[label])]) for label in lowering.inputs
                  if label in by_label),
            tuple((label, value) for label, value in lowering.inputs.items()
                  if label not in by_label),
            labels,
            tuple((number[id(node)], label) for node, label in intermediates))
        if len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return LoweredGraph(unrolled, lowering.inputs, labels, intermediates)
