"""A bottom-up rewrite driver shared by the passes.

``rewrite(root, rule)`` rebuilds ``root`` children first and offers each rebuilt node to
``rule``, which returns a replacement or ``None`` to keep it. A rule's replacement is offered
to the rule again until it stops changing (a fixpoint per node), with a guard against rules
that never settle. Shared subtrees are rewritten once.
"""

from __future__ import annotations

from collections.abc import Callable

from tensorc.errors import IRVerificationError
from tensorc.ir.nodes import Join, Map, Merge, Node, ReduceByKey, Scan, children

Rule = Callable[[Node], "Node | None"]
MAX_REWRITES_PER_NODE = 64


def with_children(node: Node, new_children: tuple[Node, ...]) -> Node:
    """``node`` rebuilt over ``new_children`` (same order as ``children(node)``)."""
    if isinstance(node, Scan):
        return node
    if isinstance(node, Join):
        return Join(new_children, node.on, node.path)
    if isinstance(node, Map):
        return Map(node.fn, new_children[0], node.key)
    if isinstance(node, ReduceByKey):
        return ReduceByKey(node.monoid, new_children[0], node.key)
    if isinstance(node, Merge):
        return Merge(new_children[0], new_children[1], node.monoid)
    raise TypeError(f"not an IR node: {node!r}")


def rewrite(root: Node, rule: Rule) -> Node:
    """Apply ``rule`` bottom-up to every node of ``root`` until each node is a fixpoint."""
    memo: dict[Node, Node] = {}

    def visit(node: Node) -> Node:
        if node in memo:
            return memo[node]
        rebuilt_children = tuple(visit(child) for child in children(node))
        current = with_children(node, rebuilt_children)
        for _ in range(MAX_REWRITES_PER_NODE):
            replacement = rule(current)
            if replacement is None or replacement == current:
                break
            current = visit(replacement) if replacement not in memo else memo[replacement]
        else:
            raise IRVerificationError(f"rewrite rule did not settle on {node!r}")
        memo[node] = current
        return current

    return visit(root)
