"""The checker of ``.tc`` block programs: syntax tree → the IR of ``tensorc.ir.block_program``.

Contract: a module parsed by :func:`tensorc.frontend.tc_parse.parse` is a *block program*
when :func:`is_block_program` says so (it has a ``blocks NB of N`` declaration or a block
access ``X{...}``). ``check_block_program(module, source)`` checks every rule and returns the
IR of :mod:`tensorc.ir.block_program`, or raises one :class:`~tensorc.errors.TcError` holding
*every* independent error (rustc style, as :mod:`tensorc.frontend.tc_check` does);
``parse_block_program(source)`` parses, checks and raises the same way.

What it produces: ``sizes`` (declared size names, in order), ``blocks`` (count → size),
``tensors`` (a :class:`TensorSpec` per declaration: ``dims`` are size names, ``None`` for a
``tensor`` declared without brackets, a *block collection*), and the body of ``BlockWrite``,
``Loop`` and ``If`` with index expressions (``+ - * **``, ``min max log2``), conditions and
block expressions (operators become the kernels ``add sub mul div matmul neg``; a plain copy
``X{i} = Y{i}`` is a ``Read``). Spans are the front end's :class:`Span` of the construct:
``BlockRef.span`` the block access, ``Kernel.span`` the call or operator, ``BlockWrite.span``
the statement, ``Loop.span`` the ``for`` (an inner binding of ``for i in .., j in ..`` has
its binding's span), ``If.span`` the ``if``, ``TensorSpec.span`` the declaration.

The rules and their codes:

- ``E-block``: element forms in a block program (``A[i]``, element statements,
  comprehensions, ``where``, ``repeat``, ``op=``, reductions, aggregates); a wrong number of
  block coordinates (a shaped tensor takes one per dimension, a collection the same number at
  every use); a constant coordinate outside an uncut dimension; a block count whose size is
  not declared, or a size cut twice; a loop variable shadowing a name; a non-integer number,
  a tensor or a param in an index expression; ``**`` on blocks or ``@`` on indices; hints
  and literal dimensions in declarations;
- ``E-arity``: a kernel or index function with the wrong number of arguments; targets that
  do not match the kernel's result count; a multi-result kernel inside an expression;
- ``E-affine``: a block subscript that is not affine in the loop variables (a product of two
  terms both containing loop variables, a loop variable in the base of ``**`` or inside
  ``min``/``max``/``log2``); ``2**l`` (a loop variable only in an exponent) is allowed;
- ``E-unwritten``: a read of a tensor that is neither an input nor written by any statement,
  an output no statement writes (a static check; the runtime checks single blocks);
- ``E-cycle``: one statement writing the same block twice (syntactically equal coordinates);
- ``E-undefined``: unknown tensors, names, sizes and kernels (with ``did you mean``);
- ``E-type``: unknown dtypes, names declared twice, bad size values; ``E-loop``: a constant
  loop step that is not positive; ``E-unsupported``: ``param`` declarations.

Writing an ``input`` is allowed: it makes a new version of the block (SSA), the caller's
array is never changed.
"""

from __future__ import annotations

from tensorc.frontend import tc_ast as ast
from tensorc.frontend.diagnostics import NO_SPAN, Diagnostics, Source, Span, did_you_mean
from tensorc.frontend.tc_check import check_dtype, check_size_known, check_size_value
from tensorc.frontend.tc_parse import parse
from tensorc.ir import block_program as ir

_INT_OPS = {"add": "+", "sub": "-", "mul": "*", "pow": "**"}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_BLOCK_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "matmul": "@"}
_RESULT_NAMES = {"qr": "Q, R", "lu": "L, U", "unstack": "top, bottom"}
_INDEX_WORDS = "index expressions use loop variables, block counts, sizes, + - * ** and " \
               "min, max, log2"
_NOT_ALLOWED = {
    ast.Cond: "'? :'",
    ast.Tuple: "a tuple",
    ast.Reduce: "a reduction",
    ast.Aggregate: "an aggregation",
}


def is_block_program(module: ast.Module) -> bool:
    """Whether ``module`` is a block program: a ``blocks`` declaration or a block access."""
    return bool(ast.block_syntax(module))


def check_block_program(module: ast.Module, source: Source) -> ir.BlockProgramIR:
    """The IR of a parsed block program; every error raised in one ``TcError``."""
    diags = Diagnostics(source)
    program = _Checker(source, module, diags).program()
    diags.raise_if_any()
    return program


def parse_block_program(source: Source) -> ir.BlockProgramIR:
    """Parse and check ``source`` as a block program (raises every error found)."""
    return check_block_program(parse(source), source)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _keyword_span(span: Span, word: str) -> Span:
    return Span(span.line, span.col, span.line, span.col + len(word))


class _Checker:
    def __init__(self, source: Source, module: ast.Module, diags: Diagnostics) -> None:
        self.source = source
        self.module = module
        self.diags = diags
        self.sizes: dict[str, ast.SizeDecl] = {}
        self.counts: dict[str, ast.BlocksDecl] = {}
        self.cut: dict[str, str] = {}  # size -> the count that cuts it
        self.tensors: dict[str, ast.TensorDecl] = {}
        self.params: dict[str, ast.ParamDecl] = {}
        self.scope: list[tuple[str, Span]] = []  # loop variables, outermost first
        self.written: set[str] = set()
        self.collection_rank: dict[str, tuple[int, Span]] = {}
        self.unwritten_reported: set[str] = set()
        self.affine_errors = 0

    def err(self, code: str, message: str, span: Span | None, hint: str = "") -> None:
        if code == "E-affine":
            self.affine_errors += 1
        self.diags.error(code, message, span, hint)

    def text(self, span: Span) -> str:
        """The source text of a one-line span (for messages)."""
        if span.end_line != span.line:
            return self.source.line(span.line)[span.col - 1 :].strip()
        return self.source.line(span.line)[span.col - 1 : span.end_col - 1]

    # -- the program ---------------------------------------------------------------------
    def program(self) -> ir.BlockProgramIR:
        if not is_block_program(self.module):
            self.err("E-block", "not a block program: it has no 'blocks' declaration and no "
                     "block access", NO_SPAN, "declare 'blocks NB of N' and read blocks as X{...}")
        self.declarations()
        for node in ast.walk(self.module.stmts):
            if isinstance(node, ast.BlockAssign):
                self.written.update(t.tensor for t in node.targets
                                    if isinstance(t, ast.BlockAccess))
        body = self.body(self.module.stmts)
        for decl in self.tensors.values():
            if decl.kind == "output" and decl.name not in self.written:
                self.err("E-unwritten", f"output '{decl.name}' is never written", decl.span,
                         f"write its blocks: {decl.name}{{...}} = ...")
        tensors = {
            name: ir.TensorSpec(name, decl.kind, decl.dtype, self.spec_dims(decl), decl.span)
            for name, decl in self.tensors.items()
        }
        blocks = {count: decl.size.name for count, decl in self.counts.items()}
        return ir.BlockProgramIR(tuple(self.sizes), blocks, tensors, body, self.source.name)

    # -- declarations --------------------------------------------------------------------
    def declared(self) -> set[str]:
        return set(self.sizes) | set(self.counts) | set(self.tensors) | set(self.params)

    def describe(self, name: str) -> str | None:
        if name in self.sizes:
            return "a size"
        if name in self.counts:
            return "a block count"
        if name in self.tensors:
            return "a tensor"
        if name in self.params:
            return "a param"
        return None

    def declarations(self) -> None:
        decls = sorted((*self.module.decls, *self.module.blocks),
                       key=lambda d: (d.span.line, d.span.col))
        for decl in decls:
            name = decl.count if isinstance(decl, ast.BlocksDecl) else decl.name
            if name in self.declared():
                span = decl.count_span if isinstance(decl, ast.BlocksDecl) else decl.span
                self.err("E-type", f"'{name}' is declared twice", span,
                         "give each size, block count, param and tensor its own name")
                continue
            if isinstance(decl, ast.SizeDecl):
                check_size_value(decl, self.err)
                self.sizes[decl.name] = decl
            elif isinstance(decl, ast.ParamDecl):
                self.err("E-unsupported", f"param '{decl.name}' in a block program: block "
                         "programs take no params", decl.span, "write the number itself")
                self.params[decl.name] = decl
            elif isinstance(decl, ast.TensorDecl):
                self.tensor_decl(decl)
                self.tensors[decl.name] = decl
            else:
                self.counts[decl.count] = decl
        for decl in self.module.blocks:  # sizes may be declared after the counts that cut them
            if self.counts.get(decl.count) is decl:
                self.blocks_decl(decl)

    def blocks_decl(self, decl: ast.BlocksDecl) -> None:
        size = decl.size.name
        if size not in self.sizes:
            what = self.describe(size)
            if what is not None:
                message = f"block count '{decl.count}' cuts '{size}', which is {what}, not a size"
            else:
                message = f"block count '{decl.count}' cuts '{size}', which is not a declared size"
            hint = did_you_mean(size, self.sizes) or f"declare it: size {size}"
            self.err("E-block", message, decl.size.span, hint)
            return
        if size in self.cut:
            first = self.counts[self.cut[size]]
            self.err("E-block", f"size '{size}' is already cut by '{first.count}' at "
                     f"{first.span}", decl.span, "one block count per size")
            return
        self.cut[size] = decl.count

    def tensor_decl(self, decl: ast.TensorDecl) -> None:
        check_dtype(decl.dtype, decl.dtype_span, self.err)
        for dim in decl.dims:
            if isinstance(dim, ast.Name):
                check_size_known(dim, self.sizes, self.err)
            elif isinstance(dim, ast.Num):
                self.err("E-block", f"dimension {dim.value} of '{decl.name}' is a number; a "
                         "block program declares dimensions with sizes", dim.span,
                         f"declare a size: size D = {dim.value}")
        for hint in decl.hints:
            self.err("E-block", f"hint '@{hint.kind}' in a block program", hint.span,
                     "blocks are cut by 'blocks NB of N' declarations")
        if decl.sparse is not None:
            self.err("E-block", f"sparse declaration of '{decl.name}' in a block program",
                     decl.sparse.span, "block kernels take dense blocks; sparse inputs are "
                     "for element programs (index notation)")

    def spec_dims(self, decl: ast.TensorDecl) -> tuple[str, ...] | None:
        if decl.kind == "tensor" and not decl.shaped:
            return None
        return tuple(d.name if isinstance(d, ast.Name) else str(d.value) for d in decl.dims)

    # -- statements ----------------------------------------------------------------------
    def body(self, stmts) -> tuple[ir.Statement, ...]:
        out: list[ir.Statement] = []
        for stmt in stmts:
            result = self.statement(stmt)
            if result is not None:
                out.append(result)
        return tuple(out)

    def statement(self, stmt: ast.Stmt) -> ir.Statement | None:
        if isinstance(stmt, ast.BlockAssign):
            return self.assign(stmt)
        if isinstance(stmt, ast.For):
            return self.loop(stmt)
        if isinstance(stmt, ast.IfStmt):
            cond = self.cond_expr(stmt.cond)
            then, orelse = self.body(stmt.then), self.body(stmt.orelse)
            return None if cond is None else ir.If(cond, then, orelse, stmt.span)
        if isinstance(stmt, ast.Assign):
            self.err("E-block", f"element assignment to '{stmt.target}' in a block program",
                     stmt.target_span, f"assign blocks: {stmt.target}{{...}} = ...")
        elif isinstance(stmt, ast.CompAssign):
            self.err("E-block", "a comprehension in a block program", stmt.comp.span,
                     "assign blocks with kernels, e.g. L{k, k} = chol(A{k, k})")
        elif isinstance(stmt, ast.Repeat):
            self.err("E-block", "'repeat' in a block program", _keyword_span(stmt.span, "repeat"),
                     "write a for loop: for t in 0:count { ... }")
        return None

    def loop(self, stmt: ast.For) -> ir.Loop | None:
        levels = []
        for position, binding in enumerate(stmt.bindings):
            start = self.int_expr(binding.lo)
            stop = self.int_expr(binding.hi)
            step = ir.IntConst(1) if binding.step is None else self.int_expr(binding.step)
            if isinstance(step, ir.IntConst) and step.value <= 0:
                self.err("E-loop", f"the step of '{binding.name.name}' is {step.value}; a loop "
                         "step must be positive", binding.step.span, "write e.g. 0:NB:2")
            self.loop_var(binding.name)
            self.scope.append((binding.name.name, binding.span))
            span = stmt.span if position == 0 else binding.span
            levels.append((binding.name.name, start, stop, step, span))
        body = self.body(stmt.body)
        del self.scope[len(self.scope) - len(stmt.bindings):]
        result: ir.Loop | None = None
        for var, start, stop, step, span in reversed(levels):
            if None in (start, stop, step):
                return None
            result = ir.Loop(var, start, stop, step, body, span)
            body = (result,)
        return result

    def loop_var(self, name: ast.Name) -> None:
        for var, span in self.scope:
            if var == name.name:
                self.err("E-block", f"loop variable '{name.name}' shadows the loop variable "
                         f"'{var}' of the loop at {span}", name.span, "rename it")
                return
        what = self.describe(name.name)
        if what is not None:
            the = "the " + what.split(" ", 1)[1]
            self.err("E-block", f"loop variable '{name.name}' shadows {the} '{name.name}'",
                     name.span, "rename the loop variable")

    def assign(self, stmt: ast.BlockAssign) -> ir.BlockWrite | None:
        ok = True
        if stmt.op != "=":
            self.err("E-block", f"'{stmt.op}=' in a block program", stmt.op_span,
                     f"write the update: X{{...}} = X{{...}} {stmt.op} ...")
            ok = False
        if stmt.where:
            self.err("E-block", "'where' in a block program", stmt.where[0].span,
                     "loop with for instead")
            ok = False
        refs: list[ir.BlockRef] = []
        for target in stmt.targets:
            if isinstance(target, ast.BlockAccess):
                ref = self.ref(target, write=True)
                if ref is None:
                    ok = False
                    continue
                if ref in refs:
                    self.err("E-cycle", f"block '{self.text(target.span)}' is written twice "
                             "by one statement", target.span,
                             "the task would depend on itself: write distinct blocks")
                    ok = False
                refs.append(ref)
            else:
                name = target.tensor if isinstance(target, ast.Access) else target.name
                self.err("E-block", f"element target '{self.text(target.span)}' in a block "
                         "program", target.span, f"assign a block: {name}{{...}}")
                ok = False
        if isinstance(stmt.rhs, ast.Comprehension):
            self.err("E-block", "a comprehension in a block program", stmt.rhs.span,
                     "assign blocks with kernels, e.g. L{k, k} = chol(A{k, k})")
            return None
        value = self.block_expr(stmt.rhs, top=True)
        if not self.results_match(stmt):
            ok = False
        if not ok or value is None:
            return None
        return ir.BlockWrite(tuple(refs), value, stmt.span)

    def results_match(self, stmt: ast.BlockAssign) -> bool:
        written = len(stmt.targets)
        rhs = stmt.rhs
        if isinstance(rhs, ast.Call) and rhs.fn in ir.KERNELS:
            results = ir.KERNELS[rhs.fn].results
            if results == written:
                return True
            names = f" ({_RESULT_NAMES[rhs.fn]})" if rhs.fn in _RESULT_NAMES else ""
            verb = "is" if written == 1 else "are"
            self.err("E-arity", f"'{rhs.fn}' returns {_plural(results, 'block')}{names}, but "
                     f"{_plural(written, 'target')} {verb} written", rhs.span,
                     f"write {results} target(s), one per result")
            return False
        if written == 1:
            return True
        self.err("E-arity", f"the right side is 1 block, but {written} targets are written",
                 rhs.span, "only a kernel with several results (qr, lu, unstack) fills "
                 "several targets")
        return False

    # -- block accesses ------------------------------------------------------------------
    def ref(self, e: ast.BlockAccess, write: bool) -> ir.BlockRef | None:
        coords = [self.int_expr(c, subscript=True) for c in e.coords]
        decl = self.tensors.get(e.tensor)
        if decl is None:
            what = self.describe(e.tensor)
            if what is not None:
                self.err("E-block", f"'{e.tensor}' is {what}, not a tensor", e.span)
            else:
                hint = did_you_mean(e.tensor, self.tensors) or (
                    f"declare it: tensor {e.tensor} : f64")
                self.err("E-undefined", f"unknown tensor '{e.tensor}'", e.span, hint)
            return None
        unwritten = decl.kind != "input" and e.tensor not in self.written
        if not write and unwritten and e.tensor not in self.unwritten_reported:
            self.unwritten_reported.add(e.tensor)
            self.err("E-unwritten", f"'{e.tensor}' is read but no statement writes it",
                     e.span, f"write {e.tensor}{{...}} first, or declare it as an input")
        ok = self.coordinate_count(e, decl)
        if None in coords or not ok:
            return None
        return ir.BlockRef(e.tensor, tuple(coords), e.span)

    def coordinate_count(self, e: ast.BlockAccess, decl: ast.TensorDecl) -> bool:
        given = len(e.coords)
        dims = self.spec_dims(decl)
        if dims is None:
            first = self.collection_rank.setdefault(e.tensor, (given, e.span))
            if first[0] != given:
                self.err("E-block", f"'{e.tensor}' is used with "
                         f"{_plural(given, 'block coordinate')} here but with {first[0]} at "
                         f"{first[1]}", e.span,
                         "a block collection takes the same number of coordinates at every use")
                return False
            return True
        if given != len(dims):
            verb = "is" if given == 1 else "are"
            shape = f"{decl.name} : {decl.dtype}[{', '.join(dims)}]"
            self.err("E-block", f"'{e.tensor}' has {_plural(len(dims), 'dimension')} but "
                     f"{_plural(given, 'block coordinate')} {verb} given", e.span,
                     f"declared {shape}: one coordinate per dimension, 0 for one not cut")
            return False
        ok = True
        for position, (coord, dim) in enumerate(zip(e.coords, dims, strict=True)):
            if not (isinstance(coord, ast.Num) and isinstance(coord.value, int)):
                continue
            if coord.value < 0:
                self.err("E-block", f"block coordinate {coord.value} of '{e.tensor}' is "
                         "negative", coord.span, "blocks are numbered from 0")
                ok = False
            elif coord.value > 0 and dim not in self.cut:
                self.err("E-block", f"block coordinate {coord.value} is out of range: "
                         f"dimension {position} of '{e.tensor}' ({dim}) is not cut, so its "
                         "only block is 0", coord.span,
                         f"write 0, or cut it: blocks {dim}B of {dim}")
                ok = False
        return ok

    # -- index expressions ---------------------------------------------------------------
    def loop_vars(self, expr: ir.IntExpr) -> list[str]:
        names = ir.names_in(expr)
        return [var for var, _ in self.scope if var in names]

    def int_expr(self, e: ast.ExprSyntax, subscript: bool = False) -> ir.IntExpr | None:
        """``e`` as an index expression (``None`` after reporting why it is not one);
        ``subscript`` adds the affinity rules of block coordinates."""
        if isinstance(e, ast.Num):
            if isinstance(e.value, int) and not isinstance(e.value, bool):
                return ir.IntConst(e.value)
            shown = str(e.value).lower() if isinstance(e.value, bool) else self.text(e.span)
            self.err("E-block", f"index expressions are integers, got {shown}", e.span,
                     "block coordinates, loop bounds and conditions are integer arithmetic")
            return None
        if isinstance(e, ast.Name):
            return self.index_name(e)
        if isinstance(e, ast.Unary):
            if e.op == "not":
                self.err("E-block", "'not' in an index expression", e.span,
                         "'not' negates a condition: use it after 'if'")
                return None
            x = self.int_expr(e.x, subscript)
            if x is None:
                return None
            if isinstance(x, ir.IntConst):
                return ir.IntConst(-x.value)
            return ir.IntOp("-", ir.IntConst(0), x)
        if isinstance(e, ast.Binary):
            return self.int_binary(e, subscript)
        if isinstance(e, ast.Call):
            return self.int_call(e, subscript)
        if isinstance(e, ast.BlockAccess):
            self.err("E-block", f"block access '{self.text(e.span)}' in an index expression",
                     e.span, _INDEX_WORDS)
            return None
        if isinstance(e, ast.Access):
            self.element_access(e)
            return None
        self.err("E-block", f"{_NOT_ALLOWED.get(type(e), 'this')} is not allowed in an index "
                 "expression", e.span, _INDEX_WORDS)
        return None

    def index_name(self, e: ast.Name) -> ir.IntExpr | None:
        name = e.name
        if any(var == name for var, _ in self.scope) or name in self.counts or name in self.sizes:
            return ir.Var(name)
        what = self.describe(name)
        if what is not None:
            self.err("E-block", f"'{name}' is {what}; it is not allowed in an index expression",
                     e.span, _INDEX_WORDS)
            return None
        known = [var for var, _ in self.scope] + list(self.counts) + list(self.sizes)
        hint = did_you_mean(name, known) or _INDEX_WORDS
        self.err("E-undefined", f"unknown name '{name}'", e.span, hint)
        return None

    def int_binary(self, e: ast.Binary, subscript: bool) -> ir.IntExpr | None:
        if e.op in _COMPARE or e.op in ("and", "or"):
            word = _COMPARE.get(e.op, e.op)
            self.err("E-block", f"'{word}' in an index expression", e.span,
                     "comparisons and and/or make conditions: use them after 'if'")
            return None
        if e.op not in _INT_OPS:
            if e.op == "matmul":
                message, hint = "'@' in an index expression", \
                    "'@' multiplies blocks; multiply integers with '*'"
            else:
                message, hint = f"'{_BLOCK_OPS.get(e.op, e.op)}' in an index expression", \
                    _INDEX_WORDS
            self.err("E-block", message, e.span, hint)
            return None
        before = self.affine_errors
        a, b = self.int_expr(e.a, subscript), self.int_expr(e.b, subscript)
        if a is None or b is None:
            return None
        result = ir.IntOp(_INT_OPS[e.op], a, b)
        if subscript and self.affine_errors == before:
            self.affine(e, a, b)
        return result

    def affine(self, e: ast.Binary, a: ir.IntExpr, b: ir.IntExpr) -> None:
        hint = "a block subscript is affine in the loop variables, like 2*i + 1 or i + 2**l"
        if e.op == "mul" and self.loop_vars(a) and self.loop_vars(b):
            self.err("E-affine", f"block subscript '{self.text(e.span)}' is not affine: both "
                     "factors of '*' contain loop variables", e.span, hint)
        elif e.op == "pow" and self.loop_vars(a):
            self.err("E-affine", f"block subscript '{self.text(e.span)}' is not affine: loop "
                     f"variable '{self.loop_vars(a)[0]}' in the base of '**'", e.span,
                     "a loop variable may be an exponent only, as in 2**l")

    def int_call(self, e: ast.Call, subscript: bool) -> ir.IntExpr | None:
        if e.fn not in ir.INT_FUNCS:
            if e.fn in ir.KERNELS:
                self.err("E-block", f"kernel '{e.fn}' in an index expression", e.span,
                         "kernels compute blocks; " + _INDEX_WORDS)
            else:
                hint = did_you_mean(e.fn, ir.INT_FUNCS) or "index functions: min max log2"
                self.err("E-undefined", f"unknown function '{e.fn}'", e.span, hint)
            return None
        before = self.affine_errors
        args = [self.int_expr(a, subscript) for a in e.args]
        arity = ir.INT_FUNCS[e.fn]
        if len(args) != arity:
            self.err("E-arity", f"'{e.fn}' takes {_plural(arity, 'argument')}, got "
                     f"{len(args)}", e.span)
            return None
        if None in args:
            return None
        result = ir.IntCall(e.fn, tuple(args))
        inside = self.loop_vars(result)
        if subscript and inside and self.affine_errors == before:
            self.err("E-affine", f"block subscript '{self.text(e.span)}' is not affine: loop "
                     f"variable '{inside[0]}' inside '{e.fn}'", e.span,
                     f"{e.fn} in a block subscript may use block counts and sizes only")
        return result

    # -- conditions ----------------------------------------------------------------------
    def cond_expr(self, e: ast.ExprSyntax) -> ir.CondExpr | None:
        if isinstance(e, ast.Binary) and e.op in _COMPARE:
            a, b = self.int_expr(e.a), self.int_expr(e.b)
            return None if a is None or b is None else ir.Compare(_COMPARE[e.op], a, b)
        if isinstance(e, ast.Binary) and e.op in ("and", "or"):
            a, b = self.cond_expr(e.a), self.cond_expr(e.b)
            return None if a is None or b is None else ir.BoolOp(e.op, a, b)
        if isinstance(e, ast.Unary) and e.op == "not":
            x = self.cond_expr(e.x)
            return None if x is None else ir.Not(x)
        self.err("E-block", f"the condition '{self.text(e.span)}' is not a comparison", e.span,
                 "a condition compares index expressions (== != < <= > >=), joined with "
                 "and, or, not")
        return None

    # -- block expressions ---------------------------------------------------------------
    def element_access(self, e: ast.Access) -> None:
        self.err("E-block", f"element access '{self.text(e.span)}' in a block program", e.span,
                 f"read a block: {e.tensor}{{...}}")

    def block_expr(self, e: ast.ExprSyntax, top: bool = False) -> ir.BlockExpr | None:
        """``e`` as a block expression; ``top`` when it is a whole right side (where a
        kernel with several results may stand)."""
        if isinstance(e, ast.BlockAccess):
            ref = self.ref(e, write=False)
            return None if ref is None else ir.Read(ref)
        if isinstance(e, ast.Num):
            if isinstance(e.value, bool):
                self.err("E-block", f"'{str(e.value).lower()}' is not a block value", e.span,
                         "block expressions are blocks, numbers and kernel calls")
                return None
            return ir.Scalar(float(e.value))
        if isinstance(e, ast.Name):
            self.block_name(e)
            return None
        if isinstance(e, ast.Access):
            self.element_access(e)
            return None
        if isinstance(e, ast.Unary):
            if e.op == "not":
                self.err("E-block", "'not' in a block expression", e.span,
                         "use 'if' to choose statements")
                return None
            if isinstance(e.x, ast.Num) and not isinstance(e.x.value, bool):
                return ir.Scalar(-float(e.x.value))
            x = self.block_expr(e.x)
            return None if x is None else ir.Kernel("neg", (x,), e.span)
        if isinstance(e, ast.Binary):
            return self.block_binary(e)
        if isinstance(e, ast.Call):
            return self.block_call(e, top)
        self.err("E-block", f"{_NOT_ALLOWED.get(type(e), 'this')} is not allowed in a block "
                 "program", e.span, "block expressions are blocks, numbers and kernel calls")
        return None

    def block_name(self, e: ast.Name) -> None:
        name = e.name
        if name in self.tensors:
            self.err("E-block", f"'{name}' is a tensor; read one of its blocks", e.span,
                     f"write {name}{{...}}")
            return
        what = "a loop variable" if any(v == name for v, _ in self.scope) else self.describe(name)
        if what is not None:
            self.err("E-block", f"'{name}' is {what}, not a block", e.span,
                     "index values belong in X{...}, loop bounds and conditions")
            return
        hint = did_you_mean(name, self.tensors) or "read a block of a tensor: X{...}"
        self.err("E-undefined", f"unknown name '{name}'", e.span, hint)

    def block_binary(self, e: ast.Binary) -> ir.BlockExpr | None:
        if e.op == "pow":
            self.err("E-block", "'**' on blocks", e.span,
                     "'**' is for index expressions; multiply blocks with '*' or '@'")
            return None
        if e.op not in _BLOCK_OPS:
            self.err("E-block", f"'{_COMPARE.get(e.op, e.op)}' in a block expression", e.span,
                     "comparisons make conditions: use 'if' to choose statements")
            return None
        a, b = self.block_expr(e.a), self.block_expr(e.b)
        if e.op == "matmul":
            for side in (a, b):
                if isinstance(side, ir.Scalar):
                    self.err("E-block", "'@' needs a block on each side, got a number", e.span,
                             "scale a block with '*'")
                    return None
        if a is None or b is None:
            return None
        return ir.Kernel(ir.OPERATOR_KERNELS[_BLOCK_OPS[e.op]], (a, b), e.span)

    def block_call(self, e: ast.Call, top: bool) -> ir.BlockExpr | None:
        sig = ir.KERNELS.get(e.fn)
        if sig is None:
            if e.fn in ir.INT_FUNCS:
                self.err("E-block", f"'{e.fn}' is an index function, not a kernel", e.span,
                         "it belongs in X{...}, loop bounds and conditions")
            else:
                hint = did_you_mean(e.fn, ir.KERNELS) or "kernels: " + " ".join(ir.KERNELS)
                self.err("E-undefined", f"unknown kernel '{e.fn}'", e.span, hint)
            for arg in e.args:
                self.block_expr(arg)
            return None
        args = [self.block_expr(arg) for arg in e.args]
        if len(args) != sig.arity:
            self.err("E-arity", f"kernel '{e.fn}' takes {_plural(sig.arity, 'block')}, got "
                     f"{len(args)}", e.span, f"{e.fn}: {sig.doc}")
            return None
        if sig.results > 1 and not top:
            names = f" ({_RESULT_NAMES[e.fn]})" if e.fn in _RESULT_NAMES else ""
            self.err("E-arity", f"'{e.fn}' returns {sig.results} blocks{names}; it must be the "
                     "whole right side of an assignment", e.span,
                     f"assign its results to {sig.results} targets first")
            return None
        if None in args:
            return None
        return ir.Kernel(e.fn, tuple(args), e.span)
