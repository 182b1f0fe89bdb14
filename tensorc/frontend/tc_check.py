"""The ``.tc`` checker: names, ranks, sizes, dtypes, reduction and loop rules — every error.

Contract: ``check(source) -> Checked`` parses, desugars and checks a program, collecting
*all* independent errors before raising one :class:`~tensorc.errors.TcError`. A ``Checked``
program is safe to lower: every name resolves, every subscript is a bare index variable of
the right rank, every index has one size symbol (two uses of different symbols are an
``E-size`` unless both have equal declared values), every statement obeys the reduction rule
(an index only on the right of ``=`` is ``E-reduce``), dtypes are consistent (numbers versus
booleans) and each ``op=`` knows whether it accumulates into an earlier value: it does when
a statement textually before it (before the enclosing ``repeat`` or earlier in its body)
assigns the same tensor; otherwise it starts from the monoid's identity.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tensorc.frontend import tc_ast as ast
from tensorc.frontend.diagnostics import Diagnostics, Source, Span, did_you_mean
from tensorc.frontend.tc_ast import REDUCERS
from tensorc.frontend.tc_desugar import accesses, desugar, is_affine
from tensorc.frontend.tc_parse import parse

DTYPES = {"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64", "bool": "bool"}
BUILTINS = {
    "exp": 1, "log": 1, "sqrt": 1, "abs": 1, "tanh": 1, "sigmoid": 1, "relu": 1,
    "pow": 2, "max": 2, "min": 2,
}
MONOID_KIND = {"+": "num", "*": "num", "max": "num", "min": "num", "or": "bool", "and": "bool"}
COMPARE = {"lt", "le", "gt", "ge", "eq", "ne"}
OP_WORDS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=", "gt": ">",
            "ge": ">=", "eq": "==", "ne": "!=", "and": "and", "or": "or", "neg": "-",
            "not": "not"}


def check_size_value(decl: ast.SizeDecl, err) -> None:
    """A declared size's value, if any, is a non-negative integer (``err`` reports).
    Shared by the element and the block checker."""
    if decl.value is not None and (not isinstance(decl.value, int) or decl.value < 0):
        err("E-type", f"size {decl.name} must be a non-negative integer", decl.span,
            "write size N = 64")


def check_dtype(name: str, span: Span, err) -> None:
    """``name`` is one of :data:`DTYPES`."""
    if name not in DTYPES:
        hint = did_you_mean(name, DTYPES) or "dtypes are f32 f64 i32 i64 bool"
        err("E-type", f"unknown dtype '{name}'", span, hint)


def check_size_known(dim: ast.Name, sizes, err) -> None:
    """A dimension named in a declaration is a declared size."""
    if dim.name not in sizes:
        hint = did_you_mean(dim.name, sizes) or f"declare it: size {dim.name}"
        err("E-undefined", f"unknown size '{dim.name}'", dim.span, hint)


@dataclass(frozen=True)
class Checked:
    """A program that passed every check: declarations and the desugared body."""

    source: Source
    module: ast.Module
    sizes: dict[str, ast.SizeDecl]
    params: dict[str, ast.ParamDecl]
    tensors: dict[str, ast.TensorDecl]
    body: tuple[ast.Stmt, ...]


def kind_of_dtype(dtype: str) -> str:
    return "bool" if dtype == "bool" else "num"


def _value_kind(value) -> str:
    return "bool" if isinstance(value, bool) else "num"


@dataclass
class _Use:
    symbol: str | int
    span: Span
    what: str


class _Checker:
    def __init__(self, source: Source, module: ast.Module, diags: Diagnostics) -> None:
        self.source = source
        self.module = module
        self.diags = diags
        self.sizes: dict[str, ast.SizeDecl] = {}
        self.params: dict[str, ast.ParamDecl] = {}
        self.tensors: dict[str, ast.TensorDecl] = {}
        self.repeat_vars: list[str] = []

    def err(self, code: str, message: str, span: Span, hint: str = "") -> None:
        self.diags.error(code, message, span, hint)

    # -- declarations --------------------------------------------------------------------
    def declared(self) -> set[str]:
        return set(self.sizes) | set(self.params) | set(self.tensors)

    def declarations(self) -> None:
        for decl in self.module.decls:
            if decl.name in self.declared():
                self.err("E-type", f"'{decl.name}' is declared twice", decl.span,
                         "give each size, param and tensor its own name")
                continue
            if isinstance(decl, ast.SizeDecl):
                check_size_value(decl, self.err)
                self.sizes[decl.name] = decl
            elif isinstance(decl, ast.ParamDecl):
                self.dtype(decl.dtype, decl.dtype_span)
                if decl.value is not None and decl.dtype in DTYPES:
                    self.param_value(decl)
                self.params[decl.name] = decl
            else:
                self.dtype(decl.dtype, decl.dtype_span)
                self.dims(decl)
                self.tensors[decl.name] = decl

    def dtype(self, name: str, span: Span) -> None:
        check_dtype(name, span, self.err)

    def param_value(self, decl: ast.ParamDecl) -> None:
        value, dtype = decl.value, decl.dtype
        if dtype == "bool" and not isinstance(value, bool):
            self.err("E-type", f"param {decl.name} is bool but its value is {value}",
                     decl.span, "write true or false")
        elif dtype != "bool" and isinstance(value, bool):
            self.err("E-type", f"param {decl.name} is {dtype} but its value is {value}",
                     decl.span, "write a number")
        elif dtype in ("i32", "i64") and isinstance(value, float):
            self.err("E-type", f"param {decl.name} is {dtype} but its value is {value}",
                     decl.span, "write an integer")

    def dims(self, decl: ast.TensorDecl) -> None:
        for dim in decl.dims:
            if isinstance(dim, ast.Name):
                check_size_known(dim, self.sizes, self.err)
            elif isinstance(dim, ast.Num) and not isinstance(dim.value, int):
                self.err("E-type", "a dimension is a size or an integer", dim.span)
        for hint in decl.hints:
            if hint.kind not in ("block", "grid"):
                self.err("E-undefined", f"unknown hint '@{hint.kind}'", hint.span,
                         did_you_mean(hint.kind, ("block", "grid")) or "use @block or @grid")
            elif len(hint.values) != len(decl.dims):
                self.err("E-rank", f"@{hint.kind} gives {len(hint.values)} values for "
                         f"'{decl.name}' of rank {len(decl.dims)}", hint.span,
                         "give one value per dimension")
            elif any(not isinstance(v, int) or v < 1 for v in hint.values):
                self.err("E-type", f"@{hint.kind} values must be positive integers", hint.span)
        if decl.sparse is not None:
            self.sparse(decl, decl.sparse)

    def sparse(self, decl: ast.TensorDecl, spec: ast.SparseSpec) -> None:
        """A sparse declaration: on an input of rank >= 1, naming sizes of its own shape."""
        if decl.kind != "input":
            self.err("E-unsupported", f"'{decl.name}' is declared sparse, but only inputs "
                     f"may be ({decl.kind} '{decl.name}')", spec.span,
                     "a statement's result is sparse or dense by the sparse einsum rule "
                     "(README, Sparse tensors); drop 'sparse'")
            return
        if not decl.dims:
            self.err("E-type", f"'{decl.name}' has rank 0 and cannot be sparse", spec.span,
                     "drop 'sparse'")
            return
        if spec.dims is None:
            return
        if not spec.dims:
            self.err("E-type", f"sparse() of '{decl.name}' names no dimension", spec.span,
                     "write 'sparse' to compress every dimension, or sparse(M) to name them")
        own = [d.name for d in decl.dims if isinstance(d, ast.Name)]
        seen: set[str] = set()
        for name in spec.dims:
            if name.name in seen:
                self.err("E-type", f"dimension '{name.name}' is listed twice in sparse(...) "
                         f"of '{decl.name}'", name.span)
            seen.add(name.name)
            if name.name in own:
                continue
            shape = ", ".join(own) or "none"
            hint = did_you_mean(name.name, own) or f"the sizes of its shape: {shape}"
            if name.name in self.sizes:
                message = f"size '{name.name}' is not a dimension of '{decl.name}'"
            else:
                message = f"unknown dimension '{name.name}' in sparse(...) of '{decl.name}'"
            self.err("E-undefined", message, name.span, hint)

    def dim_symbol(self, dim: ast.Name | ast.Num) -> str | int:
        return dim.name if isinstance(dim, ast.Name) else dim.value

    def symbol_value(self, symbol: str | int) -> int | None:
        if isinstance(symbol, int):
            return symbol
        decl = self.sizes.get(symbol)
        return decl.value if decl is not None else None

    # -- statements ----------------------------------------------------------------------
    def body(self, stmts, assigned: set[str]) -> tuple:
        out = []
        for stmt in stmts:
            if isinstance(stmt, ast.Repeat):
                self.repeat_count(stmt)
                if stmt.var is not None:
                    self.repeat_vars.append(stmt.var)
                body = self.body(stmt.body, assigned)
                if stmt.var is not None:
                    self.repeat_vars.pop()
                out.append(replace(stmt, body=body))
                continue
            out.append(_Statement(self, stmt, assigned).check())
            assigned.add(stmt.target)
        return tuple(out)

    def repeat_count(self, stmt: ast.Repeat) -> None:
        count = stmt.count
        if isinstance(count, ast.Num):
            if isinstance(count.value, bool) or not isinstance(count.value, int):
                self.err("E-type", "a repeat count is an integer", count.span)
            return
        if isinstance(count, ast.Name) and (count.name in self.sizes or count.name in self.params):
            param = self.params.get(count.name)
            if param is not None and param.dtype not in ("i32", "i64"):
                self.err("E-type", f"repeat count '{count.name}' is a {param.dtype} param",
                         count.span, "declare it i32 or i64")
            return
        if isinstance(count, ast.Name) and count.name not in self.declared():
            hint = did_you_mean(count.name, set(self.sizes) | set(self.params))
            self.err("E-undefined", f"unknown name '{count.name}'", count.span, hint)
            return
        self.err("E-loop", "a repeat count is a literal, a size or a param", count.span,
                 "the task graph must be static: counts cannot depend on tensor values")

    def outputs(self, body: tuple) -> None:
        written = set()

        def walk(stmts):
            for stmt in stmts:
                if isinstance(stmt, ast.Repeat):
                    walk(stmt.body)
                else:
                    written.add(stmt.target)

        walk(body)
        for decl in self.tensors.values():
            if decl.kind == "output" and decl.name not in written:
                self.err("E-undefined", f"output '{decl.name}' is never assigned", decl.span,
                         f"assign it: {decl.name}[...] = ...")


class _Statement:
    """Checks one desugared ``Assign``; collects index uses for the size rule."""

    def __init__(self, checker: _Checker, stmt: ast.Assign, assigned: set[str]) -> None:
        self.c = checker
        self.stmt = stmt
        self.assigned = assigned
        self.uses: dict[str, _Use] = {}
        self.lhs: list[str] = []
        self.index_names: set[str] = set()
        self.reads_tensor = False

    def err(self, code: str, message: str, span: Span, hint: str = "") -> None:
        self.c.err(code, message, span, hint)

    def use(self, index: str, symbol: str | int, span: Span, what: str) -> None:
        self.index_names.add(index)
        first = self.uses.get(index)
        if first is None:
            self.uses[index] = _Use(symbol, span, what)
            return
        if first.symbol == symbol:
            return
        a, b = self.c.symbol_value(first.symbol), self.c.symbol_value(symbol)
        if a is not None and a == b:
            return
        self.err("E-size", f"index '{index}' has size {symbol} here ({what}) but size "
                 f"{first.symbol} at {first.span} ({first.what})", span,
                 "one index ranges over one size: declare both dimensions with the same size")

    def check(self) -> ast.Assign:
        stmt = self.stmt
        decl = self.target()
        for binding in stmt.ranges:
            if isinstance(binding.hi, ast.Name):
                if binding.hi.name not in self.c.sizes:
                    hint = did_you_mean(binding.hi.name, self.c.sizes)
                    self.err("E-undefined", f"unknown size '{binding.hi.name}'",
                             binding.hi.span, hint)
                    continue
                symbol: str | int = binding.hi.name
            elif isinstance(binding.hi, ast.Num):
                symbol = binding.hi.value
            else:
                continue
            self.use(binding.name.name, symbol, binding.hi.span,
                     f"the range of '{binding.name.name}'")
        self.collect_index_names(stmt.rhs)
        errors_before = len(self.c.diags.items)
        kind, free = self.expr(stmt.rhs)
        rhs_ok = len(self.c.diags.items) == errors_before
        if decl is not None and kind is not None:
            target_kind = kind_of_dtype(decl.dtype)
            if stmt.op != "=" and MONOID_KIND.get(stmt.op) != target_kind:
                self.err("E-type", f"'{stmt.op}=' needs a "
                         f"{'boolean' if MONOID_KIND[stmt.op] == 'bool' else 'numeric'} "
                         f"tensor but '{stmt.target}' is {decl.dtype}", stmt.op_span)
            elif kind != target_kind:
                self.err("E-type", f"the right side is {_kind_word(kind)} but '{stmt.target}' "
                         f"is {decl.dtype}", stmt.rhs.span,
                         "compare with a number, or use '? :' to choose values")
        if rhs_ok:
            self.reduction_rule(free)
        accumulate = stmt.op != "=" and stmt.target in self.assigned
        return replace(stmt, accumulate=accumulate)

    def target(self) -> ast.TensorDecl | None:
        stmt = self.stmt
        decl = self.c.tensors.get(stmt.target)
        if decl is None:
            known = set(self.c.tensors)
            hint = did_you_mean(stmt.target, known) or f"declare it: tensor {stmt.target} : f64"
            what = "a size" if stmt.target in self.c.sizes else (
                "a param" if stmt.target in self.c.params else None)
            message = (f"'{stmt.target}' is {what}, not a tensor" if what
                       else f"unknown tensor '{stmt.target}'")
            self.err("E-undefined", message, stmt.target_span, hint)
            return None
        if decl.kind == "input":
            self.err("E-type", f"input '{stmt.target}' is read-only", stmt.target_span,
                     f"copy it into a tensor: tensor T : {decl.dtype}[...], T[...] = "
                     f"{stmt.target}[...]")
        if len(stmt.subs) != len(decl.dims):
            self.err("E-rank", f"'{stmt.target}' has rank {len(decl.dims)} but is written "
                     f"with {len(stmt.subs)} subscript(s)", stmt.target_span,
                     f"declared {_declared(decl)}")
            return decl
        for position, (sub, dim) in enumerate(zip(stmt.subs, decl.dims, strict=True)):
            if stmt.loop is not None and not isinstance(sub, ast.Name):
                continue  # the loop rules already reported it
            name = self.subscript(sub, "on the left")
            if name is None:
                continue
            if name in self.lhs:
                self.err("E-unsupported", f"index '{name}' is repeated on the left",
                         sub.span, "writing a diagonal is not supported; use distinct indices")
                continue
            self.lhs.append(name)
            self.use(name, self.c.dim_symbol(dim), sub.span,
                     f"dimension {position} of {stmt.target}")
        return decl

    def subscript(self, sub: ast.ExprSyntax, where: str) -> str | None:
        if isinstance(sub, ast.Name):
            if sub.name in self.c.declared() or sub.name in self.c.repeat_vars:
                self.err("E-type", f"subscript '{sub.name}' is {self.describe(sub.name)}, not an "
                         "index", sub.span, "subscripts are index variables like i, j, k")
                return None
            return sub.name
        if is_affine(sub):
            self.err("E-unsupported", f"affine subscripts {where} are not supported yet",
                     sub.span, "subscript with a bare index variable")
        else:
            self.err("E-type", "a subscript must be an index variable", sub.span,
                     "subscripts are index variables like i, j, k")
        return None

    def describe(self, name: str) -> str:
        if name in self.c.sizes:
            return "a size"
        if name in self.c.params:
            return "a param"
        if name in self.c.repeat_vars:
            return "a repeat counter"
        return "a tensor"

    def collect_index_names(self, expr: ast.ExprSyntax) -> None:
        for node in accesses(expr):
            if isinstance(node, ast.Access):
                for sub in node.subs:
                    if isinstance(sub, ast.Name) and sub.name not in self.c.declared():
                        self.index_names.add(sub.name)
        self.index_names.update(self.lhs)
        for binding in self.stmt.ranges:
            self.index_names.add(binding.name.name)

    # -- expressions: (kind, free indices) -------------------------------------------------
    def expr(self, e: ast.ExprSyntax) -> tuple[str | None, dict[str, Span]]:
        method = getattr(self, f"_{type(e).__name__.lower()}")
        return method(e)

    def _num(self, e: ast.Num):
        return _value_kind(e.value), {}

    def _name(self, e: ast.Name):
        name = e.name
        if name in self.c.params:
            return kind_of_dtype(self.c.params[name].dtype), {}
        if name in self.c.sizes or name in self.c.repeat_vars:
            return "num", {}
        decl = self.c.tensors.get(name)
        if decl is not None:
            if decl.dims:
                self.err("E-rank", f"tensor '{name}' has rank {len(decl.dims)} but is used "
                         "without subscripts", e.span, f"write {name}[...]; declared "
                         f"{_declared(decl)}")
                return None, {}
            self.read(name, e.span)
            return kind_of_dtype(decl.dtype), {}
        if name in self.index_names:
            self.err("E-unsupported", f"index '{name}' is used as a value", e.span,
                     "indices select elements; they are not values here")
            return None, {}
        known = self.c.declared() | set(self.c.repeat_vars)
        hint = did_you_mean(name, known) or "declare it as a size, param or tensor"
        self.err("E-undefined", f"unknown name '{name}'", e.span, hint)
        return None, {}

    def read(self, name: str, span: Span) -> None:
        self.reads_tensor = True
        decl = self.c.tensors[name]
        if decl.kind != "input" and name not in self.assigned:
            self.err("E-undefined", f"'{name}' is read before any value is assigned to it",
                     span, f"assign {name} earlier, or declare it as an input")

    def _access(self, e: ast.Access):
        decl = self.c.tensors.get(e.tensor)
        if decl is None:
            if e.tensor in self.c.sizes or e.tensor in self.c.params:
                self.err("E-type", f"'{e.tensor}' is {self.describe(e.tensor)}, not a tensor",
                         e.span)
                return None, {}
            hint = did_you_mean(e.tensor, self.c.tensors) or (
                f"declare it: input {e.tensor} : f64[...]")
            self.err("E-undefined", f"unknown tensor '{e.tensor}'", e.span, hint)
            return None, {}
        self.read(e.tensor, e.span)
        if len(e.subs) != len(decl.dims):
            self.err("E-rank", f"'{e.tensor}' has rank {len(decl.dims)} but is indexed with "
                     f"{len(e.subs)} subscript(s)", e.span, f"declared {_declared(decl)}")
            return kind_of_dtype(decl.dtype), {}
        free: dict[str, Span] = {}
        for position, (sub, dim) in enumerate(zip(e.subs, decl.dims, strict=True)):
            name = self.subscript(sub, "on the right")
            if name is None:
                continue
            free.setdefault(name, sub.span)
            self.use(name, self.c.dim_symbol(dim), sub.span,
                     f"dimension {position} of {e.tensor}")
        return kind_of_dtype(decl.dtype), free

    def _call(self, e: ast.Call):
        arity = BUILTINS.get(e.fn)
        results = [self.expr(a) for a in e.args]
        free = _union(r[1] for r in results)
        if arity is None:
            if e.fn in REDUCERS:
                hint = f"write {e.fn}[i](...) to reduce over i"
            else:
                hint = did_you_mean(e.fn, BUILTINS) or ("built-ins: " + " ".join(BUILTINS))
            self.err("E-undefined", f"unknown function '{e.fn}'", e.span, hint)
            return None, free
        if len(e.args) != arity:
            self.err("E-type", f"'{e.fn}' takes {arity} argument(s), got {len(e.args)}", e.span)
            return None, free
        for (kind, _), arg in zip(results, e.args, strict=True):
            if kind == "bool":
                self.err("E-type", f"'{e.fn}' needs numbers, got a boolean", arg.span)
        return "num", free

    def _reduce(self, e: ast.Reduce):
        kind, body_free = self.expr(e.body)
        monoid = REDUCERS.get(e.op)
        if monoid is None:
            hint = did_you_mean(e.op, REDUCERS) or ("reductions: " + " ".join(REDUCERS))
            self.err("E-undefined", f"unknown reduction '{e.op}'", e.span, hint)
            return None, {}
        free = dict(body_free)
        for index in e.indices:
            if not isinstance(index, ast.Name) or index.name in self.c.declared():
                self.err("E-type", f"{e.op}[...] lists index variables", index.span)
                continue
            if index.name not in body_free:
                self.err("E-reduce", f"index '{index.name}' of {e.op}[...] does not occur in "
                         "its body", index.span, "reduce over indices the body subscripts")
                continue
            if index.name in self.lhs:
                self.err("E-reduce", f"index '{index.name}' is reduced by {e.op}[...] and also "
                         "used on the left", index.span, "use a different index name")
            free.pop(index.name)
        if kind is not None and kind != MONOID_KIND[monoid]:
            self.err("E-type", f"{e.op}[...] needs a {_kind_word(MONOID_KIND[monoid])} body, "
                     f"got {_kind_word(kind)}", e.body.span)
        return ("bool" if monoid in ("or", "and") else "num"), free

    def _aggregate(self, e: ast.Aggregate):
        self.expr(e.body)
        self.err("E-reduce", f"aggregation '{e.op}/' outside a grouped comprehension", e.span,
                 "use it in [ (key, +/v) | ..., group by key ]")
        return None, {}

    def _unary(self, e: ast.Unary):
        kind, free = self.expr(e.x)
        want = "bool" if e.op == "not" else "num"
        if kind is not None and kind != want:
            self.err("E-type", f"'{OP_WORDS[e.op]}' needs {_kind_word(want)} operand, got "
                     f"{_kind_word(kind)}", e.span)
        return want, free

    def _binary(self, e: ast.Binary):
        ka, fa = self.expr(e.a)
        kb, fb = self.expr(e.b)
        free = _union([fa, fb])
        if e.op in ("and", "or"):
            want, result = "bool", "bool"
        elif e.op in ("eq", "ne"):
            want, result = (ka if ka == kb else "num"), "bool"
        elif e.op in COMPARE:
            want, result = "num", "bool"
        else:
            want, result = "num", "num"
        for kind, operand in ((ka, e.a), (kb, e.b)):
            if kind is not None and kind != want:
                self.err("E-type", f"'{OP_WORDS[e.op]}' needs {_kind_word(want)} operands, got "
                         f"{_kind_word(kind)}", operand.span,
                         "compare numbers with < <= > >= == !=, combine booleans with and/or")
                break
        return result, free

    def _cond(self, e: ast.Cond):
        kc, fc = self.expr(e.c)
        ka, fa = self.expr(e.a)
        kb, fb = self.expr(e.b)
        if kc is not None and kc != "bool":
            self.err("E-type", "the condition of '? :' must be a boolean", e.c.span,
                     "write a comparison, e.g. x[i] > 0")
        if ka is not None and kb is not None and ka != kb:
            self.err("E-type", f"the branches of '? :' are {_kind_word(ka)} and "
                     f"{_kind_word(kb)}", e.span)
        return (ka or kb), _union([fc, fa, fb])

    def _tuple(self, e: ast.Tuple):
        self.err("E-type", "a tuple is only allowed in comprehension keys and patterns", e.span)
        return None, {}

    # -- the reduction rule --------------------------------------------------------------
    def reduction_rule(self, free: dict[str, Span]) -> None:
        stmt = self.stmt
        lhs = set(self.lhs)
        if len(self.lhs) != len(stmt.subs):
            return  # subscript errors already reported
        extra = [n for n in free if n not in lhs]
        if stmt.op == "=" and extra:
            if len(extra) == 1:
                message = (f"index '{extra[0]}' appears only on the right of '=', so it is "
                           "never reduced")
            else:
                names = ", ".join(f"'{n}'" for n in extra)
                message = (f"indices {names} appear only on the right of '=', so they are "
                           "never reduced")
            plain = ", ".join(extra)
            self.err("E-reduce", message, stmt.op_span,
                     f"use '+=' to sum over {plain}, or write sum[{plain}](...)")
        missing = [n for n in self.lhs if n not in free]
        if missing and self.reads_tensor:
            self.err("E-unsupported", f"index '{missing[0]}' appears only on the left, so "
                     f"'{stmt.target}' would be broadcast along it", stmt.target_span,
                     "broadcasting is not supported: subscript a tensor with it on the right")


def _union(maps) -> dict[str, Span]:
    result: dict[str, Span] = {}
    for m in maps:
        for k, v in m.items():
            result.setdefault(k, v)
    return result


def _kind_word(kind: str) -> str:
    return "boolean" if kind == "bool" else "numeric"


def _declared(decl: ast.TensorDecl) -> str:
    dims = ", ".join(d.name if isinstance(d, ast.Name) else str(d.value) for d in decl.dims)
    return f"{decl.name} : {decl.dtype}[{dims}]" if decl.dims else f"{decl.name} : {decl.dtype}"


def check(source: Source) -> Checked:
    """Parse, desugar and check ``source``; raise one ``TcError`` with every error found."""
    module = parse(source)
    diags = Diagnostics(source)
    checker = _Checker(source, module, diags)
    checker.declarations()
    body = desugar(module, diags)
    inputs = {name for name, d in checker.tensors.items() if d.kind == "input"}
    body = checker.body(body, set(inputs))
    checker.outputs(body)
    diags.raise_if_any()
    return Checked(source, module, checker.sizes, checker.params, checker.tensors, body)
