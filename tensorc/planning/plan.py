"""Plans: everything decided before data is touched, cached by what decides it.

A :class:`Plan` holds the element IR after each pass, the chosen blocking, the task graph and
its statistics. ``build_plan`` is pure (shapes, dtypes and options in; plan out) and
:class:`PlanCache` memoises it by ``(subscripts, shapes, dtypes, orders, options)`` so a
repeated call pays a dictionary lookup for planning.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from tensorc import debug
from tensorc.codegen.blocking import Blocking
from tensorc.codegen.lower import lower_to_tasks
from tensorc.codegen.taskgraph import TaskGraph
from tensorc.frontend.einsum import einsum_program
from tensorc.frontend.subscripts import EinsumSpec
from tensorc.ir.keys import key_of
from tensorc.ir.nodes import Function
from tensorc.ir.printer import format_program
from tensorc.passes.base import PassContext
from tensorc.passes.pipeline import run_pipeline
from tensorc.planning.blocking import choose_blocking, scan_indices
from tensorc.planning.cost import machine
from tensorc.planning.distribution import BLOCK_MEMORY_SHARE, DEFAULT_NODE_MEMORY, Problem
from tensorc.planning.memory_fit import (
    STREAM_BLOCK_BYTES,
    MemoryModel,
    chunk_alignment,
    fit_blocking,
)
from tensorc.planning.options import PLAN_OPTIONS, freeze, pass_options
from tensorc.planning.plan_cost import subtree_seconds
from tensorc.planning.planners import search
from tensorc.planning.pricing import planning_context
from tensorc.planning.search import DistributedPlan

PLAN_CACHE_SIZE = 256


@dataclass
class Plan:
    """A compiled contraction: IR after every pass, blocking, task graph, statistics."""

    subscripts: str
    spec: EinsumSpec | None
    program: Function
    stages: list[tuple[str, Function]]
    """The IR after each pass, printed by :meth:`explain`."""
    notes: list[str]
    blocking: Blocking
    graph: TaskGraph
    stats: dict = field(default_factory=dict)
    distribution: DistributedPlan | None = None
    """The distributed plan (nodes > 1): grid, modelled schedule, bound, search outcome."""
    problem: Problem | None = None
    memory: MemoryModel | None = None
    """The modelled memory of a local run against its budget (``memory_limit``)."""
    memory_source: str = ""
    """Where the budget came from (a call's ``memory_limit=``, ``tc.init``, the default)."""
    runs: OrderedDict = field(default_factory=OrderedDict, repr=False, compare=False)
    """What the runtime derived from this plan per input layout it met (a schedule and its
    staged calls): plans are immutable, so a repeated call reuses them."""

    def explain(self) -> str:
        """IR after each pass, the pass decisions, the blocking and the task counts."""
        title = f"einsum {self.subscripts!r}" if self.spec is not None else self.subscripts
        lines = [f"plan for {title}"]
        for name, program in self.stages:
            lines.append(f"== after {name} ==")
            lines.append(format_program(program))
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
        if self.memory is not None:
            lines.append("== memory ==")
            lines.append(f"  {self.memory.describe()}")
            if self.memory_source:
                lines.append(f"  budget from {self.memory_source}")
        if self.distribution is not None:
            lines.append("== distribution ==")
            lines.extend(f"  {line}" for line in describe_distribution(self.distribution))
        return "\n".join(lines)


def describe_distribution(dist: DistributedPlan) -> list[str]:
    """The grid, the modelled loads per node, the lower bound and the ratio."""
    report = dist.modelled.report
    placed = dist.modelled.schedule
    proof = {True: "proved optimal under the model", False: "not proved optimal",
             None: "no optimality claim"}[dist.optimal]
    lines = [
        f"planner {dist.planner}: {proof}; {dist.evaluated} candidate(s) modelled in "
        f"{dist.seconds * 1e3:.1f} ms",
        f"{dist.candidate.describe()}",
        *([f"{dist.modelled.scatter.describe()}: the output's blocks are cut that finer"]
          if dist.modelled.scatter is not None else []),
        f"modelled cost {report.cost * 1e3:.3f} ms; {report.tasks} compute tasks; "
        f"inter-node {report.inter_node_bytes} B",
    ]
    for node in range(placed.nodes):
        lines.append(
            f"node {node}: recv {report.node_recv_bytes[node]} B, "
            f"send {placed.net_out_bytes[node]} B, "
            f"peak memory {report.node_memory_bytes[node]} B, tasks {report.node_tasks[node]}"
        )
    ratio = dist.ratio
    lines.append(
        f"busiest node receives {report.max_node_recv_bytes} B; lower bound "
        f"{dist.lower_bound_bytes} B; ratio "
        + (f"{ratio:.3f}" if ratio is not None else "n/a (bound 0, nothing received)")
    )
    trade = placed.trade_note()
    lines.append(trade or "LSHS placed every task on an option copying the fewest bytes")
    lines.extend(dist.notes)
    return lines


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
    name: str, program: Function, ctx: PassContext, spec: EinsumSpec | None = None
) -> Plan:
    """Plan any element-level IR ``program`` (an einsum's, or one ``.tc`` statement's):
    run the pipeline, choose the blocking, lower to a task graph. ``name`` titles
    ``explain()``; ``spec`` is the einsum's, or ``None`` for other front ends."""
    started = time.perf_counter()
    compute_dtype = program.dtype
    subscripts = name
    final, stages = run_pipeline(program, ctx)
    distribution = problem = memory = None
    if ctx.options.nodes > 1:
        problem, distribution = plan_distribution(subscripts, final, ctx)
        counts = distribution.candidate.counts
        blocking = Blocking(
            sizes=tuple(sorted(final.size_of.items())),
            block=tuple(
                (i, (problem.placed_blocks or {}).get(i)
                 or max(1, math.ceil(final.size_of[i] / c)))
                for i, c in counts
            ),
        )
        graph = distribution.modelled.graph
    else:
        forced = ctx.options.grid is not None or ctx.options.block_shape is not None
        what = f"einsum {subscripts!r}" if spec is not None else f"statement {subscripts!r}"
        blocking, graph, memory = fit_blocking(
            final, choose_blocking(final, ctx), budget=ctx.options.memory_limit,
            stored=ctx.options.stored, workers=ctx.options.workers, what=what,
            lower=lower_to_tasks, refine=not forced, sink_chunks=ctx.options.sink_chunks)
    graph.verify()
    stats = {
        **graph.summary(),
        "plan_seconds": time.perf_counter() - started,
        "blocking": blocking.describe(),
        "dtype": str(np.dtype(compute_dtype)),
        **_distribution_stats(final, blocking, ctx, distribution),
    }
    if memory is not None:
        stats["memory_limit_bytes"] = memory.budget
        stats["modelled_peak_bytes"] = memory.peak
    plan = Plan(subscripts, spec, final, stages, list(ctx.notes), blocking, graph, stats,
                distribution, problem, memory, ctx.options.memory_source)
    debug.log(1, f"planned {subscripts!r}: {stats['tasks']} tasks, "
                 f"{stats['plan_seconds'] * 1e3:.2f} ms, blocking {stats['blocking']}")
    debug.dump(f"plan-{graph.name}.txt", plan.explain)
    return plan


def plan_distribution(
    name: str, final: Function, ctx: PassContext
) -> tuple[Problem, DistributedPlan]:
    """Search a distribution of ``final`` over ``ctx.options.nodes`` nodes. A forced blocking
    (``grid=``/``block_shape=``) fixes the block counts; the search then picks the grid.
    Operands already on the cluster (``ctx.options.placed``) are weighed both ways: computed in
    their layout, and repartitioned to the plan's; the cheaper plan under the model wins.
    Inputs read from storage (``ctx.options.stored``) fix the block size of their indices
    (:func:`stored_blocks`) unless the blocking is forced."""
    fixed_counts = fixed_blocks = None
    if ctx.options.grid is not None or ctx.options.block_shape is not None:
        forced = choose_blocking(final, ctx)
        fixed_counts = forced.counts()
        fixed_blocks = dict(forced.block)
    memory = ctx.options.node_memory or DEFAULT_NODE_MEMORY
    streamed = ({} if fixed_counts is not None
                else stored_blocks(final, ctx.options.stored, ctx.options.nodes,
                                   memory // BLOCK_MEMORY_SHARE))
    whole = read_once(final, ctx.options.stored, streamed, memory // BLOCK_MEMORY_SHARE)
    if whole:
        ctx.note("distribution", f"index(es) {', '.join(sorted(whole))} kept whole beside the "
                                 "stored input: each block read is used by one task")
        streamed = {**streamed, **whole}

    def attempt(repartition: frozenset[int]) -> tuple[Problem, DistributedPlan]:
        counts, blocks = dict(fixed_counts or {}), dict(fixed_blocks or {})
        for index, size in streamed.items():
            blocks[index] = size
            counts[index] = max(1, math.ceil(final.size_of[index] / size))
        if ctx.options.placed and fixed_counts is None:
            for position, source in ctx.options.placed.items():
                if position in repartition:
                    continue
                dims = scan_indices(final).get(final.inputs[position].name, ())
                for index, size in source.block_sizes(dims).items():
                    if index not in blocks:
                        blocks[index] = size
                        counts[index] = max(1, math.ceil(final.size_of[index] / size))
        problem = Problem(
            name, final, ctx.options.nodes, memory_bytes=memory,
            placed=ctx.options.placed, placed_counts=counts or None, placed_blocks=blocks or None,
            repartition=repartition,
        )
        found = search(problem, ctx.options.planner)
        return found.problem, found  # the problem's copy when a few nodes stay idle

    problem, best = attempt(frozenset())
    if ctx.options.placed:
        moved_problem, moved = attempt(frozenset(ctx.options.placed))
        kept, other = best.modelled.report.cost, moved.modelled.report.cost
        if other < kept:
            ctx.note("distribution", f"repartition operand(s) {sorted(ctx.options.placed)}: "
                                     "modelled "
                                     f"{other * 1e3:.3f} ms against {kept * 1e3:.3f} ms in "
                                     "their layout")
            problem, best = moved_problem, moved
        else:
            ctx.note("distribution", f"compute in the layout of operand(s) "
                                     f"{sorted(ctx.options.placed)}: modelled {kept * 1e3:.3f} ms "
                                     f"against {other * 1e3:.3f} ms repartitioned")
    ctx.note("distribution", f"{best.planner}: {best.candidate.describe()}")
    return problem, best


STORED_BLOCKS_PER_NODE = 4
"""Chunks of an input read from storage are merged into larger blocks only while every
node keeps at least this many blocks to read."""


def stored_blocks(final: Function, stored: dict[str, tuple[int, ...]],
                  nodes: int, largest_block: int = STREAM_BLOCK_BYTES) -> dict[str, int]:
    """Block size per index of the inputs read from storage, in a plan over ``nodes``
    nodes: whole chunks (a block never splits a chunk, so none is read twice; the largest
    chunk where inputs share an index), merged by doubling the index with the most blocks
    while a block of the largest such input stays within ``STREAM_BLOCK_BYTES`` and
    ``largest_block`` (the share of a node's budget one block may take) and every node
    keeps :data:`STORED_BLOCKS_PER_NODE` blocks of it to read."""
    align = chunk_alignment(final, stored)
    largest = max((d for d in final.inputs if d.name in stored),
                  key=lambda d: math.prod(d.shape), default=None)
    if not align or largest is None:
        return {}
    sizes = final.size_of
    block = {index: min(max(sizes[index], 1), step) for index, step in align.items()}
    dims = [i for i in scan_indices(final).get(largest.name, ()) if i in block]
    itemsize = np.dtype(final.dtype).itemsize

    def count(index: str) -> int:
        return max(1, math.ceil(sizes[index] / block[index]))

    while True:
        nbytes = math.prod(block[i] for i in dims) * itemsize
        options = [(count(i), position, i) for position, i in enumerate(dims) if count(i) > 1]
        total = math.prod(count(i) for i in dict.fromkeys(dims))
        if (not options or 2 * nbytes > min(STREAM_BLOCK_BYTES, largest_block)
                or total // 2 < STORED_BLOCKS_PER_NODE * nodes):
            return block
        index = max(options)[2]
        block[index] = min(sizes[index], 2 * block[index])


def read_once(final: Function, stored: dict[str, tuple[int, ...]], streamed: dict[str, int],
              largest_block: int) -> dict[str, int]:
    """The indices no stored input has, each as one whole block, when every array's block
    still fits ``largest_block`` with them whole (and the stored indices blocked as
    ``streamed``); ``{}`` otherwise. Then each block read from storage is used by one task,
    at the full width of the other operands: a double contraction ``ijk,jkf->if`` over a
    2 GB store on 4 nodes, its ``f = 32`` cut in 4 blocks, ran four products of a quarter
    width per stored block (745 tasks instead of 280) in 2.9-3.1 s against 1.6-1.9 s whole.
    The model prices those products' flops alike, so it cannot tell; a local plan never cuts
    them."""
    if not streamed:
        return {}
    scans = scan_indices(final)
    stored_dims = {i for name in stored for i in scans.get(name, ())}
    sizes = final.size_of
    free = [i for i in sizes if i not in stored_dims and i not in streamed]
    if not free:
        return {}
    block = {**sizes, **streamed}
    itemsize = np.dtype(final.dtype).itemsize
    arrays = [*scans.values(), key_of(final.output)]
    if any(math.prod(block[i] for i in dims) * itemsize > largest_block for dims in arrays):
        return {}
    return {i: max(1, sizes[i]) for i in free}


def _distribution_stats(final: Function, blocking: Blocking, ctx: PassContext,
                        distribution: DistributedPlan | None) -> dict:
    if distribution is None:
        itemsize = np.dtype(final.dtype).itemsize
        seconds = subtree_seconds(final.output, final.size_of, blocking.counts(), itemsize,
                                  ctx.options.workers, ctx.options.optimize)
        return {
            "nodes": 1, "planner": ctx.options.planner, "optimal": None, "cost": seconds,
            "inter_node_bytes": 0, "max_node_recv_bytes": 0, "max_node_memory_bytes": None,
            "lower_bound_bytes": 0, "lower_bound_ratio": None, "reduce_scatter": None,
        }
    report = distribution.modelled.report
    return {
        "nodes": ctx.options.nodes,
        "planner": distribution.planner,
        "optimal": distribution.optimal,
        "cost": report.cost,
        "inter_node_bytes": report.inter_node_bytes,
        "max_node_recv_bytes": report.max_node_recv_bytes,
        "max_node_memory_bytes": report.max_node_memory_bytes,
        "node_recv_bytes": list(report.node_recv_bytes),
        "node_memory_bytes": list(report.node_memory_bytes),
        "lower_bound_bytes": distribution.lower_bound_bytes,
        "lower_bound_ratio": distribution.ratio,
        "grid": distribution.candidate.describe(),
        "reduce_scatter": (distribution.modelled.scatter.describe()
                           if distribution.modelled.scatter is not None else None),
        "planned_candidates": distribution.evaluated,
        "planner_seconds": distribution.seconds,
    }


def einsum_plan(
    subscripts: str,
    spec: EinsumSpec,
    shapes: tuple[tuple[int, ...], ...],
    dtypes: tuple[str, ...],
    orders: tuple[str, ...],
    compute_dtype: np.dtype,
    optimize: object,
    plan_options: dict,
    *,
    default_workers: int,
    placed: dict | None = None,
    stored: dict | None = None,
    memory_source: str = "",
) -> tuple[Plan, bool]:
    """The plan of an einsum (checked options), from :data:`EINSUM_PLANS` when it has one;
    returns ``(plan, cached)``. ``orders`` is each operand's memory order (``"C"``, ``"F"``,
    ``"other"``); ``placed`` maps operand positions to the
    :class:`~tensorc.placement.blocks.Blocks` layout of operands already on the cluster;
    ``stored`` maps input names (``in0``, ...) of operands read from storage to their chunk
    shapes; ``memory_source`` says where ``memory_limit`` came from (``explain()``)."""
    key = (
        subscripts,
        shapes,
        dtypes,
        orders,
        compute_dtype.str,
        freeze(optimize),
        tuple((k, freeze(plan_options.get(k))) for k in PLAN_OPTIONS),
        default_workers if not plan_options.get("workers") else None,
        None if not placed else tuple((p, s.key()) for p, s in sorted(placed.items())),
        machine() if plan_options.get("nodes", 1) and plan_options.get("nodes", 1) > 1 else None,
        None if not stored else tuple(sorted(stored.items())),
    )
    plan = EINSUM_PLANS.get(key)
    if plan is not None:
        return plan, True
    options = pass_options(
        plan_options, optimize, {f"in{k}": order for k, order in enumerate(orders)},
        default_workers=default_workers, placed=placed, stored=stored,
        memory_source=memory_source,
    )
    plan = build_plan(subscripts, spec, shapes, dtypes, compute_dtype.str,
                      planning_context(options))
    EINSUM_PLANS.put(key, plan)
    return plan, False


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

    def __len__(self) -> int:
        return len(self._plans)

    def put(self, key: tuple, plan: Plan) -> None:
        self._plans[key] = plan
        if len(self._plans) > self.size:
            self._plans.popitem(last=False)

    def clear(self) -> None:
        self._plans.clear()


EINSUM_PLANS = PlanCache()
"""The process-wide cache of einsum plans (``tc.clear_plan_cache`` empties it)."""
