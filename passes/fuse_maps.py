"""fuse-maps: a map of a map is one map.

``Map(f, Map(g, x, k1), k2)`` becomes ``Map(f[#0 := g], x, k2)`` when ``f`` reads a single
value (its input is not a join). Invariant after: no map consumes another map directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tensorc.ir.nodes import Arg, Const, Expr, Function, Map, Node, OpCall
from tensorc.ir.rewrite import rewrite
from tensorc.passes.base import PassContext


def substitute(expr: Expr, replacement: Expr) -> Expr:
    """``expr`` with every ``#0`` replaced by ``replacement``."""
    if isinstance(expr, Arg):
        return replacement if expr.position == 0 else expr
    if isinstance(expr, Const):
        return expr
    if isinstance(expr, OpCall):
        return OpCall(expr.op, tuple(substitute(a, replacement) for a in expr.args))
    raise TypeError(f"not an expression: {expr!r}")


def _fuse(node: Node) -> Node | None:
    if isinstance(node, Map) and isinstance(node.x, Map):
        inner = node.x
        return Map(substitute(node.fn, inner.fn), inner.x, node.key)
    return None


@dataclass(frozen=True)
class FuseMaps:
    name: ClassVar[str] = "fuse-maps"

    def run(self, program: Function, ctx: PassContext) -> Function:
        return program.with_output(rewrite(program.output, _fuse))
