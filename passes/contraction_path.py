"""contraction-path: a fused multi-way join, or pairwise stages along a path — by cost.

For ``ReduceByKey(+, Map(#0 * … * #n, Join(inputs)), key)`` with three or more inputs the
pass picks a contraction order (:func:`tensorc.passes.paths.choose_path`, honouring
``optimize=``) and then decides, with :mod:`tensorc.passes.cost` under the blocking the
partition pass is expected to choose, between

- **fused**: keep one n-way join; each block tuple runs the whole contraction in one kernel
  (the chosen path runs inside the block), so no intermediate ever crosses tasks; and
- **pairwise**: rewrite into nested two-way joins along the path, one stage of block tasks
  per step, which wins when the intermediate is reused by many block tuples (long chains
  over many blocks).

Invariant after: every product join is either two-way or chosen fused on purpose; the choice
and both costs are in the pass notes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from tensorc.ir.keys import join_of, key_of
from tensorc.ir.nodes import Join, Map, Node, Program, ReduceByKey, is_product_of_args, mul_of_args
from tensorc.ir.rewrite import rewrite
from tensorc.passes.base import PassContext
from tensorc.passes.blocking import choose_blocking
from tensorc.passes.cost import path_operands, path_steps
from tensorc.passes.paths import Path, choose_path
from tensorc.passes.plan_cost import block_extents, stage_seconds


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


def pairwise_seconds(keys, output, path, sizes, counts, itemsize, workers) -> float:
    """One stage per step of the path, intermediates materialised between them."""
    blocks = block_extents(sizes, counts)
    return sum(
        stage_seconds(step_inputs, step_output, [tuple(range(len(step_inputs)))], sizes,
                      counts, itemsize, workers)
        for step_inputs, step_output in path_steps(keys, output, path, blocks)
    )


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
            join = join_of(taken)
            node = ReduceByKey("+", Map(mul_of_args(len(taken)), join, key_of(join)), step_output)
        values.append(node)
    return values[-1]


@dataclass(frozen=True)
class ContractionPathPass:
    name: ClassVar[str] = "contraction-path"

    def run(self, program: Program, ctx: PassContext) -> Program:
        sizes = program.size_of
        itemsize = np.dtype(program.dtype).itemsize
        counts = choose_blocking(program, ctx).counts()

        def rule(node: Node) -> Node | None:
            match = product_join(node)
            if match is None or len(match[0].inputs) < 3:
                return None
            join, output = match
            keys = [key_of(child) for child in join.inputs]
            path = choose_path(keys, output, sizes, itemsize, ctx.optimize)
            if path is None:
                ctx.paths[join] = None
                ctx.note(self.name, "optimize=False: one fused join, numpy's single einsum loop")
                return None
            # fused: one stage, every block tuple runs the whole path
            fused = stage_seconds(keys, output, path, sizes, counts, itemsize, ctx.workers)
            pairwise = pairwise_seconds(keys, output, path, sizes, counts, itemsize, ctx.workers)
            verdict = "fused join" if fused <= pairwise else "pairwise stages"
            ctx.note(
                self.name,
                f"path {path}: fused {fused * 1e3:.3f} ms vs pairwise {pairwise * 1e3:.3f} ms "
                f"(modelled) -> {verdict}",
            )
            if fused <= pairwise:
                ctx.paths[join] = path
                return None
            return build_pairwise(join.inputs, output, path, sizes)

        return program.with_output(rewrite(program.output, rule))
