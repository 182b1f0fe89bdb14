"""Planning SSA statement programs for the executor: the ``.tc`` programs and the lazy array
programs.

Contract: a :class:`StatementRunner` (plan options in :class:`Options`) plans an
:class:`~tensorc.frontend.tc_lower.Unrolled` program and hands it to an executor:

- :meth:`StatementRunner.plan` plans one statement (cached by its IR, blocking hints, node
  count and the layouts of operands already on the cluster);
- :meth:`StatementRunner.plan_layouts` plans the whole program for ``nodes`` nodes (layouts
  flow between statements; :mod:`tensorc.planning.program_layouts`), cached by the program's
  statements and the inputs' layouts;
- :meth:`StatementRunner.run` runs the statements with the executor it is given
  (:meth:`~tensorc.runtime.executor.Executor.run_statements`: in this process,
  :mod:`tensorc.runtime.statements`, or pipelined on Ray,
  :mod:`tensorc.runtime.ray.statements`), which asks this runner for plans as it goes.
  Returns ``(values by output label, per-statement stats)``; :attr:`node_calls` then holds
  the merged calls a Ray run submitted.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

from tensorc import session
from tensorc.frontend.tc_lower import Statement, Unrolled
from tensorc.passes.base import PassContext, PassOptions
from tensorc.planning.plan import Plan, PlanCache, plan_program
from tensorc.planning.pricing import planning_context
from tensorc.planning.program_layouts import LayoutPlan, plan_program_layouts
from tensorc.runtime.executor import Executor
from tensorc.runtime.task_pool import available_cores

LAYOUT_CACHE_SIZE = 64


@dataclass(frozen=True)
class Options:
    """Plan options of a statement program (see ``tc.compile``): block sizes by index name
    (``grid`` as blocks per index), worker threads, contraction-path optimisation, nodes
    and the distribution planner."""

    grid: tuple[tuple[str, int], ...] = ()
    block_shape: tuple[tuple[str, int], ...] = ()
    workers: int | None = None
    optimize: object = "auto"
    nodes: int | None = None
    planner: str = "auto"
    memory_limit: int | None = None
    """The budget of one worker in bytes (``None``: the session's)."""


class StatementRunner:
    """Plans (cached) and runs statement programs; see the module docstring."""

    def __init__(self, options: Options | None = None) -> None:
        self.options = options or Options()
        self.plans = PlanCache()
        self._layouts: OrderedDict[tuple, LayoutPlan] = OrderedDict()
        self.node_calls: int | None = None
        """Calls the last Ray run submitted when its statements' calls were merged
        (``None`` when each statement submitted its own)."""

    # -- planning ------------------------------------------------------------------------
    def _context(self, statement: Statement, nodes: int = 1, placed=None,
                 stored: dict | None = None, sink_chunks=None) -> PassContext:
        sizes = statement.program.size_of
        block = dict(statement.block)
        for name, count in self.options.grid:
            if name in sizes:
                block[name] = max(1, math.ceil(sizes[name] / count))
        for name, size in self.options.block_shape:
            if name in sizes:
                block[name] = size
        orders = {d.name: "C" for d in statement.program.inputs}
        budget, source = session.current().memory_budget(self.options.memory_limit)
        inputs = statement.program.inputs
        return planning_context(PassOptions(
            optimize=self.options.optimize,
            workers=int(self.options.workers or available_cores()),
            block_shape=block or None,
            orders=orders,
            nodes=nodes,
            planner=self.options.planner,
            placed=placed,
            node_memory=budget if nodes > 1 else None,
            memory_limit=budget,
            memory_source=source,
            stored={inputs[p].name: chunks for p, chunks in (stored or {}).items()},
            sink_chunks=sink_chunks,
        ))

    def plan(self, statement: Statement, nodes: int = 1, placed=None,
             stored: dict | None = None) -> Plan:
        """The (cached) plan of one statement's IR for ``nodes`` nodes, its operands at
        positions in ``placed`` already laid out there (``stored``: see
        :meth:`cached_plan`)."""
        return self.cached_plan(statement, nodes, placed, stored)[0]

    def cached_plan(self, statement: Statement, nodes: int = 1, placed=None,
                    stored: dict | None = None, sink_chunks=None) -> tuple[Plan, bool]:
        """:meth:`plan` and whether it came from the cache; ``stored`` maps operand
        positions read from storage to their chunk shapes; ``sink_chunks`` (not ``None``)
        plans the result to stream to a sink with that chunk shape (``()``: any)."""
        ctx = self._context(statement, nodes, placed, stored, sink_chunks)
        key = (statement.program, tuple(sorted((ctx.options.block_shape or {}).items())), nodes,
               None if not placed else tuple((p, s.key()) for p, s in sorted(placed.items())),
               ctx.options.memory_limit, tuple(sorted((stored or {}).items())), sink_chunks)
        plan = self.plans.get(key)
        if plan is not None:
            return plan, True
        plan = plan_program(f"{statement.label}: {statement.text}", statement.program, ctx)
        self.plans.put(key, plan)
        return plan, False

    def plan_layouts(self, unrolled: Unrolled, nodes: int, initial=None,
                     skip: frozenset = frozenset(), stored: dict | None = None,
                     sinks: dict | None = None) -> LayoutPlan:
        """The whole-program plan for ``nodes`` nodes (cached): layouts flow between the
        statements; ``initial`` gives the layouts of inputs already on the cluster; the
        statements labelled in ``skip`` run on the driver and are not planned (a later
        statement lays their results out as it would a numpy input); ``stored`` maps the
        labels of inputs read from storage to their chunk shapes; ``sinks`` the labels of
        results streamed to a sink to its chunk shape (``sink_chunks`` of
        :meth:`cached_plan`)."""
        stored, sinks = stored or {}, sinks or {}
        key = (unrolled, nodes, skip, None if not initial else tuple(
            (label, s.key()) for label, s in sorted(initial.items())),
            tuple(sorted(stored.items())), tuple(sorted(sinks.items())))
        result = self._layouts.get(key)
        if result is not None:
            self._layouts.move_to_end(key)
            return result
        planned = [st for st in unrolled.statements
                   if st.whole is None and st.label not in skip]
        def read(st):  # operand position -> chunks, for the operands read from storage
            return {k: stored[label] for k, label in enumerate(st.operands) if label in stored}

        result = plan_program_layouts(
            planned, lambda st, placed: self.cached_plan(st, nodes, placed, read(st),
                                                         sinks.get(st.label))[0],
            nodes, initial)
        self._layouts[key] = result
        if len(self._layouts) > LAYOUT_CACHE_SIZE:
            self._layouts.popitem(last=False)
        return result

    def run(self, unrolled: Unrolled, arrays: dict, executor: Executor,
            sinks: dict | None = None) -> tuple[dict, list]:
        """Run ``unrolled`` on ``arrays`` (inputs by label) with ``executor``: ``({label:
        value} for every output label, [(label, stats)])``. ``sinks`` maps output labels to
        :class:`~tensorc.stored.BlockSink`s their blocks are written to (not returned)."""
        values, ran, self.node_calls = executor.run_statements(self, unrolled, arrays,
                                                               sinks or {})
        return values, ran
