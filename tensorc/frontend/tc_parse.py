"""Parse ``.tc`` text into the typed syntax tree of :mod:`tensorc.frontend.tc_ast`.

Contract: ``parse(source) -> Module`` or raise a :class:`~tensorc.errors.TcError` whose
diagnostics are ``E-parse`` errors listing the expected tokens in the language's words
(``']'``, ``identifier``, ``number``, ``'+='``), never lark's terminal names.

The grammar is ``grammar/tensorc.lark`` (LALR, ``propagate_positions=True``), loaded once with
``Lark.open_from_package``. After a syntax error the parser recovers per top-level item: the
text is cut into items at lines where every bracket is closed and the line does not end in
an operator, each item is parsed on its own (at its original line numbers), and the first
error of every item is reported. Parsing only builds data: no user text is ever evaluated.
"""

from __future__ import annotations

from functools import lru_cache

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
    "$END": "end of file",
}
_CONTINUATION_ENDINGS = (",", "+", "-", "*", "/", "=", "(", "[", "{", "?", ":", "|", "<-")
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


def expected_words(names: set[str] | frozenset[str]) -> str:
    """Terminal names as the language's words, sorted, joined for a message."""
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


@v_args(meta=True)
class _ToAst(Transformer):
    """lark tree → :mod:`tc_ast` nodes (methods named after grammar rules and aliases)."""

    # -- module and declarations -------------------------------------------------------
    def start(self, meta, items):
        decls, stmts = [], []
        for item in items:
            group = item if isinstance(item, list) else [item]
            for node in group:
                is_decl = isinstance(node, (ast.SizeDecl, ast.ParamDecl, ast.TensorDecl))
                (decls if is_decl else stmts).append(node)
        return ast.Module(tuple(decls), tuple(stmts))

    def size_decl(self, meta, items):
        return list(items)

    def size_item(self, meta, items):
        name, value = items[0], items[1] if len(items) > 1 else None
        return ast.SizeDecl(str(name), None if value is None else _number(value), _span(meta))

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
        for item in items[3:]:
            if isinstance(item, ast.Hint):
                hints.append(item)
            elif isinstance(item, tuple):
                dims = item
        return ast.TensorDecl(
            kind, str(name), str(dtype), dims, tuple(hints), _span(meta), _tspan(dtype)
        )

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
        (name, subs, target_span), (op, op_span), rhs = items[0], items[1], items[2]
        ranges = items[3] if len(items) > 3 and items[3] is not None else ()
        if isinstance(rhs, ast.Comprehension):
            return ast.CompAssign(name, subs, op, rhs, _span(meta), op_span, target_span)
        return ast.Assign(name, subs, op, rhs, _span(meta), op_span, target_span, ranges)

    def target(self, meta, items):
        return str(items[0]), tuple(_present(items[1:])), _tspan(items[0])

    def assign_op(self, meta, tokens):
        text = str(tokens[0])
        op = "=" if text == "=" else text[:-1]
        return op, _tspan(tokens[0])

    def where_clause(self, meta, bindings):
        return tuple(bindings)

    def binding(self, meta, items):
        name = ast.Name(str(items[0]), _tspan(items[0]))
        return ast.Binding(name, items[1], items[2], _span(meta))

    def block(self, meta, stmts):
        return tuple(stmts)

    def for_stmt(self, meta, items):
        return ast.For(tuple(items[:-1]), items[-1], _span(meta))

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

    def call(self, meta, items):
        return ast.Call(str(items[0]), tuple(_present(items[1:])), _span(meta))

    def aggregate(self, meta, items):
        return ast.Aggregate(str(items[0])[:-1], items[1], _span(meta))

    def tuple(self, meta, items):
        return ast.Tuple(tuple(_present(items)), _span(meta))


def _message(err: UnexpectedInput, in_chunk: bool) -> tuple[str, Span, str]:
    if isinstance(err, UnexpectedCharacters):
        char = err.char if hasattr(err, "char") else "?"
        span = Span(err.line, err.column, err.line, err.column + 1)
        expected = expected_words(err.allowed or set())
        return f"unexpected character '{char}'", span, f"expected {expected}"
    if isinstance(err, UnexpectedToken):
        token = err.token
        expected = expected_words(err.accepts or err.expected)
        return f"unexpected {_token_word(token, in_chunk)}", _tspan(token), f"expected {expected}"
    if isinstance(err, UnexpectedEOF):
        line = max(1, getattr(err, "line", 1) or 1)
        expected = expected_words(set(err.expected))
        return "unexpected end of file", Span(line, 1, line, 2), f"expected {expected}"
    span = Span(getattr(err, "line", 1) or 1, getattr(err, "column", 1) or 1, 1, 2)
    return str(err).splitlines()[0], span, ""


def _report(diags: Diagnostics, err: UnexpectedInput, in_chunk: bool = False) -> None:
    message, span, hint = _message(err, in_chunk)
    diags.error("E-parse", message, span, hint)


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
        if start is not None and code[:1].isalpha() and not continues:
            result.append((start, "\n".join(lines[start - 1 : number - 1])))  # unclosed item
            start, depth = None, 0
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
    """The syntax tree of ``source``; every syntax error reported in one ``TcError``."""
    diags = Diagnostics(source)
    try:
        tree = parser().parse(source.text)
    except UnexpectedInput as first:
        for line, chunk in chunks(source.text):
            try:
                parser().parse("\n" * (line - 1) + chunk)
            except UnexpectedInput as err:
                _report(diags, err, in_chunk=line + chunk.count("\n") < source.text.count("\n"))
        if not diags:
            _report(diags, first)
        diags.raise_if_any()
        raise AssertionError("unreachable") from first
    return _ToAst().transform(tree)
