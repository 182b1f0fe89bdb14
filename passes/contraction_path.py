"""contraction-path: a fused multi-way join, or pairwise stages along a path — by cost.

For ``ReduceByKey(+, Map(#0 * … * #n, Join(inputs)), key)`` with three or more inputs the
pass asks the context's pricing model (``ctx.pricing``, a
:class:`~tensorc.passes.base.ContractionPricing` the planner supplies: passes price nothing
themselves) for a contraction order, honouring ``optimize=``, and then decides, under the
blocking the planner is expected to choose, between

- **fused**: keep one n-way join; each block tuple runs the whole contraction in one kernel
  (the chosen path runs inside the block), so no intermediate ever crosses tasks; and
- **pairwise**: rewrite into nested two-way joins along the path, one stage of block tasks
  per step, which wins when the intermediate is reused by many block tuples (long chains
  over many blocks).

Every product join the pass leaves (fused, a pairwise step, a two-way join, or a product
map with nothing summed) carries its contraction order in the IR (``Join.path``; ``()`` for
``optimize=False``, numpy's single einsum loop), so the printed IR shows what codegen runs.

Invariant after: every product join is either two-way or chosen fused on purpose, and
every product stage's join has a path; the choice and both costs are in the pass notes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from tensorc.ir.contraction import path_operands, path_steps
from tensorc.ir.keys import join_of, key_of
from tensorc.ir.nodes import Function, Join, Map, Node, ReduceByKey, is_product_of_args, mul_of_args
from tensorc.ir.rewrite import rewrite
from tensorc.ir.stages import stage_join, stage_parts, stage_roots
from tensorc.passes.base import PassContext, Path


def product_join(node: Node) -> tuple[Join, tuple[str, ...]] | None:
    """``(join, key)`` when ``node`` is ``ReduceByKey(+, Map(product, Join))``."""
    if not isinstance(node, ReduceByKey) or node.monoid != "+":
        return None
    mapped = node.x
    if not isinstance(mapped, Map) or not isinstance(mapped.x, Join):
        return None
    if not is_product_of_args(mapped.fn, len(mapped.x.inputs)):
        return None
    return mapped.x, node.key


def product_stage_joins(root: Node) -> set[Join]:
    """Joins of stages that multiply their inputs and sum (or keep) the result: the stages
    whose block kernel runs a contraction path."""
    joins = set()
    for node in stage_roots(root):
        inputs, fn, _, monoid = stage_parts(node)
        join = stage_join(node)
        if join is not None and monoid in ("+", None) and is_product_of_args(fn, len(inputs)):
            joins.add(join)
    return joins


def with_path(join: Join, path: Path | None) -> Join:
    """``join`` carrying ``path`` (``None``, numpy's single loop, becomes ``()``)."""
    steps = () if path is None else tuple(tuple(step) for step in path)
    return Join(join.inputs, join.on, steps)


def build_pairwise(
    inputs: tuple[Node, ...], output: tuple[str, ...], path: Path, sizes: dict[str, int]
) -> Node:
    """Nested two-way product joins along ``path``; the last step is keyed by ``output``."""
    keys = [key_of(n) for n in inputs]
    values: list[Node] = list(inputs)
    steps = path_steps(keys, output, path, sizes)
    for (_, step_output), operands in zip(steps, path_operands(len(inputs), path), strict=True):
        taken = [values[k] for k in operands]
        if len(taken) == 1:
            node: Node = ReduceByKey("+", taken[0], step_output)
        else:
            join = with_path(join_of(taken), [(0, 1)] if len(taken) == 2 else None)
            node = ReduceByKey("+", Map(mul_of_args(len(taken)), join, key_of(join)), step_output)
        values.append(node)
    return values[-1]


@dataclass(frozen=True)
class ContractionPathPass:
    name: ClassVar[str] = "contraction-path"

    def run(self, program: Function, ctx: PassContext) -> Function:
        sizes = program.size_of
        itemsize = np.dtype(program.dtype).itemsize
        pricing = ctx.require_pricing(self.name)
        counts = pricing.block_counts(program, ctx)

        def rule(node: Node) -> Node | None:
            match = product_join(node)
            if match is None or len(match[0].inputs) < 3:
                return None
            join, output = match
            if join.path is not None:
                return None  # decided (the rewrite offers each replacement again)
            keys = [key_of(child) for child in join.inputs]
            path = pricing.choose_path(keys, output, sizes, itemsize, ctx.options.optimize)
            if path is None:
                ctx.note(self.name, "optimize=False: one fused join, numpy's single einsum loop")
                return ReduceByKey(node.monoid, Map(node.x.fn, with_path(join, None),
                                                    node.x.key), node.key)
            # fused: one stage, every block tuple runs the whole path
            workers = ctx.options.workers
            fused = pricing.fused_seconds(keys, output, path, sizes, counts, itemsize, workers)
            pairwise = pricing.pairwise_seconds(keys, output, path, sizes, counts, itemsize,
                                                workers)
            verdict = "fused join" if fused <= pairwise else "pairwise stages"
            ctx.note(
                self.name,
                f"path {path}: fused {fused * 1e3:.3f} ms vs pairwise {pairwise * 1e3:.3f} ms "
                f"(modelled) -> {verdict}",
            )
            if fused <= pairwise:
                return ReduceByKey(node.monoid, Map(node.x.fn, with_path(join, path),
                                                    node.x.key), node.key)
            return build_pairwise(join.inputs, output, path, sizes)

        chosen = rewrite(program.output, rule)
        undecided = {j for j in product_stage_joins(chosen) if j.path is None}

        def annotate(node: Node) -> Node | None:
            if not isinstance(node, Join) or node not in undecided:
                return None
            keys = [key_of(child) for child in node.inputs]
            if len(keys) == 2:
                path = None if ctx.options.optimize is False else [(0, 1)]
            else:  # a product with nothing summed: the order still matters for its cost
                path = pricing.choose_path(keys, key_of(node), sizes, itemsize,
                                           ctx.options.optimize)
            return with_path(node, path)

        return program.with_output(rewrite(chosen, annotate))
