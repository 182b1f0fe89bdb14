"""Parse ``.tc`` text into the typed syntax tree of :mod:`tensorc.frontend.tc_ast`.

Contract: ``parse(source) -> Module`` or raise a :class:`~tensorc.errors.TcError` whose
diagnostics are ``E-parse`` errors listing the expected tokens in the language's words
(``']'``, ``identifier``, ``number``, ``'+='``), never lark's terminal names.

The grammar is ``grammar/tensorc.lark`` (LALR, ``propagate_positions=True``), loaded once with
``Lark.open_from_package``. After a syntax error the parser recovers per top-level item: the
text is cut into items at lines where every bracket is closed and the line does not end in
an operator, each item is parsed on its own (at its original line numbers), and the first
error of every item is reported. Parsing only builds data: no user text is ever evaluated.

One grammar covers element programs and block programs (a file with a ``blocks`` declaration
or a block access ``X{...}``, see :func:`tc_ast.block_syntax`); ``parse`` returns either.
In an element program it rejects what only block programs may write, so the element checker
never sees it: ``if``, ``@``, a loop step and several targets are ``E-block`` errors, and
``**`` stays the syntax error it always was (``unexpected '*'``, reported per item like any
other). Expected-token lists of an element program leave out the block-only tokens.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from tensorc.frontend import tc_ast as ast
from tensorc.frontend.diagnostics import Diagnostics, Source, Span

_TERMINAL_WORDS = {
    "NAME": "identifier",
    "NUMBER": "number",
    "AGG": "an aggregation ('+/', '*/', 'max/', 'min/', 'count/', 'and/', 'or/')",
    "COMPARE": "a comparison ('==', '!=', '<', '<=', '>', '>=')",
    "ARROW": "'<-'",
    "BLOCK_ACCESS": "a block access 'X{'",
    "$END": "end of file",
}
_CONTINUATION_ENDINGS = (",", "+", "-", "*", "/", "=", "(", "[", "{", "?", ":", "|", "<-", "@")
_BLOCK_ONLY = frozenset({"BLOCK_ACCESS", "POW", "IF", "ELSE", "BLOCKS", "OF"})
"""Terminals only block programs use: left out of the expected tokens of an element program."""
_BRACKETS = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}


@lru_cache(maxsize=1)
def parser() -> Lark:
    """The LALR parser for ``grammar/tensorc.lark`` (built once per process)."""
    return Lark.open_from_package(
        "tensorc.grammar", "tensorc.lark", parser="lalr", propagate_positions=True
    )


@lru_cache(maxsize=1)
def _words() -> dict[str, str]:
    words = dict(_TERMINAL_WORDS)
    for terminal in parser().terminals:
        if terminal.name in words:
            continue
        if terminal.pattern.type == "str":
            words[terminal.name] = f"'{terminal.pattern.value}'"
        else:
            words[terminal.name] = terminal.name.lower()
    return words


def expected_words(names: set[str] | frozenset[str], element: bool = False) -> str:
    """Terminal names as the language's words, sorted, joined for a message (without the
    block-only tokens when ``element``)."""
    if element:
        names = {n for n in names if n not in _BLOCK_ONLY} or names
    words = sorted({_words().get(n, n.lower()) for n in names})
    return ", ".join(words)


def _token_word(token: Token, in_chunk: bool = False) -> str:
    if token.type == "$END":
        return "end of the statement" if in_chunk else "end of file"
    if token.type == "NAME":
        return f"identifier '{token.value}'"
    if token.type == "NUMBER":
        return f"number {token.value}"
    return f"'{token.value}'"


def _span(meta) -> Span:
    if getattr(meta, "empty", True):
        return Span(1, 1, 1, 2)
    return Span(meta.line, meta.column, meta.end_line, meta.end_column)


def _tspan(token: Token) -> Span:
    line = token.line or 1
    col = token.column or 1
    end_line = token.end_line or line
    end_col = token.end_column or col + max(1, len(str(token)))
    return Span(line, col, end_line, end_col)


def _number(text: str) -> int | float:
    if any(c in text for c in ".eE"):
        return float(text)
    return int(text)


def _present(items) -> list:
    return [item for item in items if item is not None]


class _Target(NamedTuple):
    """An element target ``name[subs]`` as the ``target`` rule builds it."""

    name: str
    subs: tuple
    name_span: Span
    span: Span


class _Op(NamedTuple):
    op: str
    span: Span


def _target_node(target: _Target | ast.BlockAccess) -> ast.BlockAccess | ast.Access | ast.Name:
    """One target of a :class:`~tc_ast.BlockAssign` as an expression node."""
    if isinstance(target, ast.BlockAccess):
        return target
    if target.subs:
        return ast.Access(target.name, target.subs, target.span)
    return ast.Name(target.name, target.span)


@v_args(meta=True)
class _ToAst(Transformer):
    """lark tree → :mod:`tc_ast` nodes (methods named after grammar rules and aliases)."""

    # -- module and declarations -------------------------------------------------------
    def start(self, meta, items):
        decls, stmts = [], []
        blocks = []
        for item in items:
            group = item if isinstance(item, list) else [item]
            for node in group:
                if isinstance(node, ast.BlocksDecl):
                    blocks.append(node)
                    continue
                is_decl = isinstance(node, (ast.SizeDecl, ast.ParamDecl, ast.TensorDecl))
                (decls if is_decl else stmts).append(node)
        return ast.Module(tuple(decls), tuple(stmts), tuple(blocks))

    def size_decl(self, meta, items):
        return list(items)

    def size_item(self, meta, items):
        name, value = items[0], items[1] if len(items) > 1 else None
        return ast.SizeDecl(str(name), None if value is None else _number(value), _span(meta))

    def blocks_decl(self, meta, items):
        count, size = items
        return ast.BlocksDecl(str(count), ast.Name(str(size), _tspan(size)), _span(meta),
                              _tspan(count))

    def param_decl(self, meta, items):
        name, dtype = items[0], items[1]
        value = items[2] if len(items) > 2 else None
        return ast.ParamDecl(str(name), str(dtype), value, _span(meta), _tspan(dtype))

    def param_value(self, meta, tokens):
        text = [str(t) for t in tokens]
        if text[-1] in ("true", "false"):
            return text[-1] == "true"
        value = float("inf") if text[-1] == "inf" else _number(text[-1])
        return -value if text[0] == "-" else value

    def tensor_kind(self, meta, tokens):
        return str(tokens[0])

    def tensor_decl(self, meta, items):
        kind, name, dtype = items[0], items[1], items[2]
        dims: tuple = ()
        hints = []
        shaped = False
        sparse = None
        for item in items[3:]:
            if isinstance(item, ast.Hint):
                hints.append(item)
            elif isinstance(item, ast.SparseSpec):
                sparse = item
            elif isinstance(item, tuple):
                dims, shaped = item, True
        return ast.TensorDecl(
            kind, str(name), str(dtype), dims, tuple(hints), _span(meta), _tspan(dtype), shaped,
            sparse
        )

    def sparse_spec(self, meta, items):
        return ast.SparseSpec(items[0] if items else None, _span(meta))

    def sparse_dims(self, meta, names):
        return tuple(ast.Name(str(n), _tspan(n)) for n in _present(names))

    def shape(self, meta, dims):
        result = []
        for dim in _present(dims):
            if dim.type == "NUMBER":
                result.append(ast.Num(_number(dim), _tspan(dim)))
            else:
                result.append(ast.Name(str(dim), _tspan(dim)))
        return tuple(result)

    def hint(self, meta, items):
        values = tuple(_number(v) for v in _present(items[1:]))
        return ast.Hint(str(items[0]), values, _span(meta))

    # -- statements --------------------------------------------------------------------
    def assign(self, meta, items):
        at = next(n for n, item in enumerate(items) if isinstance(item, _Op))
        targets, (op, op_span), rhs = items[:at], items[at], items[at + 1]
        ranges = items[at + 2] if len(items) > at + 2 and items[at + 2] is not None else ()
        if len(targets) == 1 and isinstance(targets[0], _Target):
            name, subs, target_span, _ = targets[0]
            if isinstance(rhs, ast.Comprehension):
                return ast.CompAssign(name, subs, op, rhs, _span(meta), op_span, target_span)
            return ast.Assign(name, subs, op, rhs, _span(meta), op_span, target_span, ranges)
        nodes = tuple(_target_node(t) for t in targets)
        return ast.BlockAssign(nodes, op, rhs, _span(meta), op_span, ranges)

    def target(self, meta, items):
        return _Target(str(items[0]), tuple(_present(items[1:])), _tspan(items[0]), _span(meta))

    def block_target(self, meta, items):
        return ast.BlockAccess(str(items[0])[:-1], tuple(_present(items[1:])), _span(meta))

    def assign_op(self, meta, tokens):
        text = str(tokens[0])
        op = "=" if text == "=" else text[:-1]
        return _Op(op, _tspan(tokens[0]))

    def where_clause(self, meta, bindings):
        return tuple(bindings)

    def binding(self, meta, items):
        name = ast.Name(str(items[0]), _tspan(items[0]))
        step = items[3] if len(items) > 3 else None
        return ast.Binding(name, items[1], items[2], _span(meta), step)

    def block(self, meta, stmts):
        return tuple(stmts)

    def for_stmt(self, meta, items):
        return ast.For(tuple(items[:-1]), items[-1], _span(meta))

    def if_stmt(self, meta, items):
        cond, then, orelse = items[0], items[1], items[2] if len(items) > 2 else None
        if orelse is None:
            orelse = ()
        elif isinstance(orelse, ast.IfStmt):
            orelse = (orelse,)
        return ast.IfStmt(cond, then, orelse, _span(meta))

    def repeat_stmt(self, meta, items):
        count, var, body = items[0], items[1], items[2]
        return ast.Repeat(count, None if var is None else str(var), body, _span(meta))

    # -- comprehensions ----------------------------------------------------------------
    def comprehension(self, meta, items):
        return ast.Comprehension(items[0], tuple(items[1:]), _span(meta))

    def generator(self, meta, items):
        return ast.Generator(items[0], items[2], _span(meta))

    def range_generator(self, meta, items):
        return ast.RangeGenerator(items[0], items[2], items[3], _span(meta))

    def let_qualifier(self, meta, items):
        return ast.Let(str(items[0]), items[1], _span(meta))

    def group_by(self, meta, items):
        return ast.GroupBy(items[0], _span(meta))

    def condition(self, meta, items):
        return ast.Condition(items[0], _span(meta))

    # -- expressions -------------------------------------------------------------------
    def cond(self, meta, items):
        return ast.Cond(items[0], items[1], items[2], _span(meta))

    def _binary(op):  # noqa: N805 - a factory evaluated in the class body
        def rule(self, meta, items):
            return ast.Binary(op, items[0], items[1], _span(meta))

        return rule

    or_ = _binary("or")
    and_ = _binary("and")
    add = _binary("add")
    sub = _binary("sub")
    mul = _binary("mul")
    div = _binary("div")
    matmul = _binary("matmul")

    def pow(self, meta, items):  # items: base, the '**' token, exponent
        return ast.Binary("pow", items[0], items[-1], _span(meta))

    def compare(self, meta, items):
        ops = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
        return ast.Binary(ops[str(items[1])], items[0], items[2], _span(meta))

    def not_(self, meta, items):
        return ast.Unary("not", items[0], _span(meta))

    def neg(self, meta, items):
        return ast.Unary("neg", items[0], _span(meta))

    def number(self, meta, items):
        return ast.Num(_number(items[0]), _span(meta))

    def inf(self, meta, items):
        return ast.Num(float("inf"), _span(meta))

    def true(self, meta, items):
        return ast.Num(True, _span(meta))

    def false(self, meta, items):
        return ast.Num(False, _span(meta))

    def name(self, meta, items):
        return ast.Name(str(items[0]), _span(meta))

    def access(self, meta, items):
        return ast.Access(str(items[0]), tuple(_present(items[1:])), _span(meta))

    def reduction(self, meta, items):
        indices = []
        for sub in _present(items[1:-1]):
            indices.append(sub)
        return ast.Reduce(str(items[0]), tuple(indices), items[-1], _span(meta))

    def block_access(self, meta, items):
        return ast.BlockAccess(str(items[0])[:-1], tuple(_present(items[1:])), _span(meta))

    def call(self, meta, items):
        return ast.Call(str(items[0]), tuple(_present(items[1:])), _span(meta))

    def aggregate(self, meta, items):
        return ast.Aggregate(str(items[0])[:-1], items[1], _span(meta))

    def tuple(self, meta, items):
        return ast.Tuple(tuple(_present(items)), _span(meta))


def _message(err: UnexpectedInput, in_chunk: bool, element: bool) -> tuple[str, Span, str]:
    if isinstance(err, UnexpectedCharacters):
        char = err.char if hasattr(err, "char") else "?"
        span = Span(err.line, err.column, err.line, err.column + 1)
        expected = expected_words(err.allowed or set(), element)
        return f"unexpected character '{char}'", span, f"expected {expected}"
    if isinstance(err, UnexpectedToken):
        token = err.token
        expected = expected_words(err.accepts or err.expected, element)
        return f"unexpected {_token_word(token, in_chunk)}", _tspan(token), f"expected {expected}"
    if isinstance(err, UnexpectedEOF):
        line = max(1, getattr(err, "line", 1) or 1)
        expected = expected_words(set(err.expected), element)
        return "unexpected end of file", Span(line, 1, line, 2), f"expected {expected}"
    span = Span(getattr(err, "line", 1) or 1, getattr(err, "column", 1) or 1, 1, 2)
    return str(err).splitlines()[0], span, ""


def _report(diags: Diagnostics, err: UnexpectedInput, in_chunk: bool = False,
            element: bool = False, text: str = "") -> None:
    message, span, hint = _message(err, in_chunk, element)
    glued = _glued_brace(text, _position(err)) if text else None
    if glued is not None:
        hint += (f" ('{glued.value}' reads a block of {glued.value[:-1]}: put a space before "
                 f"'{{' to open a body)")
    diags.error("E-parse", message, span, hint)


def _glued_brace(text: str, at: tuple[int, int]) -> Token | None:
    """A block access glued to the end of a ``for``/``if`` header before the error at
    ``at`` (``for k in 0:NB{``), the likely cause of that error; else ``None``."""
    tokens = _tokens(text)
    for token in reversed([t for t in tokens if (t.line, t.column) < at]):
        line = [t for t in tokens if t.line == token.line]
        header = line[0].type in ("FOR", "IF", "ELSE")
        if token.type == "BLOCK_ACCESS" and header and line[-1] is token:
            return token
    return None


def _tokens(text: str) -> list[Token]:
    """The tokens of ``text`` up to the first character no terminal matches."""
    out: list[Token] = []
    try:
        for token in parser().lex(text):
            out.append(token)
    except UnexpectedInput:
        pass
    return out


def _looks_like_block_program(text: str) -> bool:
    """Whether a text that does not parse is meant as a block program (has ``blocks`` or a
    block access), judged from its tokens."""
    return any(t.type in ("BLOCK_ACCESS", "BLOCKS") for t in _tokens(text))


@lru_cache(maxsize=1)
def _operand_words() -> str:
    """What an element program may write after ``*``: the old words for ``**``'s second star."""
    probe = parser().parse_interactive("x = x *")
    probe.exhaust_lexer()
    return expected_words(probe.accepts(), element=True)


def _position(err: UnexpectedInput) -> tuple[int, int]:
    token = getattr(err, "token", None)
    if isinstance(err, UnexpectedToken) and token is not None and token.type != "$END":
        return token.line or 1, token.column or 1
    if isinstance(err, UnexpectedCharacters):
        return err.line, err.column
    return (1 << 30, 0)


def _report_power(diags: Diagnostics, power: Token) -> None:
    """``**`` in an element program: the syntax error the element language always gave."""
    line, col = power.line or 1, (power.column or 1) + 1
    diags.error("E-parse", "unexpected '*'", Span(line, col, line, col + 1),
                f"expected {_operand_words()} ('**' is a power only in the index expressions "
                "of block programs)")


def _recover(diags: Diagnostics, text: str, first: UnexpectedInput | None) -> None:
    """Report the first syntax error of every top-level item, then raise."""
    element = not _looks_like_block_program(text)
    for line, chunk in chunks(text):
        padded = "\n" * (line - 1) + chunk
        err = None
        try:
            parser().parse(padded)
        except UnexpectedInput as caught:
            err = caught
        power = None
        if element:
            power = next((t for t in _tokens(padded) if t.type == "POW"), None)
        if power is not None and (err is None or (power.line, power.column) < _position(err)):
            _report_power(diags, power)
        elif err is not None:
            in_chunk = line + chunk.count("\n") < text.count("\n")
            _report(diags, err, in_chunk=in_chunk, element=element, text=padded)
    if not diags and first is not None:
        _report(diags, first, element=element, text=text)
    diags.raise_if_any()


_BLOCK_HINT = "a block program declares 'blocks NB of N' and reads blocks as X{...}"


def _element_rules(module: ast.Module, diags: Diagnostics) -> None:
    """``E-block`` for every block-only form in an element program."""
    for node in ast.walk(module.stmts):
        if isinstance(node, ast.IfStmt):
            span = Span(node.span.line, node.span.col, node.span.line, node.span.col + 2)
            diags.error("E-block", "'if' is only allowed in a block program", span,
                        "choose values with 'c ? a : b'; " + _BLOCK_HINT)
        elif isinstance(node, ast.BlockAssign):
            diags.error("E-block", "several targets are only allowed in a block program",
                        node.targets[1].span, "assign one tensor per statement")
        elif isinstance(node, ast.Binding) and node.step is not None:
            diags.error("E-block", f"a loop step is only allowed in a block program "
                        f"(loop of '{node.name.name}')", node.step.span,
                        "element loops run over whole dimensions: write 0:N")
        elif isinstance(node, ast.Binary) and node.op in ("matmul", "pow"):
            word = "'@' (the matrix product)" if node.op == "matmul" else "'**'"
            diags.error("E-block", f"{word} is only allowed in a block program", node.span,
                        "write products in index notation: C[i, j] += A[i, k] * B[k, j]")


def _code_part(line: str) -> str:
    return line.split("#", 1)[0].rstrip()


def chunks(text: str) -> list[tuple[int, str]]:
    """Top-level items as ``(first line number, text)``: cut where brackets balance and the
    line does not end in an operator that continues it, or before an unindented line that
    starts with a letter (a new item even if the previous one left a bracket open)."""
    result: list[tuple[int, str]] = []
    start, depth, continues = None, 0, False
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        code = _code_part(line)
        is_else = code.lstrip().startswith("else") and code.lstrip()[4:5] in ("", " ", "{")
        if start is not None and code[:1].isalpha() and not continues and not is_else:
            result.append((start, "\n".join(lines[start - 1 : number - 1])))  # unclosed item
            start, depth = None, 0
        if start is None and is_else and result:
            start, depth = result.pop()[0], 0  # `else` continues the `if` item before it
        if start is None:
            if not code.strip():
                continue
            start = number
        depth += sum(_BRACKETS.get(c, 0) for c in code)
        continues = code.endswith(_CONTINUATION_ENDINGS) or code.endswith((" and", " or"))
        if depth <= 0 and not continues:
            result.append((start, "\n".join(lines[start - 1 : number])))
            start, depth = None, 0
    if start is not None:
        result.append((start, "\n".join(lines[start - 1 :])))
    return result


def parse(source: Source) -> ast.Module:
    """The syntax tree of ``source`` (an element or a block program); every syntax error,
    and every block-only form in an element program, reported in one ``TcError``."""
    diags = Diagnostics(source)
    try:
        tree = parser().parse(source.text)
    except UnexpectedInput as first:
        _recover(diags, source.text, first)
        raise AssertionError("unreachable") from first
    module = _ToAst().transform(tree)
    if not ast.block_syntax(module):
        if any(isinstance(n, ast.Binary) and n.op == "pow" for n in ast.walk(module.stmts)):
            _recover(diags, source.text, None)  # '**' is a syntax error here, as it was
        _element_rules(module, diags)
        diags.raise_if_any()
    return module
