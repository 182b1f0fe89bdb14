"""canonicalize: put the IR in the one form later passes expect.

Rules (each local, applied bottom-up to a fixpoint):

- a ``Map`` of ``#0`` whose key equals its input's key is its input (identity map);
- a ``ReduceByKey`` whose key equals its input's key, in order, is its input (reduces nothing);
- ``ReduceByKey(m, ReduceByKey(m, x, k1), k2)`` is ``ReduceByKey(m, x, k2)`` (one fold);
- a ``Join`` lists its ``on`` names sorted.

Invariant after: no identity maps, no empty reductions, no stacked reductions of one monoid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tensorc.ir.keys import key_of
from tensorc.ir.nodes import Arg, Function, Join, Map, Node, ReduceByKey
from tensorc.ir.rewrite import rewrite
from tensorc.passes.base import PassContext


def _canonical(node: Node) -> Node | None:
    identity_map = isinstance(node, Map) and node.fn == Arg(0) and not isinstance(node.x, Join)
    if identity_map and node.key == key_of(node.x):
        return node.x
    if isinstance(node, ReduceByKey):
        if node.key == key_of(node.x):
            return node.x
        inner = node.x
        if isinstance(inner, ReduceByKey) and inner.monoid == node.monoid:
            return ReduceByKey(node.monoid, inner.x, node.key)
    if isinstance(node, Join):
        ordered = tuple(sorted(node.on))
        if ordered != node.on:
            return Join(node.inputs, ordered, node.path)
    return None


@dataclass(frozen=True)
class Canonicalize:
    name: ClassVar[str] = "canonicalize"

    def run(self, program: Function, ctx: PassContext) -> Function:
        return program.with_output(rewrite(program.output, _canonical))
