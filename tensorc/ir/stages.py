"""Stages: the units codegen and the cost model both reason about.

A stage is a ``ReduceByKey`` or ``Map`` root together with the ``Map`` and ``Join`` it
consumes: ``ReduceByKey(m, Map(fn, Join(inputs)), key)`` is one stage with ``inputs``, map
``fn``, output ``key`` and monoid ``m``. Every stage becomes one set of block tasks (one per
tuple of block coordinates over the stage's indices, plus reductions of partial blocks).
"""

from __future__ import annotations

from tensorc.ir.nodes import Arg, Expr, Join, Map, Node, ReduceByKey, post_order


def stage_parts(node: Node) -> tuple[list[Node], Expr, tuple[str, ...], str | None]:
    """Decompose a stage root into ``(input nodes, map fn, output key, monoid or None)``."""
    monoid = None
    output = node.key
    inner = node
    if isinstance(inner, ReduceByKey):
        monoid = inner.monoid
        inner = inner.x
    fn: Expr = Arg(0)
    if isinstance(inner, Map):
        fn = inner.fn
        inner = inner.x
    inputs = list(inner.inputs) if isinstance(inner, Join) else [inner]
    return inputs, fn, output, monoid


def stage_join(node: Node) -> Join | None:
    """The join a stage root consumes (through its map), if any."""
    inner = node.x if isinstance(node, ReduceByKey) else node
    if isinstance(inner, Map):
        inner = inner.x
    return inner if isinstance(inner, Join) else None


def folded_maps(root: Node) -> set[Node]:
    """Maps that belong to the ``ReduceByKey`` stage above them (not stages of their own)."""
    return {
        node.x
        for node in post_order(root)
        if isinstance(node, ReduceByKey) and isinstance(node.x, Map)
    }


def stage_roots(root: Node) -> list[Node]:
    """Every stage root under ``root``, children first."""
    folded = folded_maps(root)
    return [
        node
        for node in post_order(root)
        if isinstance(node, ReduceByKey) or (isinstance(node, Map) and node not in folded)
    ]
