"""Block programs: loop programs over the *blocks* of tensors (numpywren's LAmbdaPACK idea).

Contract: a :class:`BlockProgramIR` is plain, immutable data the ``.tc`` front end builds from a
block program and the rest of tensorc reads:

- **index expressions** (:class:`IntConst`, :class:`Var`, :class:`IntOp`, :class:`IntCall`) are
  integer arithmetic over loop variables, block counts and sizes: ``+ - * **`` and the calls
  ``min``, ``max`` and ``log2`` (the ceiling of the base-2 logarithm; ``log2(1) == 0``).
  :func:`eval_int` evaluates one in an environment; nothing is ever ``eval``-ed;
- **conditions** (:class:`Compare`, :class:`BoolOp`, :class:`Not`) over index expressions;
- **block expressions** (:class:`Read`, :class:`Scalar`, :class:`Kernel`) are what one task
  computes: kernel calls over block reads. Operators are kernels too (``add``, ``sub``,
  ``mul``, ``div``, ``neg``, ``matmul``); :data:`KERNELS` lists every kernel with its number
  of arguments and of results;
- **statements** (:class:`BlockWrite`, :class:`Loop`, :class:`If`): an assignment writes one or
  more blocks (one per result of its kernel); a loop runs ``for var in start:stop:step``
  with bounds that may use outer loop variables; an ``If`` guards statements with a condition.

Semantics are sequential: the program reads like an in-place algorithm, and a block written
several times is versioned (SSA over block and iteration), so every read sees the latest
write of that block before it in program order, or the input's block when none precedes it.
Spans are opaque to this module (the front end's source positions, kept for messages).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

# ---- index expressions -------------------------------------------------------------------


@dataclass(frozen=True)
class IntConst:
    value: int

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class Var:
    """A loop variable, a block count or a size, by name."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class IntOp:
    op: str  # "+", "-", "*", "**"
    left: IntExpr
    right: IntExpr

    def __str__(self) -> str:
        return _format_int(self, 0)


_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "**": 3}


def _format_int(expr: IntExpr, outer: int, right: bool = False) -> str:
    if not isinstance(expr, IntOp):
        return str(expr)
    mine = _PRECEDENCE[expr.op]
    # a - (b + c), a ** (b ** c) and (a ** b) ** c need their parentheses
    left = _format_int(expr.left, mine + (expr.op == "**"))
    tight = expr.op in ("-", "**")
    text = f"{left} {expr.op} {_format_int(expr.right, mine + tight, True)}"
    if expr.op == "**":
        text = text.replace(" ** ", "**")
    return f"({text})" if mine < outer or (right and mine == outer and outer) else text


@dataclass(frozen=True)
class IntCall:
    fn: str  # "min", "max", "log2"
    args: tuple[IntExpr, ...]

    def __str__(self) -> str:
        return f"{self.fn}({', '.join(map(str, self.args))})"


IntExpr = IntConst | Var | IntOp | IntCall
INT_OPS = ("+", "-", "*", "**")
INT_FUNCS = {"min": 2, "max": 2, "log2": 1}


def ceil_log2(value: int) -> int:
    """The smallest ``e >= 0`` with ``2**e >= value`` (0 for values up to 1)."""
    return 0 if value <= 1 else (value - 1).bit_length()


def eval_int(expr: IntExpr, env: dict[str, int]) -> int:
    """The value of ``expr`` with every name looked up in ``env`` (``KeyError`` if missing)."""
    if isinstance(expr, IntConst):
        return expr.value
    if isinstance(expr, Var):
        return env[expr.name]
    if isinstance(expr, IntOp):
        return _INT_OPERATORS[expr.op](eval_int(expr.left, env), eval_int(expr.right, env))
    values = [eval_int(a, env) for a in expr.args]
    return {"min": min, "max": max}[expr.fn](values) if expr.fn != "log2" else \
        ceil_log2(values[0])


def _power(left: int, right: int) -> int:
    if right < 0:
        raise ValueError(f"negative exponent {right}")
    return left**right


_INT_OPERATORS = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__, "**": _power}


def int_function(expr: IntExpr):
    """``expr`` as a Python function of an environment, built once per expression from
    closures over the tree (the analysis evaluates subscripts millions of times)."""
    if isinstance(expr, IntConst):
        value = expr.value
        return lambda env: value
    if isinstance(expr, Var):
        name = expr.name
        return lambda env: env[name]
    if isinstance(expr, IntOp):
        left, right, op = int_function(expr.left), int_function(expr.right), \
            _INT_OPERATORS[expr.op]
        return lambda env: op(left(env), right(env))
    args = tuple(int_function(a) for a in expr.args)
    if expr.fn == "min":
        return lambda env: min(f(env) for f in args)
    if expr.fn == "max":
        return lambda env: max(f(env) for f in args)
    return lambda env: ceil_log2(args[0](env))


@lru_cache(maxsize=4096)
def names_in(expr: IntExpr) -> frozenset[str]:
    """Every name an index expression reads."""
    if isinstance(expr, Var):
        return frozenset((expr.name,))
    if isinstance(expr, IntOp):
        return names_in(expr.left) | names_in(expr.right)
    if isinstance(expr, IntCall):
        return frozenset().union(*(names_in(a) for a in expr.args))
    return frozenset()


@lru_cache(maxsize=4096)
def linear_in(expr: IntExpr, var: str) -> tuple[IntExpr, IntExpr] | None:
    """``(a, b)`` with ``expr == a * var + b`` and neither reading ``var``, or ``None``."""
    if var not in names_in(expr):
        return IntConst(0), expr
    if isinstance(expr, Var):
        return IntConst(1), IntConst(0)
    if isinstance(expr, IntOp) and expr.op in ("+", "-"):
        left, right = linear_in(expr.left, var), linear_in(expr.right, var)
        if left is None or right is None:
            return None
        return IntOp(expr.op, left[0], right[0]), IntOp(expr.op, left[1], right[1])
    if isinstance(expr, IntOp) and expr.op == "*":
        left, right = linear_in(expr.left, var), linear_in(expr.right, var)
        if left is None or right is None:
            return None
        if var not in names_in(expr.left):
            return IntOp("*", expr.left, right[0]), IntOp("*", expr.left, right[1])
        if var not in names_in(expr.right):
            return IntOp("*", left[0], expr.right), IntOp("*", left[1], expr.right)
    return None


# ---- conditions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Compare:
    op: str  # "==", "!=", "<", "<=", ">", ">="
    left: IntExpr
    right: IntExpr

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


@dataclass(frozen=True)
class BoolOp:
    op: str  # "and", "or"
    left: CondExpr
    right: CondExpr

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


@dataclass(frozen=True)
class Not:
    operand: CondExpr

    def __str__(self) -> str:
        return f"not {self.operand}"


CondExpr = Compare | BoolOp | Not
_COMPARE = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def cond_function(cond: CondExpr):
    """``cond`` as a Python function of an environment (see :func:`int_function`)."""
    if isinstance(cond, Compare):
        test, left, right = _COMPARE[cond.op], int_function(cond.left), int_function(cond.right)
        return lambda env: test(left(env), right(env))
    if isinstance(cond, Not):
        inner = cond_function(cond.operand)
        return lambda env: not inner(env)
    left, right = cond_function(cond.left), cond_function(cond.right)
    if cond.op == "and":
        return lambda env: left(env) and right(env)
    return lambda env: left(env) or right(env)


def eval_cond(cond: CondExpr, env: dict[str, int]) -> bool:
    """Whether ``cond`` holds in ``env``."""
    if isinstance(cond, Compare):
        return _COMPARE[cond.op](eval_int(cond.left, env), eval_int(cond.right, env))
    if isinstance(cond, Not):
        return not eval_cond(cond.operand, env)
    if cond.op == "and":
        return eval_cond(cond.left, env) and eval_cond(cond.right, env)
    return eval_cond(cond.left, env) or eval_cond(cond.right, env)


# ---- block expressions ---------------------------------------------------------------------


@dataclass(frozen=True)
class BlockRef:
    """Block ``coords`` of ``tensor`` (one coordinate per dimension, or per use of a
    temporary's coordinates)."""

    tensor: str
    coords: tuple[IntExpr, ...]
    span: object = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{self.tensor}{{{', '.join(map(str, self.coords))}}}"


def block_label(tensor: str, coords: tuple[int, ...]) -> str:
    """One block's name in messages: ``L{2, 1}``."""
    return f"{tensor}{{{', '.join(map(str, coords))}}}"


@dataclass(frozen=True)
class Read:
    ref: BlockRef

    def __str__(self) -> str:
        return str(self.ref)


@dataclass(frozen=True)
class Scalar:
    value: float

    def __str__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True)
class Kernel:
    name: str
    args: tuple[BlockExpr, ...]
    span: object = field(default=None, compare=False)

    def __str__(self) -> str:
        return _format_block(self, 0)


_SYMBOLS = {"add": ("+", 1), "sub": ("-", 1), "mul": ("*", 2), "div": ("/", 2),
            "matmul": ("@", 2)}


def _format_block(expr: BlockExpr, outer: int, right: bool = False) -> str:
    if not isinstance(expr, Kernel):
        return str(expr)
    if expr.name == "neg":
        return f"-{_format_block(expr.args[0], 3)}"
    if expr.name not in _SYMBOLS:
        return f"{expr.name}({', '.join(_format_block(a, 0) for a in expr.args)})"
    symbol, mine = _SYMBOLS[expr.name]
    text = (f"{_format_block(expr.args[0], mine)} {symbol} "
            f"{_format_block(expr.args[1], mine + 1, True)}")
    return f"({text})" if mine < outer else text


BlockExpr = Read | Scalar | Kernel


@dataclass(frozen=True)
class KernelSig:
    arity: int
    results: int
    doc: str


KERNELS: dict[str, KernelSig] = {
    # operators
    "add": KernelSig(2, 1, "X + Y (a block or a number on either side)"),
    "sub": KernelSig(2, 1, "X - Y"),
    "mul": KernelSig(2, 1, "X * Y, element-wise"),
    "div": KernelSig(2, 1, "X / Y, element-wise"),
    "neg": KernelSig(1, 1, "-X"),
    "matmul": KernelSig(2, 1, "X @ Y, the matrix product"),
    # calls
    "T": KernelSig(1, 1, "the transpose of X"),
    "chol": KernelSig(1, 1, "the lower Cholesky factor L of X = L L^T"),
    "lsolve": KernelSig(2, 1, "L^-1 B for a lower-triangular L"),
    "usolve": KernelSig(2, 1, "U^-1 B for an upper-triangular U"),
    "qr": KernelSig(1, 2, "Q, R of the reduced QR factorisation of X"),
    "qr_r": KernelSig(1, 1, "R of the reduced QR factorisation of X"),
    "lu": KernelSig(1, 2, "L (unit lower), U of X = L U without pivoting"),
    "inv": KernelSig(1, 1, "the inverse of X"),
    "stack": KernelSig(2, 1, "X on top of Y (rows of X, then rows of Y)"),
    "unstack": KernelSig(2, 2, "Z's first rows(X) rows, then the rest (undoes stack(X, _))"),
    "zeros": KernelSig(1, 1, "zeros shaped like X"),
    "eye": KernelSig(1, 1, "the identity shaped like X"),
    "tril": KernelSig(1, 1, "X's lower triangle (diagonal included)"),
    "triu": KernelSig(1, 1, "X's upper triangle (diagonal included)"),
    "rowsum_abs": KernelSig(1, 1, "the sum of |X| along each row (a vector)"),
    "rowmax_abs": KernelSig(1, 1, "the largest |X| of each row (a vector)"),
    "maximum": KernelSig(2, 1, "the larger of X and Y, element-wise"),
}
OPERATOR_KERNELS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "@": "matmul"}


def reads_of(expr: BlockExpr) -> list[BlockRef]:
    """The block reads of ``expr``, in order of appearance, without repeats."""
    out: list[BlockRef] = []

    def walk(node: BlockExpr) -> None:
        if isinstance(node, Read):
            if node.ref not in out:
                out.append(node.ref)
        elif isinstance(node, Kernel):
            for arg in node.args:
                walk(arg)

    walk(expr)
    return out


# ---- statements and programs ---------------------------------------------------------------


@dataclass(frozen=True)
class BlockWrite:
    targets: tuple[BlockRef, ...]
    value: BlockExpr
    span: object = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{', '.join(map(str, self.targets))} = {self.value}"


@dataclass(frozen=True)
class Loop:
    var: str
    start: IntExpr
    stop: IntExpr
    step: IntExpr
    body: tuple[Statement, ...]
    span: object = field(default=None, compare=False)


@dataclass(frozen=True)
class If:
    cond: CondExpr
    then: tuple[Statement, ...]
    orelse: tuple[Statement, ...] = ()
    span: object = field(default=None, compare=False)


Statement = BlockWrite | Loop | If


@dataclass(frozen=True)
class TensorSpec:
    """A declared tensor: ``kind`` is ``input``, ``output`` or ``tensor`` (a temporary);
    ``dims`` are size names, or ``None`` for a temporary declared without a shape (a
    collection of blocks whose shapes come from the kernels that write them)."""

    name: str
    kind: str
    dtype: str
    dims: tuple[str, ...] | None
    span: object = field(default=None, compare=False)


@dataclass(frozen=True)
class BlockProgramIR:
    """A whole block program. ``blocks`` maps each block count to the size it cuts: a
    dimension of that size has that many blocks, every other dimension has one."""

    sizes: tuple[str, ...]
    blocks: dict[str, str]
    tensors: dict[str, TensorSpec]
    body: tuple[Statement, ...]
    name: str = "<source>"

    def inputs(self) -> list[str]:
        return [t.name for t in self.tensors.values() if t.kind == "input"]

    def outputs(self) -> list[str]:
        return [t.name for t in self.tensors.values() if t.kind == "output"]

    def block_grid(self, tensor: str, counts: dict[str, int]) -> tuple[int, ...] | None:
        """Blocks per dimension of a declared-shape tensor, given the block counts."""
        spec = self.tensors[tensor]
        if spec.dims is None:
            return None
        by_size = {size: counts[count] for count, size in self.blocks.items()}
        return tuple(by_size.get(dim, 1) for dim in spec.dims)


def format_statements(body: tuple[Statement, ...], indent: int = 0) -> str:
    """The program's statements as text, one per line (the ``explain`` form)."""
    pad = "  " * indent
    lines = []
    for stmt in body:
        if isinstance(stmt, BlockWrite):
            lines.append(f"{pad}{stmt}")
        elif isinstance(stmt, Loop):
            step = "" if stmt.step == IntConst(1) else f":{stmt.step}"
            lines.append(f"{pad}for {stmt.var} in {stmt.start}:{stmt.stop}{step}")
            lines.append(format_statements(stmt.body, indent + 1))
        else:
            lines.append(f"{pad}if {stmt.cond}")
            lines.append(format_statements(stmt.then, indent + 1))
            if stmt.orelse:
                lines.append(f"{pad}else")
                lines.append(format_statements(stmt.orelse, indent + 1))
    return "\n".join(line for line in lines if line)

