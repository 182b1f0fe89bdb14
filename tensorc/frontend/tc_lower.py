"""Lower a checked ``.tc`` program to SSA statements, each an IR ``Function`` (or a fill).

Contract: ``lower_program(checked, sizes, params) -> Unrolled`` needs every size bound to an
integer and every param to a value. It unrolls ``repeat`` (the counter ``t`` of
``repeat N as t`` is a constant in each copy), gives every assignment a new SSA version of
its tensor (``x@1``, ``x@2``, …; inputs keep their names), and lowers each statement to the
same IR the einsum front end produces:

- operands are named ``in0``, ``in1``, … in source order of the right side (the value an
  ``op=`` merges into comes last), bound to tensor versions by ``Statement.operands``; an
  operand that is an input declared ``sparse`` carries its storage levels
  (``InputDecl.sparse``);
- ``C[i,j] += A[i,k] * B[k,j]`` (and ``C[i,j] = sum[k](...)``, the loop nest and the
  comprehension) is ``ReduceByKey(+, Map(#0 * #1, Join(Scan in0, Scan in1)), [i,j])``;
- ``=`` without a reduction is ``Map(fn, Join(...), key=left side)``; a nested
  ``sum[..](..)`` is a ``ReduceByKey`` leaf of the enclosing join;
- ``op=`` into a tensor with an earlier value is ``Merge(Scan(old), new, op)``, except when
  the earlier value is a fill with the monoid's identity (``C = 0`` then ``C += ...``): then it
  starts from the identity like a fresh ``op=``;
- a statement that reads no tensor is a *fill* (a constant of the target's shape) and has no
  IR; statements whose results no output needs are dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tensorc.errors import IRVerificationError
from tensorc.frontend import tc_ast as ast
from tensorc.frontend.tc_ast import REDUCERS
from tensorc.frontend.tc_check import DTYPES, Checked
from tensorc.ir.keys import join_of, key_of
from tensorc.ir.nodes import (
    Arg,
    Const,
    Expr,
    Function,
    InputDecl,
    Map,
    Merge,
    Node,
    OpCall,
    ReduceByKey,
    Scan,
)
from tensorc.ir.semantics import MONOID_IDENTITY, evaluate_map_expr

MONOID_CALL = {"+": "add", "*": "mul", "max": "max", "min": "min", "or": "or", "and": "and"}
FOLDED = {"add", "mul", "and", "or"}


@dataclass(frozen=True)
class Statement:
    """One SSA statement: ``label`` (``C@2``) is computed by ``program`` from ``operands``
    (the labels bound to ``in0``, ``in1``, …), or is a ``fill`` constant when ``program`` is
    ``None``, or a whole-array operation (``whole``). ``block`` holds the block-size hints
    of its indices from ``@block``/``@grid``."""

    label: str
    target: str
    text: str
    line: int
    shape: tuple[int, ...]
    dtype: str
    program: Function | None
    operands: tuple[str, ...]
    fill: int | float | bool | None = None
    block: tuple[tuple[str, int], ...] = ()
    whole: tuple | None = None
    """A whole-array operation ``(name, *params)`` of :mod:`tensorc.codegen.whole_array`
    applied to the operands, for statements the IR does not express (``program`` is then
    ``None``); the array front end makes these, ``.tc`` programs never do."""


@dataclass(frozen=True)
class Unrolled:
    """Every live SSA statement in execution order, and the label each output ends at."""

    statements: tuple[Statement, ...]
    outputs: tuple[tuple[str, str], ...]


@dataclass
class _Operands:
    """The operands of one statement as they are met: names, decls, index sizes."""

    labels: list[str] = field(default_factory=list)
    decls: list[InputDecl] = field(default_factory=list)
    sizes: dict[str, int] = field(default_factory=dict)
    tensors: list[str] = field(default_factory=list)
    indices: list[tuple[str, ...]] = field(default_factory=list)

    def scan(self, label: str, tensor: str, shape, dtype: str, indices: tuple[str, ...],
             sparse: tuple[str, ...] | None = None) -> Scan:
        name = f"in{len(self.labels)}"
        self.labels.append(label)
        self.tensors.append(tensor)
        self.indices.append(indices)
        self.decls.append(InputDecl(name, tuple(shape), dtype, sparse))
        for index, dim in zip(indices, shape, strict=True):
            self.bind(index, dim)
        return Scan(name, indices)

    def bind(self, index: str, dim: int) -> None:
        if self.sizes.setdefault(index, dim) != dim:
            raise IRVerificationError(f"index {index!r} bound to {self.sizes[index]} and {dim}")


class _Lowering:
    def __init__(self, checked: Checked, sizes: dict[str, int], params: dict[str, object]):
        self.checked = checked
        self.sizes = sizes
        self.scalars: dict[str, object] = {**params, **sizes}
        self.versions: dict[str, str] = {
            name: name for name, d in checked.tensors.items() if d.kind == "input"
        }
        self.counts: dict[str, int] = {}
        self.fills: dict[str, object] = {}
        self.statements: list[Statement] = []

    def shape(self, tensor: str) -> tuple[int, ...]:
        dims = self.checked.tensors[tensor].dims
        return tuple(d.value if isinstance(d, ast.Num) else self.sizes[d.name] for d in dims)

    def dtype(self, tensor: str) -> str:
        return DTYPES[self.checked.tensors[tensor].dtype]

    # -- statements ----------------------------------------------------------------------
    def body(self, stmts) -> None:
        for stmt in stmts:
            if isinstance(stmt, ast.Repeat):
                count = self.count(stmt.count)
                for t in range(count):
                    if stmt.var is not None:
                        self.scalars[stmt.var] = t
                    self.body(stmt.body)
                if stmt.var is not None:
                    self.scalars.pop(stmt.var, None)
            else:
                self.assign(stmt)

    def count(self, expr: ast.ExprSyntax) -> int:
        value = expr.value if isinstance(expr, ast.Num) else self.scalars[expr.name]
        return int(value)

    def assign(self, stmt: ast.Assign) -> None:
        target = stmt.target
        shape = self.shape(target)
        lhs = tuple(s.name for s in stmt.subs)
        ops = _Operands()
        for index, dim in zip(lhs, shape, strict=True):
            ops.bind(index, dim)
        monoid = None if stmt.op == "=" else stmt.op
        body = stmt.rhs
        if monoid is None and isinstance(body, ast.Reduce):
            monoid, body = REDUCERS[body.op], body.body
        leaves: list[Node] = []
        fn = self.expr(body, leaves, ops)
        old = self.versions.get(target) if stmt.accumulate else None
        if old is not None and self.fills.get(old, None) == MONOID_IDENTITY[stmt.op] and (
            type(self.fills[old]) is bool) == (stmt.op in ("or", "and")):
            old = None  # an identity fill followed by op=: start from the identity
        dtype = self.dtype(target)
        label = self.new_version(target)
        line = stmt.span.line
        text = self.checked.source.line(line).strip()
        if not leaves and old is None:
            value = evaluate_map_expr(fn, [], np.dtype(dtype)).item()
            self.fills[label] = value
            self.statements.append(Statement(label, target, text, line, shape, dtype, None, (),
                                             value))
            return
        if not leaves:  # op= of a constant into an earlier value: old ⊕ c, element-wise
            scan = ops.scan(old, target, shape, dtype, lhs)
            node: Node = Map(OpCall(MONOID_CALL[stmt.op], (Arg(0), fn)), scan, lhs)
        else:
            source = leaves[0] if len(leaves) == 1 else join_of(leaves)
            if monoid is None:
                node = Map(fn, source, lhs)
            else:
                node = ReduceByKey(monoid, Map(fn, source, key_of(source)), lhs)
            if old is not None:
                node = Merge(ops.scan(old, target, shape, dtype, lhs), node, stmt.op)
        compute = self.compute_dtype(ops, dtype, fn)
        program = Function(tuple(ops.decls), tuple(sorted(ops.sizes.items())), node, compute)
        block = self.block_hints(ops, target, lhs)
        self.statements.append(Statement(label, target, text, line, shape, dtype, program,
                                         tuple(ops.labels), None, block))

    def new_version(self, target: str) -> str:
        number = self.counts.get(target, 0) + 1
        self.counts[target] = number
        label = f"{target}@{number}"
        self.versions[target] = label
        return label

    def compute_dtype(self, ops: _Operands, target_dtype: str, fn: Expr) -> str:
        dtype = np.result_type(target_dtype, *(d.dtype for d in ops.decls))
        if dtype.kind in "biu" and _has_float_const(fn):
            dtype = np.dtype("float64")
        return str(dtype)

    def block_hints(self, ops: _Operands, target: str, lhs: tuple[str, ...]):
        """Block sizes per index from the ``@block``/``@grid`` hints (first hint wins)."""
        chosen: dict[str, int] = {}
        for tensor, indices in [(target, lhs), *zip(ops.tensors, ops.indices, strict=True)]:
            for hint in self.checked.tensors[tensor].hints:
                for index, value in zip(indices, hint.values, strict=False):
                    if index in chosen:
                        continue
                    size = ops.sizes[index]
                    chosen[index] = value if hint.kind == "block" else math.ceil(size / value)
        return tuple(sorted((n, max(1, v)) for n, v in chosen.items()))

    # -- expressions ---------------------------------------------------------------------
    def expr(self, e: ast.ExprSyntax, leaves: list[Node], ops: _Operands) -> Expr:
        if isinstance(e, ast.Num):
            return Const(e.value)
        if isinstance(e, ast.Name):
            if e.name in self.scalars:
                value = self.scalars[e.name]
                return Const(value.item() if isinstance(value, np.generic) else value)
            return self.leaf(self.scan(e.name, (), ops), leaves)
        if isinstance(e, ast.Access):
            indices = tuple(s.name for s in e.subs)
            return self.leaf(self.scan(e.tensor, indices, ops), leaves)
        if isinstance(e, ast.Reduce):
            inner: list[Node] = []
            fn = self.expr(e.body, inner, ops)
            source = inner[0] if len(inner) == 1 else join_of(inner)
            dropped = {i.name for i in e.indices}
            key = tuple(n for n in key_of(source) if n not in dropped)
            node = ReduceByKey(REDUCERS[e.op], Map(fn, source, key_of(source)), key)
            return self.leaf(node, leaves)
        if isinstance(e, ast.Call):
            return OpCall(e.fn, tuple(self.expr(a, leaves, ops) for a in e.args))
        if isinstance(e, ast.Unary):
            return OpCall(e.op, (self.expr(e.x, leaves, ops),))
        if isinstance(e, ast.Binary):
            a = self.expr(e.a, leaves, ops)
            b = self.expr(e.b, leaves, ops)
            if e.op in FOLDED and isinstance(a, OpCall) and a.op == e.op:
                return OpCall(e.op, (*a.args, b))
            return OpCall(e.op, (a, b))
        if isinstance(e, ast.Cond):
            args = (self.expr(e.c, leaves, ops), self.expr(e.a, leaves, ops),
                    self.expr(e.b, leaves, ops))
            return OpCall("select", args)
        raise IRVerificationError(f"unexpected expression after checking: {e!r}")

    def scan(self, tensor: str, indices: tuple[str, ...], ops: _Operands) -> Scan:
        label = self.versions[tensor]
        decl = self.checked.tensors[tensor]
        sparse = decl.levels() if label == tensor and decl.kind == "input" else None
        return ops.scan(label, tensor, self.shape(tensor), self.dtype(tensor), indices, sparse)

    @staticmethod
    def leaf(node: Node, leaves: list[Node]) -> Arg:
        leaves.append(node)
        return Arg(len(leaves) - 1)


def _has_float_const(fn: Expr) -> bool:
    if isinstance(fn, Const):
        return isinstance(fn.value, float)
    if isinstance(fn, OpCall):
        return any(_has_float_const(a) for a in fn.args)
    return False


def _live(statements: list[Statement], outputs: dict[str, str]) -> tuple[Statement, ...]:
    needed = set(outputs.values())
    kept = []
    for statement in reversed(statements):
        if statement.label in needed:
            kept.append(statement)
            needed.update(statement.operands)
    return tuple(reversed(kept))


def lower_program(checked: Checked, sizes: dict[str, int], params: dict[str, object]) -> Unrolled:
    """Unroll, version and lower every statement; keep those the outputs need."""
    lowering = _Lowering(checked, sizes, params)
    lowering.body(checked.body)
    outputs = {
        name: lowering.versions[name]
        for name, decl in checked.tensors.items()
        if decl.kind == "output"
    }
    live = _live(lowering.statements, outputs)
    return Unrolled(live, tuple(outputs.items()))
