"""The cost model as the passes see it: :class:`CostModelPricing` and :func:`planning_context`.

Contract: passes rewrite IR and price nothing themselves; a pass that chooses between
rewrites by cost asks ``ctx.pricing`` (:class:`~tensorc.passes.base.ContractionPricing`).
:class:`CostModelPricing` answers with this package's local cost model (the blocking
:func:`~tensorc.planning.blocking.choose_blocking` would choose, the path
:func:`~tensorc.planning.paths.choose_path` picks, stage times from
:mod:`tensorc.planning.plan_cost`). :func:`planning_context` is a fresh pass context carrying
it, what every planner entry point (and a test running the pipeline) starts from.
"""

from __future__ import annotations

from typing import Any

from tensorc.ir.contraction import path_steps
from tensorc.ir.nodes import Function
from tensorc.passes.base import PassContext, PassOptions, Path
from tensorc.planning.blocking import choose_blocking
from tensorc.planning.paths import choose_path
from tensorc.planning.plan_cost import block_extents, stage_seconds


class CostModelPricing:
    """:class:`~tensorc.passes.base.ContractionPricing` by the local cost model."""

    def block_counts(self, program: Function, ctx: PassContext) -> dict[str, int]:
        return choose_blocking(program, ctx).counts()

    def choose_path(self, keys, output, sizes: dict[str, int], itemsize: int,
                    optimize: Any) -> Path | None:
        return choose_path(keys, output, sizes, itemsize, optimize)

    def fused_seconds(self, keys, output, path: Path, sizes: dict[str, int],
                      counts: dict[str, int], itemsize: int, workers: int) -> float:
        return stage_seconds(keys, output, path, sizes, counts, itemsize, workers)

    def pairwise_seconds(self, keys, output, path: Path, sizes: dict[str, int],
                         counts: dict[str, int], itemsize: int, workers: int) -> float:
        blocks = block_extents(sizes, counts)
        return sum(
            stage_seconds(step_inputs, step_output, [tuple(range(len(step_inputs)))], sizes,
                          counts, itemsize, workers)
            for step_inputs, step_output in path_steps(keys, output, path, blocks)
        )


PRICING = CostModelPricing()


def planning_context(options: PassOptions | None = None, **given: Any) -> PassContext:
    """A fresh pass context priced by the cost model: ``options``, or ``PassOptions(**given)``."""
    return PassContext(options if options is not None else PassOptions(**given), pricing=PRICING)
