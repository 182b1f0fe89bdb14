"""Desugar loop nests and comprehensions into index-notation statements.

Contract: ``desugar(module, diags) -> tuple[Stmt, ...]`` returns a body made only of
:class:`~tensorc.frontend.tc_ast.Assign` and :class:`~tensorc.frontend.tc_ast.Repeat` (whose
bodies are desugared too), reporting the loop rules (``E-loop``) and malformed comprehensions
into ``diags``. After it, the checker and the lowering see one form.

- ``for i in 0:M, j in 0:N { body }``: each statement of the body becomes an ``Assign`` with
  the loop ranges attached (the checker equates each range with the dimensions its variable
  subscripts). A loop nest is a set of whole-tensor statements in program order, which equals
  the sequential loop because destinations are written at bare loop variables and are not read
  elsewhere in the nest (both checked here).
- ``C = [ ((i, j), +/v) | ((i, k), a) <- A, ((kk, j), b) <- B, kk == k, let v = a * b,
  group by (i, j) ]`` becomes ``C[i, j] = sum[k](A[i, k] * B[k, j])``: generators bind index
  variables to dimensions and value variables to elements, an equality of two index variables
  renames the later one to the earlier (a join key), ``let`` substitutes, other conditions
  become ``c ? v : identity`` inside the aggregation (``c ? v : 0`` without ``group by``), and
  each aggregation ``op/e`` becomes a reduction over every generator index not in the key.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from tensorc.frontend import tc_ast as ast
from tensorc.frontend.diagnostics import Diagnostics
from tensorc.frontend.tc_ast import REDUCERS
from tensorc.ir.semantics import MONOID_IDENTITY

AGGREGATE_REDUCER = {
    "+": "sum",
    "*": "prod",
    "max": "max",
    "min": "min",
    "and": "all",
    "or": "any",
    "count": "sum",
}


def desugar(module: ast.Module, diags: Diagnostics) -> tuple[ast.Stmt, ...]:
    counter = itertools.count()
    return tuple(_stmts(module.stmts, (), None, counter, diags))


def _stmts(stmts, ranges, loop, counter, diags) -> list:
    out: list = []
    for stmt in stmts:
        if isinstance(stmt, ast.Assign):
            out.append(replace(stmt, ranges=tuple(ranges) + stmt.ranges, loop=loop))
        elif isinstance(stmt, ast.CompAssign):
            assign = _comprehension(stmt, diags)
            if assign is not None:
                out.append(replace(assign, ranges=tuple(ranges), loop=loop))
        elif isinstance(stmt, ast.For):
            nest = loop if loop is not None else next(counter)
            for binding in stmt.bindings:
                _check_range(binding, diags)
            body = _stmts(stmt.body, (*ranges, *stmt.bindings), nest, counter, diags)
            if loop is None:
                _check_nest(body, diags)
            out.extend(body)
        elif isinstance(stmt, ast.Repeat):
            if loop is not None:
                diags.error("E-loop", "'repeat' cannot appear inside a 'for' loop", stmt.span,
                            "put the repeat around the loop nest")
                continue
            body = _stmts(stmt.body, ranges, None, counter, diags)
            out.append(replace(stmt, body=tuple(body)))
    return out


def _check_range(binding: ast.Binding, diags: Diagnostics) -> None:
    if not (isinstance(binding.lo, ast.Num) and binding.lo.value == 0
            and not isinstance(binding.lo.value, bool)):
        diags.error("E-unsupported", f"loop range of '{binding.name.name}' does not start at 0",
                    binding.lo.span, "loops run over whole dimensions: write 0:N")
    hi = binding.hi
    static = (isinstance(hi, ast.Num) and isinstance(hi.value, int)
              and not isinstance(hi.value, bool)) or isinstance(hi, ast.Name)
    if not static:
        diags.error("E-loop", f"the bound of '{binding.name.name}' is not a size or a literal",
                    hi.span, "loops over values are not allowed: the task graph must be static")


def is_affine(expr: ast.ExprSyntax) -> bool:
    if isinstance(expr, (ast.Name, ast.Num)):
        return True
    if isinstance(expr, ast.Unary) and expr.op == "neg":
        return is_affine(expr.x)
    if isinstance(expr, ast.Binary) and expr.op in ("add", "sub"):
        return is_affine(expr.a) and is_affine(expr.b)
    if isinstance(expr, ast.Binary) and expr.op == "mul":
        constant = isinstance(expr.a, ast.Num) or isinstance(expr.b, ast.Num)
        return constant and is_affine(expr.a) and is_affine(expr.b)
    return False


def accesses(expr: ast.ExprSyntax):
    """Every tensor access (and bare name) under ``expr``, in source order."""
    if isinstance(expr, (ast.Access, ast.Name)):
        yield expr
    for child in _children(expr):
        yield from accesses(child)


def _children(expr: ast.ExprSyntax) -> tuple:
    if isinstance(expr, ast.Access):
        return expr.subs
    if isinstance(expr, ast.Call):
        return expr.args
    if isinstance(expr, (ast.Reduce, ast.Aggregate)):
        return (expr.body,)
    if isinstance(expr, ast.Unary):
        return (expr.x,)
    if isinstance(expr, ast.Binary):
        return (expr.a, expr.b)
    if isinstance(expr, ast.Cond):
        return (expr.c, expr.a, expr.b)
    if isinstance(expr, ast.Tuple):
        return expr.items
    return ()


def _check_nest(body: list, diags: Diagnostics) -> None:
    """E-loop: destinations affine in the loop variables and not read elsewhere in the nest."""
    written: dict[str, ast.Assign] = {}
    for stmt in body:
        for sub in stmt.subs:
            if isinstance(sub, ast.Name):
                continue
            if is_affine(sub):
                diags.error("E-unsupported", "an affine destination subscript is not supported",
                            sub.span, "write the destination at bare loop variables")
            else:
                diags.error("E-loop", f"destination subscript of '{stmt.target}' is not affine "
                            "in the loop variables", sub.span,
                            "a destination must be written at loop variables")
        written.setdefault(stmt.target, stmt)
    for stmt in body:
        for node in accesses(stmt.rhs):
            name = node.tensor if isinstance(node, ast.Access) else node.name
            if name not in written:
                continue
            subs = node.subs if isinstance(node, ast.Access) else ()
            recurrence = name == stmt.target and stmt.op != "=" and subs == stmt.subs
            same = name == stmt.target and _same_subs(subs, stmt.subs)
            if recurrence or same and stmt.op != "=":
                continue
            diags.error("E-loop", f"'{name}' is written in this loop and read here",
                        node.span, f"only '{name}[...] op= ... {name}[...]' at the same "
                        "subscripts may read a destination inside its loop")


def _same_subs(a: tuple, b: tuple) -> bool:
    names_a = [s.name if isinstance(s, ast.Name) else None for s in a]
    names_b = [s.name if isinstance(s, ast.Name) else None for s in b]
    return names_a == names_b and None not in names_a


# ---- comprehensions ------------------------------------------------------------------------


def _key_names(expr: ast.ExprSyntax, diags: Diagnostics, what: str) -> list[ast.Name] | None:
    if isinstance(expr, ast.Name):
        return [expr]
    if isinstance(expr, ast.Tuple) and all(isinstance(i, ast.Name) for i in expr.items):
        return list(expr.items)
    diags.error("E-parse", f"{what} must be an index variable or a tuple of them", expr.span,
                "write (i, j)")
    return None


def substitute(expr: ast.ExprSyntax, names: dict[str, ast.ExprSyntax]) -> ast.ExprSyntax:
    """``expr`` with bare names replaced (index renames and value variables)."""
    if isinstance(expr, ast.Name):
        return names.get(expr.name, expr)
    if isinstance(expr, ast.Access):
        subs = tuple(substitute(s, names) for s in expr.subs)
        return replace(expr, subs=subs)
    if isinstance(expr, ast.Call):
        return replace(expr, args=tuple(substitute(a, names) for a in expr.args))
    if isinstance(expr, ast.Reduce):
        indices = tuple(names.get(i.name, i) for i in expr.indices)
        return replace(expr, indices=indices, body=substitute(expr.body, names))
    if isinstance(expr, ast.Aggregate):
        return replace(expr, body=substitute(expr.body, names))
    if isinstance(expr, ast.Unary):
        return replace(expr, x=substitute(expr.x, names))
    if isinstance(expr, ast.Binary):
        return replace(expr, a=substitute(expr.a, names), b=substitute(expr.b, names))
    if isinstance(expr, ast.Cond):
        return replace(expr, c=substitute(expr.c, names), a=substitute(expr.a, names),
                       b=substitute(expr.b, names))
    if isinstance(expr, ast.Tuple):
        return replace(expr, items=tuple(substitute(i, names) for i in expr.items))
    return expr


class _Comp:
    """The state of desugaring one comprehension."""

    def __init__(self, stmt: ast.CompAssign, diags: Diagnostics) -> None:
        self.stmt = stmt
        self.diags = diags
        self.indices: list[str] = []  # generator index variables, in binding order
        self.values: dict[str, ast.ExprSyntax] = {}  # value variable -> its access / let expression
        self.renames: dict[str, ast.ExprSyntax] = {}
        self.conditions: list[ast.ExprSyntax] = []
        self.group: list[ast.Name] | None = None
        self.ranges: list[ast.Binding] = []

    def resolve(self, expr: ast.ExprSyntax) -> ast.ExprSyntax:
        expr = substitute(expr, self.renames)
        return substitute(expr, self.values)

    def generator(self, q: ast.Generator) -> None:
        pattern = q.pattern
        if not (isinstance(pattern, ast.Tuple) and len(pattern.items) == 2
                and isinstance(pattern.items[1], ast.Name)):
            self.diags.error("E-parse", "a generator pattern is ((indices), value)", pattern.span,
                             "write ((i, j), a) <- A")
            return
        keys = _key_names(pattern.items[0], self.diags, "a generator key")
        if keys is None:
            return
        if not isinstance(q.source, ast.Name):
            self.diags.error("E-parse", "a generator reads a declared tensor", q.source.span,
                             "write pattern <- Tensor")
            return
        subs = []
        for key in keys:
            resolved = self.renames.get(key.name, key)
            subs.append(resolved)
            if isinstance(resolved, ast.Name) and resolved.name not in self.indices:
                self.indices.append(resolved.name)
        value = pattern.items[1]
        self.values[value.name] = ast.Access(q.source.name, tuple(subs), q.source.span)

    def condition(self, q: ast.Condition) -> None:
        expr = q.expr
        is_names = (isinstance(expr, ast.Binary) and expr.op == "eq"
                    and isinstance(expr.a, ast.Name) and isinstance(expr.b, ast.Name)
                    and expr.a.name in self.indices and expr.b.name in self.indices)
        if is_names:
            keep, drop = expr.a, expr.b
            if self.indices.index(drop.name) < self.indices.index(keep.name):
                keep, drop = drop, keep
            self.renames[drop.name] = keep
            self.indices.remove(drop.name)
            self.values = {k: substitute(v, {drop.name: keep}) for k, v in self.values.items()}
            return
        self.conditions.append(self.resolve(expr))

    def run(self) -> ast.Assign | None:
        stmt = self.stmt
        for q in stmt.comp.qualifiers:
            if isinstance(q, ast.Generator):
                self.generator(q)
            elif isinstance(q, ast.RangeGenerator):
                if isinstance(q.var, ast.Name):
                    self.ranges.append(ast.Binding(q.var, q.lo, q.hi, q.span))
                    if q.var.name not in self.indices:
                        self.indices.append(q.var.name)
                else:
                    self.diags.error("E-parse", "a range generator binds one index variable",
                                     q.var.span, "write i <- 0:N")
            elif isinstance(q, ast.Let):
                self.values[q.name] = self.resolve(q.value)
            elif isinstance(q, ast.Condition):
                self.condition(q)
            elif isinstance(q, ast.GroupBy):
                keys = _key_names(self.resolve(q.key), self.diags, "a group-by key")
                if keys is not None:
                    self.group = keys
        head = stmt.comp.head
        if not (isinstance(head, ast.Tuple) and len(head.items) == 2):
            self.diags.error("E-parse", "a comprehension head is (key, value)", head.span,
                             "write ((i, j), v)")
            return None
        keys = _key_names(self.resolve(head.items[0]), self.diags, "a comprehension key")
        if keys is None:
            return None
        if stmt.op != "=":
            self.diags.error("E-reduce", "a comprehension is assigned with '='", stmt.op_span,
                             "aggregate inside the comprehension with +/ and group by")
        key_names = {k.name for k in keys}
        reduced = tuple(ast.Name(i, head.span) for i in self.indices if i not in key_names)
        value = self.head_value(self.resolve(head.items[1]), reduced)
        if value is None:
            return None
        subs = tuple(keys)
        if stmt.subs:
            self.diags.error("E-parse", "a comprehension defines the whole tensor",
                             stmt.target_span, f"write {stmt.target} = [ ... ]")
        return ast.Assign(stmt.target, subs, "=", value, stmt.span, stmt.op_span,
                          stmt.target_span, tuple(self.ranges))

    def head_value(self, value: ast.ExprSyntax,
                   reduced: tuple[ast.Name, ...]) -> ast.ExprSyntax | None:
        condition = None
        for c in self.conditions:
            condition = c if condition is None else ast.Binary("and", condition, c, c.span)

        def aggregate(expr: ast.ExprSyntax) -> ast.ExprSyntax:
            if isinstance(expr, ast.Aggregate):
                reducer = AGGREGATE_REDUCER.get(expr.op, expr.op)
                body = expr.body
                if expr.op == "count":  # 1 for every element; reads v so the group is known
                    one = ast.Num(1, expr.span)
                    same = ast.Binary("eq", expr.body, expr.body, expr.span)
                    body = ast.Cond(same, one, one, expr.span)
                if condition is not None:
                    identity = 0 if expr.op == "count" else MONOID_IDENTITY[REDUCERS[reducer]]
                    body = ast.Cond(condition, body, ast.Num(identity, expr.span), expr.span)
                if not reduced:
                    return body
                return ast.Reduce(reducer, reduced, body, expr.span)
            if isinstance(expr, (ast.Num, ast.Name, ast.Access)):
                return expr
            return _rebuild(expr, aggregate)

        if self.group is None:
            if condition is not None:
                value = ast.Cond(condition, value, ast.Num(0, value.span), value.span)
            return value
        return aggregate(value)


def _rebuild(expr: ast.ExprSyntax, fn) -> ast.ExprSyntax:
    if isinstance(expr, ast.Call):
        return replace(expr, args=tuple(fn(a) for a in expr.args))
    if isinstance(expr, ast.Unary):
        return replace(expr, x=fn(expr.x))
    if isinstance(expr, ast.Binary):
        return replace(expr, a=fn(expr.a), b=fn(expr.b))
    if isinstance(expr, ast.Cond):
        return replace(expr, c=fn(expr.c), a=fn(expr.a), b=fn(expr.b))
    if isinstance(expr, ast.Reduce):
        return replace(expr, body=fn(expr.body))
    if isinstance(expr, ast.Tuple):
        return replace(expr, items=tuple(fn(i) for i in expr.items))
    return expr


def _comprehension(stmt: ast.CompAssign, diags: Diagnostics) -> ast.Assign | None:
    return _Comp(stmt, diags).run()
