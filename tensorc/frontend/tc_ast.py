"""The typed syntax tree of a ``.tc`` program: frozen dataclasses, every node with a span.

Contract: :mod:`tensorc.frontend.tc_parse` builds these from the lark tree and nothing else
creates user-facing nodes; :mod:`tensorc.frontend.tc_desugar` rewrites loop nests and
comprehensions into plain :class:`Assign` statements (index notation), which the checker and
the lowering then handle as one form. ``format_ast`` prints a tree deterministically (the
``explain("ast")`` stage).

Block programs (checked by :mod:`tensorc.frontend.block_check`) share these nodes and add a
few: :class:`BlocksDecl` (kept in ``Module.blocks``), :class:`BlockAccess` (``X{i, j}``, an
expression and a target), :class:`BlockAssign` (an assignment with a block target or several
targets), :class:`IfStmt`, ``Binding.step`` and the ``Binary`` ops ``pow`` (``**``) and
``matmul`` (``@``). :func:`block_syntax` finds what makes a module a block program. Fields
added for block programs are printed by ``format_ast`` only when set (``shaped`` never), so
the dump of an element program is unchanged. So is ``TensorDecl.sparse`` (a sparse
declaration, :class:`SparseSpec`): printed only when set.
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
    subs: tuple[ExprSyntax, ...]
    span: Span


@dataclass(frozen=True)
class Call:
    """A built-in ``fn(args)`` (``exp``, ``pow``, ``max`` ...)."""

    fn: str
    args: tuple[ExprSyntax, ...]
    span: Span


@dataclass(frozen=True)
class Reduce:
    """An explicit reduction ``sum[j, k](body)``; ``op`` is the reducer's name."""

    op: str
    indices: tuple[Name, ...]
    body: ExprSyntax
    span: Span


@dataclass(frozen=True)
class Aggregate:
    """``+/v`` in a comprehension head (``op`` without the slash)."""

    op: str
    body: ExprSyntax
    span: Span


@dataclass(frozen=True)
class Unary:
    op: str  # "neg" | "not"
    x: ExprSyntax
    span: Span


@dataclass(frozen=True)
class BlockAccess:
    """``X{coords}``: one block of a tensor (block programs only); ``span`` covers it all."""

    tensor: str
    coords: tuple[ExprSyntax, ...]
    span: Span


@dataclass(frozen=True)
class Binary:
    """``a op b``; ``op`` is an IR call op: add sub mul div lt le gt ge eq ne and or, or
    (block programs) ``pow`` for ``**`` and ``matmul`` for ``@``."""

    op: str
    a: ExprSyntax
    b: ExprSyntax
    span: Span


@dataclass(frozen=True)
class Cond:
    """``c ? a : b``."""

    c: ExprSyntax
    a: ExprSyntax
    b: ExprSyntax
    span: Span


@dataclass(frozen=True)
class Tuple:
    """A parenthesised tuple; only comprehension keys and patterns may use one."""

    items: tuple[ExprSyntax, ...]
    span: Span


ExprSyntax = (Num | Name | Access | BlockAccess | Call | Reduce | Aggregate | Unary | Binary
              | Cond | Tuple)
"""An expression of the syntax tree (the IR's ``Map`` expressions are ``tensorc.ir.nodes.Expr``)."""

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
class SparseSpec:
    """``sparse`` (``dims`` is ``None``: every dimension is compressed) or ``sparse(M, ...)``
    (the dimensions whose size symbol is listed are compressed, the others dense)."""

    dims: tuple[Name, ...] | None
    span: Span


@dataclass(frozen=True)
class TensorDecl:
    """``kind name : dtype[dims] sparse(...) hints``; ``shaped`` is False when no brackets
    were written (``T : f64``; in a block program a ``tensor`` so declared is a block
    collection); ``sparse`` is set by a sparse declaration."""

    kind: str  # "input" | "output" | "tensor"
    name: str
    dtype: str
    dims: tuple[Name | Num, ...]
    hints: tuple[Hint, ...]
    span: Span
    dtype_span: Span
    shaped: bool = True
    sparse: SparseSpec | None = None

    def levels(self) -> tuple[str, ...] | None:
        """Per dimension ``"compressed"`` or ``"dense"`` for a sparse declaration (``None``
        for a dense tensor): bare ``sparse`` compresses every dimension, ``sparse(M)`` the
        dimensions whose size symbol is ``M``."""
        if self.sparse is None:
            return None
        if self.sparse.dims is None:
            return ("compressed",) * len(self.dims)
        listed = {n.name for n in self.sparse.dims}
        return tuple("compressed" if isinstance(d, Name) and d.name in listed else "dense"
                     for d in self.dims)


@dataclass(frozen=True)
class BlocksDecl:
    """``blocks NB of N``: the block count ``NB`` cuts every dimension of size ``N``."""

    count: str
    size: Name
    span: Span
    count_span: Span


Decl = SizeDecl | ParamDecl | TensorDecl

# ---- statements --------------------------------------------------------------------------


@dataclass(frozen=True)
class Binding:
    """``name in lo:hi`` (a loop range or a ``where`` range); ``lo:hi:step`` sets ``step``
    (block programs only)."""

    name: Name
    lo: ExprSyntax
    hi: ExprSyntax
    span: Span
    step: ExprSyntax | None = None


@dataclass(frozen=True)
class Assign:
    """``target[subs] op rhs``; ``op`` is ``=`` or a monoid (``+ * max min or and``).

    ``ranges`` are the loop and ``where`` ranges in scope (set by the desugaring of loops);
    ``accumulate`` is set by the checker when an ``op=`` merges into an earlier value.
    """

    target: str
    subs: tuple[ExprSyntax, ...]
    op: str
    rhs: ExprSyntax
    span: Span
    op_span: Span
    target_span: Span
    ranges: tuple[Binding, ...] = ()
    loop: int | None = None  # the id of the outermost enclosing loop nest, if any
    accumulate: bool = False  # set by the checker: an op= merging into an earlier value


@dataclass(frozen=True)
class Generator:
    """``pattern <- Tensor``."""

    pattern: ExprSyntax
    source: Name
    span: Span


@dataclass(frozen=True)
class RangeGenerator:
    """``i <- lo:hi``."""

    var: ExprSyntax
    lo: ExprSyntax
    hi: ExprSyntax
    span: Span


@dataclass(frozen=True)
class Let:
    name: str
    value: ExprSyntax
    span: Span


@dataclass(frozen=True)
class Condition:
    expr: ExprSyntax
    span: Span


@dataclass(frozen=True)
class GroupBy:
    key: ExprSyntax
    span: Span


Qualifier = Generator | RangeGenerator | Let | Condition | GroupBy


@dataclass(frozen=True)
class Comprehension:
    head: ExprSyntax
    qualifiers: tuple[Qualifier, ...]
    span: Span


@dataclass(frozen=True)
class CompAssign:
    """``Target = [ head | qualifiers ]``."""

    target: str
    subs: tuple[ExprSyntax, ...]
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
    count: ExprSyntax
    var: str | None
    body: tuple[Stmt, ...]
    span: Span


@dataclass(frozen=True)
class BlockAssign:
    """An assignment with a block target or several targets: ``Q{l, i}, R{l, i} = qr(...)``.

    ``targets`` are :class:`BlockAccess` nodes in a well-formed block program; an element
    target (:class:`Access`, or :class:`Name` for a bare one) is kept so the checkers can
    report it. ``rhs`` may be a :class:`Comprehension` and ``where`` holds the ranges of a
    ``where`` clause: both are errors in a block program, reported by its checker.
    """

    targets: tuple[BlockAccess | Access | Name, ...]
    op: str
    rhs: ExprSyntax | Comprehension
    span: Span
    op_span: Span
    where: tuple[Binding, ...] = ()


@dataclass(frozen=True)
class IfStmt:
    """``if cond { then } else { orelse }`` (``else if`` nests an ``IfStmt`` in ``orelse``)."""

    cond: ExprSyntax
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]
    span: Span


Stmt = Assign | CompAssign | For | Repeat | BlockAssign | IfStmt


@dataclass(frozen=True)
class Module:
    """A parsed file: declarations and statements in source order; ``blocks`` holds the
    ``blocks NB of N`` declarations (empty in an element program)."""

    decls: tuple[Decl, ...]
    stmts: tuple[Stmt, ...]
    blocks: tuple[BlocksDecl, ...] = ()


def walk(node: object):
    """Every syntax node under ``node`` (itself included), depth first in field order."""
    if isinstance(node, tuple):
        for item in node:
            yield from walk(item)
        return
    if not is_dataclass(node) or isinstance(node, (type, Span)):
        return
    yield node
    for f in fields(node):
        if f.name not in _SKIP:
            yield from walk(getattr(node, f.name))


def block_syntax(module: Module) -> list[BlocksDecl | BlockAccess]:
    """What makes ``module`` a block program: its ``blocks`` declarations and every block
    access (read or target), in source order. Empty for an element program."""
    found: list[BlocksDecl | BlockAccess] = list(module.blocks)
    found.extend(node for node in walk(module.stmts) if isinstance(node, BlockAccess))
    return found


# ---- printing ----------------------------------------------------------------------------

_SKIP = {"span", "op_span", "target_span", "dtype_span", "count_span", "shaped"}
_UNSET = {"step": None, "sparse": None}  # block-program fields, printed only when set


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
        if f.name in _UNSET and value == _UNSET[f.name]:
            continue
        if isinstance(value, (str, int, float, bool)) or value is None:
            lines.append(f"{pad}  {f.name}={value!r}")
        elif isinstance(value, tuple) and not value:
            continue
        else:
            lines.append(f"{pad}  {f.name}:")
            lines.append(format_ast(value, indent + 2))
    return "\n".join(lines)
