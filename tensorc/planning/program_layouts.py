"""Whole-program planning: the layouts of a multi-statement program's tensors flow through it.

Contract: ``plan_program_layouts(statements, plan_statement, nodes)`` plans the statements
of one unrolled ``.tc`` program (SSA order) for ``nodes`` nodes and returns a
:class:`LayoutPlan`: each statement's :class:`~tensorc.planning.plan.Plan`, the layout each tensor
has when each statement reads it, and the decisions taken, in order.

- A tensor's *layouts* are coordinates only (:class:`~tensorc.placement.blocks.Blocks` layouts):
  a program input gets the layout of the first statement that reads it (the planner lays
  it out freely there); a statement's result has the layout its plan computes it in (the
  node the modelled schedule leaves each output block on).
- Every later statement that reads a tensor is planned against the layouts it already
  has (every replica is tried; the cheapest plan wins). The statement's planner weighs
  computing in that layout against re-laying the operand out its own way
  (:func:`tensorc.planning.plan.plan_distribution`). A re-layout is a **Repartition** when no later
  statement reads the tensor (the old layout is dropped) and a **replica** when one does
  (both layouts are kept, each later reader may use either; the replica's memory is the
  price, and it counts against the node budget of the statements that run while it lives).
  Spartan's ALS case — a matrix read along rows by one statement and along columns by the
  next — is one replica or one in-layout plan, whichever the model prices lower.
- Fills (constant statements) are made on their nodes and have no layout constraint.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tensorc.placement.blocks import Blocks
from tensorc.placement.layout import load_bounds, load_layout, output_block_coords
from tensorc.planning.plan import Plan

REPLICA_COMBINATIONS = 8  # layouts tried per statement when operands have replicas


@dataclass
class LayoutPlan:
    """The plans of a program's statements and the layout decisions between them."""

    nodes: int
    plans: dict[str, Plan] = field(default_factory=dict)
    reads: dict[str, dict[int, Blocks]] = field(default_factory=dict)
    """Statement label → operand position → the layout the plan reads it in."""
    decisions: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def cost(self) -> float:
        """Modelled seconds of every statement, one after another."""
        return sum(p.stats.get("cost") or 0.0 for p in self.plans.values())

    def describe(self) -> list[str]:
        lines = [
            f"whole-program plan on {self.nodes} nodes: {len(self.plans)} statement(s), "
            f"modelled {self.cost * 1e3:.3f} ms, planned in {self.seconds * 1e3:.1f} ms"
        ]
        lines.extend(f"  {d}" for d in self.decisions or ["(every tensor read in one layout)"])
        return lines


def output_layout(plan: Plan) -> Blocks:
    """The layout a plan leaves its result in: output block bounds and producing nodes."""
    graph = plan.graph
    bounds = []
    for d, n in enumerate(graph.output_shape):
        starts = sorted({slices[d].start for _, slices in graph.outputs})
        bounds.append(tuple(starts) + (n,) if n else (0, 0))
    node_of = plan.distribution.modelled.schedule.node_of
    nodes = {
        coords: node_of[task]
        for coords, (task, _) in zip(output_block_coords(graph), graph.outputs, strict=True)
    }
    return Blocks.layout(tuple(bounds), nodes)


def input_layout(plan: Plan, position: int, shape: Sequence[int]) -> Blocks:
    """The layout a plan gives an operand it lays out freely (its load blocks' nodes)."""
    bounds = load_bounds(plan.graph, position, shape)
    nodes = load_layout(plan.graph, plan.distribution.modelled.load_nodes, position)
    for coords in itertools.product(*(range(max(len(b) - 1, 1)) for b in bounds)):
        nodes.setdefault(coords, 0)  # blocks no load reads (off a diagonal): anywhere
    return Blocks.layout(bounds, nodes)


def _moved(plan: Plan) -> frozenset[int]:
    return plan.problem.repartition if plan.problem is not None else frozenset()


def _preferred(plan: Plan, best: Plan) -> bool:
    """Whether ``plan`` beats ``best``: cheaper under the model, or as cheap (within a
    relative 1e-9) with fewer operands re-laid out — so a statement reads a replica an
    earlier one made instead of making the same layout again."""
    cost, other = plan.stats["cost"], best.stats["cost"]
    if abs(cost - other) <= 1e-9 * max(abs(cost), abs(other)):
        return len(_moved(plan)) < len(_moved(best))
    return cost < other


def plan_program_layouts(
    statements: Sequence,
    plan_statement: Callable[[object, dict[int, Blocks] | None], Plan],
    nodes: int,
    initial: dict[str, Blocks] | None = None,
) -> LayoutPlan:
    """Plan ``statements`` (SSA order) with layouts flowing between them (module contract).

    ``plan_statement(statement, placed)`` plans one statement for ``nodes`` nodes given the
    layouts of its operands that already have one; ``initial`` gives the layouts of inputs
    that already live on the cluster.
    """
    started = time.perf_counter()
    result = LayoutPlan(nodes)
    layouts: dict[str, list[Blocks]] = {k: [v] for k, v in (initial or {}).items()}
    later_reads: dict[str, int] = {}
    for statement in statements:
        if statement.program is not None:
            for label in set(statement.operands):
                later_reads[label] = later_reads.get(label, 0) + 1
    for statement in statements:
        if statement.program is None:
            continue
        for label in set(statement.operands):
            later_reads[label] -= 1
        known = [
            (position, layouts[label])
            for position, label in enumerate(statement.operands) if label in layouts
        ]
        choices = list(itertools.islice(
            itertools.product(*(options for _, options in known)), REPLICA_COMBINATIONS
        ))
        best = None
        for combination in choices or [()]:
            placed = {position: source for (position, _), source in
                      zip(known, combination, strict=True)} or None
            plan = plan_statement(statement, placed)
            if best is None or _preferred(plan, best[0]):
                best = (plan, placed or {})
        plan, placed = best
        result.plans[statement.label] = plan
        moved = _moved(plan)
        reads = {}
        for position, label in enumerate(statement.operands):
            if position in placed and position not in moved:
                reads[position] = placed[position]
                continue
            source = input_layout(plan, position, plan.program.inputs[position].shape)
            reads[position] = source
            if label not in layouts:
                layouts[label] = [source]
            elif later_reads.get(label, 0) > 0:
                layouts[label].append(source)
                result.decisions.append(
                    f"{statement.label} reads {label} through a replica (a later statement "
                    "still reads the old layout)"
                )
            else:
                layouts[label] = [source]
                result.decisions.append(f"{statement.label} repartitions {label}")
        result.reads[statement.label] = reads
        layouts[statement.label] = [output_layout(plan)]
    result.seconds = time.perf_counter() - started
    return result
