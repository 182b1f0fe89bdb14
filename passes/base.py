"""What a pass is: a small named object with ``run(program, ctx) -> program``.

:class:`PassContext` carries the caller's options and collects the decisions passes make
(``ctx.note(...)``) so ``Plan.explain()`` can say why the plan looks the way it does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from tensorc.ir.nodes import Program


@dataclass
class PassContext:
    """Options every pass may read, and the log of decisions they made."""

    optimize: Any = "auto"
    workers: int = 2
    grid: dict[str, int] | None = None
    block_shape: dict[str, int] | None = None
    layouts: dict[str, str] = field(default_factory=dict)
    paths: dict[Any, Any] = field(default_factory=dict)
    """The contraction path chosen for each fused product join (keyed by the ``Join`` node);
    codegen runs exactly these, so ``explain`` shows what executes."""
    notes: list[str] = field(default_factory=list)
    nodes: int = 1
    """Nodes to plan for; more than one plans a distribution (``tensorc.passes.search``)."""
    planner: str = "auto"
    """The distribution search: ``auto``, ``heuristic``, ``greedy``, ``smt``, ``exhaustive``."""
    node_memory: int | None = None
    """Per-node memory budget in bytes (``None``: the planner's default)."""
    placed: dict[int, Any] | None = None
    """Operand position → ``(block bounds, node of each block)`` for operands already on the
    cluster; the planner weighs computing in that layout against repartitioning them."""

    def note(self, pass_name: str, text: str) -> None:
        self.notes.append(f"{pass_name}: {text}")


class Pass(Protocol):
    name: ClassVar[str]

    def run(self, program: Program, ctx: PassContext) -> Program: ...
