"""reduce-pushdown: sum an index inside the one operand that holds it, before the join.

For ``ReduceByKey(+, Map(#0 * #1 * …, Join(inputs)), key)``, an index that occurs in exactly
one input and not in ``key`` is folded inside that input first:
``Join(X[i,j,k], …)`` becomes ``Join(ReduceByKey(+, X, [i,j]), …)``. This is what makes
``ijk,if,jf->if`` read ``X`` once at memory bandwidth instead of forming the 3-way product.

It applies to every (monoid, map) pair where the monoid distributes over the map's product:
``(+, mul)``. Invariant after: no input of a reduced product join holds a private index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tensorc.ir.keys import index_counts, key_of
from tensorc.ir.nodes import Function, Join, Map, Node, ReduceByKey, is_product_of_args
from tensorc.ir.rewrite import rewrite
from tensorc.passes.base import PassContext

DISTRIBUTES: frozenset[tuple[str, str]] = frozenset({("+", "mul")})


def _pushdown(node: Node) -> Node | None:
    if not isinstance(node, ReduceByKey) or not isinstance(node.x, Map):
        return None
    mapped = node.x
    join = mapped.x
    if not isinstance(join, Join) or (node.monoid, "mul") not in DISTRIBUTES:
        return None
    if not is_product_of_args(mapped.fn, len(join.inputs)):
        return None
    counts = index_counts(join.inputs)
    new_inputs = []
    changed = False
    for child in join.inputs:
        keep = tuple(n for n in key_of(child) if counts[n] > 1 or n in node.key)
        if keep != key_of(child):
            new_inputs.append(ReduceByKey(node.monoid, child, keep))
            changed = True
        else:
            new_inputs.append(child)
    if not changed:
        return None
    new_join = Join(tuple(new_inputs), join.on, join.path)
    new_map = Map(mapped.fn, new_join, key_of(new_join))
    return ReduceByKey(node.monoid, new_map, node.key)


@dataclass(frozen=True)
class ReducePushdown:
    name: ClassVar[str] = "reduce-pushdown"

    def run(self, program: Function, ctx: PassContext) -> Function:
        result = rewrite(program.output, _pushdown)
        if result != program.output:
            ctx.note(self.name, "summed private indices inside their operands before the join")
        return program.with_output(result)
