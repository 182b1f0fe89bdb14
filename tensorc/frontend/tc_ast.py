"""The typed syntax tree of a ``.tc`` program: frozen dataclasses, every node with a span.

Contract: :mod:`tensorc.frontend.tc_parse` builds these from the lark tree and nothing else
creates user-facing nodes; :mod:`tensorc.frontend.tc_desugar` rewrites loop nests and
comprehensions into plain :class:`Assign` statements (index notation), which the checker and
the lowering then handle as one form. ``format_ast`` prints a tree deterministically (the
``explain("ast")`` stage).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass

from tensorc.frontend.diagnostics import Span

# ---- expressions -------------------------------------------------------------------------


REDUCERS = {"sum": "+", "prod": "*", "max": "max", "min": "min", "any": "or", "all": "and"}
"""The explicit reductions (``sum[k](...)`` …) and the monoid each folds with."""


@dataclass(frozen=True)
class Num:
    value: int | float | bool
    span: Span


@dataclass(frozen=True)
class Name:
    """A bare identifier: a param, a size, a rank-0 tensor, or an index variable."""

    name: str
    span: Span


@dataclass(frozen=True)
class Access:
    """``tensor[subscripts]`` (subscripts are expressions so affine forms parse)."""

    tensor: str
    subs: tuple[Expr, ...]
    span: Span


@dataclass(frozen=True)
class Call:
    """A built-in ``fn(args)`` (``exp``, ``pow``, ``max`` ...)."""

    fn: str
    args: tuple[Expr, ...]
    span: Span


@dataclass(frozen=True)
class Reduce:
    """An explicit reduction ``sum[j, k](body)``; ``op`` is the reducer's name."""

    op: str
    indices: tuple[Name, ...]
    body: Expr
    span: Span


@dataclass(frozen=True)
class Aggregate:
    """``+/v`` in a comprehension head (``op`` without the slash)."""

    op: str
    body: Expr
    span: Span


@dataclass(frozen=True)
class Unary:
    op: str  # "neg" | "not"
    x: Expr
    span: Span


@dataclass(frozen=True)
class Binary:
    """``a op b``; ``op`` is an IR call op: add sub mul div lt le gt ge eq ne and or."""

    op: str
    a: Expr
    b: Expr
    span: Span


@dataclass(frozen=True)
class Cond:
    """``c ? a : b``."""

    c: Expr
    a: Expr
    b: Expr
    span: Span


@dataclass(frozen=True)
class Tuple:
    """A parenthesised tuple; only comprehension keys and patterns may use one."""

    items: tuple[Expr, ...]
    span: Span


Expr = Num | Name | Access | Call | Reduce | Aggregate | Unary | Binary | Cond | Tuple

# ---- declarations ------------------------------------------------------------------------


@dataclass(frozen=True)
class SizeDecl:
    name: str
    value: int | None
    span: Span


@dataclass(frozen=True)
class ParamDecl:
    name: str
    dtype: str
    value: int | float | bool | None
    span: Span
    dtype_span: Span


@dataclass(frozen=True)
class Hint:
    kind: str  # "block" | "grid"
    values: tuple[int, ...]
    span: Span


@dataclass(frozen=True)
class TensorDecl:
    kind: str  # "input" | "output" | "tensor"
    name: str
    dtype: str
    dims: tuple[Name | Num, ...]
    hints: tuple[Hint, ...]
    span: Span
    dtype_span: Span


Decl = SizeDecl | ParamDecl | TensorDecl

# ---- statements --------------------------------------------------------------------------


@dataclass(frozen=True)
class Binding:
    """``name in lo:hi`` (a loop range or a ``where`` range)."""

    name: Name
    lo: Expr
    hi: Expr
    span: Span


@dataclass(frozen=True)
class Assign:
    """``target[subs] op rhs``; ``op`` is ``=`` or a monoid (``+ * max min or and``).

    ``ranges`` are the loop and ``where`` ranges in scope (set by the desugaring of loops);
    ``accumulate`` is set by the checker when an ``op=`` merges into an earlier value.
    """

    target: str
    subs: tuple[Expr, ...]
    op: str
    rhs: Expr
    span: Span
    op_span: Span
    target_span: Span
    ranges: tuple[Binding, ...] = ()
    loop: int | None = None  # the id of the outermost enclosing loop nest, if any
    accumulate: bool = False  # set by the checker: an op= merging into an earlier value


@dataclass(frozen=True)
class Generator:
    """``pattern <- Tensor``."""

    pattern: Expr
    source: Name
    span: Span


@dataclass(frozen=True)
class RangeGenerator:
    """``i <- lo:hi``."""

    var: Expr
    lo: Expr
    hi: Expr
    span: Span


@dataclass(frozen=True)
class Let:
    name: str
    value: Expr
    span: Span


@dataclass(frozen=True)
class Condition:
    expr: Expr
    span: Span


@dataclass(frozen=True)
class GroupBy:
    key: Expr
    span: Span


Qualifier = Generator | RangeGenerator | Let | Condition | GroupBy


@dataclass(frozen=True)
class Comprehension:
    head: Expr
    qualifiers: tuple[Qualifier, ...]
    span: Span


@dataclass(frozen=True)
class CompAssign:
    """``Target = [ head | qualifiers ]``."""

    target: str
    subs: tuple[Expr, ...]
    op: str
    comp: Comprehension
    span: Span
    op_span: Span
    target_span: Span


@dataclass(frozen=True)
class For:
    bindings: tuple[Binding, ...]
    body: tuple[Stmt, ...]
    span: Span


@dataclass(frozen=True)
class Repeat:
    count: Expr
    var: str | None
    body: tuple[Stmt, ...]
    span: Span


Stmt = Assign | CompAssign | For | Repeat


@dataclass(frozen=True)
class Module:
    decls: tuple[Decl, ...]
    stmts: tuple[Stmt, ...]


# ---- printing ----------------------------------------------------------------------------

_SKIP = {"span", "op_span", "target_span", "dtype_span"}


def format_ast(node: object, indent: int = 0) -> str:
    """A deterministic indented dump: ``ClassName @line:col`` then one field per line."""
    pad = "  " * indent
    if isinstance(node, tuple):
        if not node:
            return pad + "()"
        return "\n".join(format_ast(item, indent) for item in node)
    if not is_dataclass(node):
        return pad + repr(node)
    where = f" @{node.span}" if hasattr(node, "span") else ""
    lines = [f"{pad}{type(node).__name__}{where}"]
    for f in fields(node):
        if f.name in _SKIP:
            continue
        value = getattr(node, f.name)
        if isinstance(value, (str, int, float, bool)) or value is None:
            lines.append(f"{pad}  {f.name}={value!r}")
        elif isinstance(value, tuple) and not value:
            continue
        else:
            lines.append(f"{pad}  {f.name}:")
            lines.append(format_ast(value, indent + 2))
    return "\n".join(lines)
