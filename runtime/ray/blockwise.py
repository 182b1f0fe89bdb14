"""Per-block operations as staged calls: one call per node, nothing moves.

Contract: :func:`blockwise_calls` takes an operand's layout (a
:class:`~tensorc.placement.blocks.Blocks`) and, for every result block, the operand block it
comes from and the kernel that makes it (``None``: the result block *is* that block), and
returns the :class:`~tensorc.runtime.ray.stages.StagedCalls` running each kernel on the node
holding its block — one call per node, every step exported. The Ray executor runs it like
any staged calls (merged into a batch with neighbouring statements, or on its own), so a
slice or an operation along an unsplit axis costs a step in a node's call, not a task of its
own. Plain data, no Ray.
"""

from __future__ import annotations

from collections.abc import Mapping

from tensorc.placement.blocks import Blocks
from tensorc.runtime.ray.stages import INPUT, RESULT, RUN, NodeCall, StagedCalls, Step

Coords = tuple[int, ...]


def blockwise_calls(layout: Blocks, pieces: Mapping[Coords, tuple[Coords, object]],
                      bounds: tuple[tuple[int, ...], ...], dtype) -> StagedCalls:
    """The staged calls of ``pieces`` (result coords → (operand coords, kernel or
    ``None``)) over ``layout``; the result has block ``bounds`` and ``dtype``."""
    by_node: dict[int, list[tuple[Coords, Coords, object]]] = {}
    outputs: dict[Coords, tuple] = {}
    nodes: dict[Coords, int] = {}
    for target, (source, kernel) in pieces.items():
        node = layout.nodes.get(source, 0)
        nodes[target] = node
        if kernel is None:
            outputs[target] = (INPUT, 0, source)
        else:
            by_node.setdefault(node, []).append((target, source, kernel))
    calls = []
    for node, work in sorted(by_node.items()):
        args = tuple(dict.fromkeys((INPUT, 0, source) for _, source, _ in work))
        position = {arg: i for i, arg in enumerate(args)}
        steps = tuple((Step(RUN, kernel), (("x", position[(INPUT, 0, source)]),))
                      for _, source, kernel in work)
        for k, (target, _, _) in enumerate(work):
            outputs[target] = (RESULT, len(calls), k)
        calls.append(NodeCall(node, 0, steps, args, tuple(range(len(work))), ()))
    return StagedCalls(
        calls=calls, outputs=outputs, output_bounds=bounds, output_nodes=nodes,
        output_shape=tuple(edges[-1] for edges in bounds), dtype=dtype, relaid={},
        relaid_layouts={}, transfers=[], levels=1 if calls else 0)
