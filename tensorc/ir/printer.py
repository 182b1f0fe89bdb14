"""Deterministic text form of the IR: one SSA line per distinct node, children first.

The same program prints the same text on every run and every machine (no ids, no hashes),
which is what the golden files under ``tests/golden`` pin.
"""

from __future__ import annotations

from collections.abc import Callable

from tensorc.ir.keys import key_of
from tensorc.ir.nodes import Arg, Const, Expr, Function, Join, Map, Merge, OpCall, ReduceByKey, Scan
from tensorc.ir.nodes import post_order as _post_order

_INFIX = {
    "mul": "*",
    "add": "+",
    "sub": "-",
    "div": "/",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "eq": "==",
    "ne": "!=",
    "and": "and",
    "or": "or",
}


def format_expr(expr: Expr) -> str:
    """``#0 * #1``-style text of a map expression."""
    if isinstance(expr, Arg):
        return f"#{expr.position}"
    if isinstance(expr, Const):
        return repr(expr.value)
    if isinstance(expr, OpCall):
        if expr.op in _INFIX:
            inner = f" {_INFIX[expr.op]} ".join(_operand(a) for a in expr.args)
            return inner
        return f"{expr.op}(" + ", ".join(format_expr(a) for a in expr.args) + ")"
    raise TypeError(f"not an expression: {expr!r}")


def _operand(expr: Expr) -> str:
    text = format_expr(expr)
    return f"({text})" if isinstance(expr, OpCall) and expr.op in _INFIX else text


def _names(names: tuple[str, ...]) -> str:
    return "[" + ",".join(names) + "]"


def _print_scan(node: Scan, ref: Callable) -> str:
    return f"scan {node.tensor}{_names(node.indices)}"


def _print_join(node: Join, ref: Callable) -> str:
    args = ", ".join(ref(child) for child in node.inputs)
    text = f"join({args}) on {_names(node.on)}"
    if node.path is None:
        return text
    steps = ", ".join("(" + ",".join(str(p) for p in step) + ")" for step in node.path)
    return f"{text} path [{steps or 'one einsum loop'}]"


def _print_map(node: Map, ref: Callable) -> str:
    return f"map({ref(node.x)}, {format_expr(node.fn)})"


def _print_reduce(node: ReduceByKey, ref: Callable) -> str:
    return f"reduce_by_key({node.monoid}, {ref(node.x)})"


def _print_merge(node: Merge, ref: Callable) -> str:
    return f"merge({node.monoid}, {ref(node.old)}, {ref(node.new)})"


PRINT_RULES: dict[type, Callable] = {
    Scan: _print_scan,
    Join: _print_join,
    Map: _print_map,
    ReduceByKey: _print_reduce,
    Merge: _print_merge,
}


def format_program(program: Function) -> str:
    """The program as text: inputs, sizes, then one ``%n = op ... -> [key]`` line per node."""
    lines = [f"program dtype={program.dtype}"]
    for decl in program.inputs:
        shape = ",".join(str(d) for d in decl.shape)
        levels = "" if decl.sparse is None else f" sparse({','.join(decl.sparse)})"
        lines.append(f"  input {decl.name} : {decl.dtype}[{shape}]{levels}")
    sizes = " ".join(f"{name}={size}" for name, size in program.sizes)
    lines.append(f"  sizes {sizes}" if sizes else "  sizes (none)")
    numbering: dict[object, str] = {}

    def ref(node: object) -> str:
        return numbering[node]

    for node in _post_order(program.output):
        name = f"%{len(numbering)}"
        text = PRINT_RULES[type(node)](node, ref)
        lines.append(f"  {name} = {text} -> {_names(key_of(node))}")
        numbering[node] = name
    lines.append(f"  return {numbering[program.output]}")
    return "\n".join(lines)
