"""``x.explain()``: the program that computes a lazy array, its plan and its statistics."""

from __future__ import annotations

import json

from tensorc import session
from tensorc.ir.printer import format_program
from tensorc.lazy import data_dependent, evaluate
from tensorc.lazy.lowering import lower_graph
from tensorc.lazy.not_made import creation_of
from tensorc.runtime.ray.arrays import DistributedArray


def explain(array) -> str:
    """Text of the array's program (statements, IR), its whole-program plan on the session's
    nodes (or each statement's local plan) and, once evaluated, the run's statistics."""
    expr = array._expr  # noqa: SLF001 - the lazy package's own class
    found = evaluate.last_program(expr)
    if found is None and (expr.value is not None or creation_of(expr) is not None):
        origin = _layout_origin(expr)
        if origin:
            return f"{array!r}: {origin.strip()[1:-1]}"
        cut = data_dependent.sync_point(expr)
        if cut is not None:
            return f"{array!r}: the result of a {cut}"
        return f"{array!r}: a given value (no program)"
    lowered, where, stats = (found if found is not None
                             else (lower_graph([expr]), evaluate.backend(), None))
    unrolled = lowered.unrolled
    lines = [f"array program: {len(unrolled.statements)} statement(s), backend {where}"
             + ("" if stats else " (not evaluated yet)")]
    for label, value in lowered.inputs.items():
        cut = data_dependent.sync_input(value)
        lines.append(f"  input {label}: {getattr(value, 'dtype', '')}"
                     f"{list(getattr(value, 'shape', ()))}"
                     + (f" (from the synchronisation point of {cut})" if cut else "")
                     + _layout_origin(value))
    for statement in unrolled.statements:
        lines.append(f"== {statement.text}   # {statement.dtype}{list(statement.shape)}")
        if statement.program is not None:
            bound = ", ".join(f"in{k} = {label}" for k, label in enumerate(statement.operands))
            lines.append(f"  operands {bound}")
            lines.append(format_program(statement.program))
        else:
            lines.append(f"  whole-array {statement.whole[0]}: one task over whole operands")
    lines.append("-- plan")
    runner = evaluate.RUNNER
    executor = session.current().executor
    if not executor.in_process:
        layouts = runner.plan_layouts(unrolled, executor.nodes)
        lines.extend(layouts.describe())
        plans = layouts.plans
    else:
        plans = {st.label: runner.plan(st) for st in unrolled.statements
                 if st.program is not None}
    for statement in unrolled.statements:
        if statement.label in plans:
            lines.append(plans[statement.label].explain())
    if stats:
        lines.append("-- statistics of the run")
        shown = {k: v for k, v in stats.items() if k != "statements"}
        lines.append(json.dumps(shown, indent=1, default=str, sort_keys=True))
    return "\n".join(lines)


def _layout_origin(node) -> str:
    """Where the layout of an input came from: the statement whose plan an array made by a
    program was laid out for, an array not made yet, or the default layout of an array
    made on its own (empty for anything else)."""
    recipe = creation_of(node)
    if recipe is not None:
        return (f" ({recipe.name}, not made yet: made in the layout the first statement "
                "reading it wants)")
    value = getattr(node, "value", None)
    origin = getattr(value, "origin", None) if isinstance(value, DistributedArray) else None
    return f" ({origin})" if origin else ""
