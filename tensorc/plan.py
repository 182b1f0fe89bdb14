"""Plans: everything decided before data is touched, cached by what decides it.

A :class:`Plan` holds the element IR after each pass, the chosen blocking, the task graph and
its statistics. ``build_plan`` is pure (shapes, dtypes and options in; plan out) and
:class:`PlanCache` memoises it by ``(subscripts, shapes, dtypes, layouts, options)`` so a
repeated call pays a dictionary lookup for planning.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from tensorc import debug
from tensorc.codegen.lower import lower
from tensorc.codegen.taskgraph import TaskGraph
from tensorc.frontend.einsum import einsum_program
from tensorc.frontend.subscripts import EinsumSpec
from tensorc.ir.nodes import Program
from tensorc.passes.base import PassContext
from tensorc.passes.blocking import Blocking, choose_blocking
from tensorc.passes.pipeline import run_pipeline

PLAN_CACHE_SIZE = 256


@dataclass
class Plan:
    """A compiled contraction: IR after every pass, blocking, task graph, statistics."""

    subscripts: str
    spec: EinsumSpec | None
    program: Program
    stages: list[tuple[str, str]]
    notes: list[str]
    blocking: Blocking
    graph: TaskGraph
    stats: dict = field(default_factory=dict)

    def explain(self) -> str:
        """IR after each pass, the pass decisions, the blocking and the task counts."""
        title = f"einsum {self.subscripts!r}" if self.spec is not None else self.subscripts
        lines = [f"plan for {title}"]
        for name, text in self.stages:
            lines.append(f"== after {name} ==")
            lines.append(text)
        lines.append("== decisions ==")
        lines.extend(f"  {note}" for note in self.notes or ["(none)"])
        lines.append("== blocking ==")
        lines.append(f"  {self.blocking.describe()}")
        lines.append("== tasks ==")
        counts = self.graph.counts()
        lines.append(
            f"  {len(self.graph.tasks)} tasks: "
            + ", ".join(f"{kind} {count}" for kind, count in counts.items())
        )
        lines.append(
            f"  output blocks {len(self.graph.outputs)}, max width {self.stats['max_width']}"
        )
        lines.append(f"  flops {self.stats['flops']}")
        return "\n".join(lines)


def build_plan(
    subscripts: str,
    spec: EinsumSpec,
    shapes: tuple[tuple[int, ...], ...],
    dtypes: tuple[str, ...],
    compute_dtype: str,
    ctx: PassContext,
) -> Plan:
    """Run the pipeline, choose the blocking, lower to a task graph."""
    names = tuple(str(np.dtype(d)) for d in dtypes)
    program = einsum_program(spec, shapes, names, str(np.dtype(compute_dtype)))
    return plan_program(subscripts, program, ctx, spec)


def plan_program(
    name: str, program: Program, ctx: PassContext, spec: EinsumSpec | None = None
) -> Plan:
    """Plan any element-level IR ``program`` (an einsum's, or one ``.tc`` statement's):
    run the pipeline, choose the blocking, lower to a task graph. ``name`` titles
    ``explain()``; ``spec`` is the einsum's, or ``None`` for other front ends."""
    started = time.perf_counter()
    compute_dtype = program.dtype
    subscripts = name
    final, stages = run_pipeline(program, ctx)
    blocking = choose_blocking(final, ctx)
    graph = lower(final, blocking, ctx.optimize, ctx.paths)
    graph.verify()
    stats = {
        **graph.summary(),
        "plan_seconds": time.perf_counter() - started,
        "blocking": blocking.describe(),
        "dtype": str(np.dtype(compute_dtype)),
        "inter_node_bytes": 0,
        "max_node_memory_bytes": None,
        "lower_bound_bytes": 0,
    }
    plan = Plan(subscripts, spec, final, stages, list(ctx.notes), blocking, graph, stats)
    debug.log(1, f"planned {subscripts!r}: {stats['tasks']} tasks, "
                 f"{stats['plan_seconds'] * 1e3:.2f} ms, blocking {stats['blocking']}")
    debug.dump(f"plan-{graph.name}.txt", plan.explain())
    return plan


class PlanCache:
    """A small LRU of plans keyed by everything that decides them."""

    def __init__(self, size: int = PLAN_CACHE_SIZE) -> None:
        self.size = size
        self._plans: OrderedDict[tuple, Plan] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple) -> Plan | None:
        plan = self._plans.get(key)
        if plan is not None:
            self._plans.move_to_end(key)
            self.hits += 1
        else:
            self.misses += 1
        return plan

    def put(self, key: tuple, plan: Plan) -> None:
        self._plans[key] = plan
        if len(self._plans) > self.size:
            self._plans.popitem(last=False)

    def clear(self) -> None:
        self._plans.clear()
