"""What a pass is: a small named object with ``run(program, ctx) -> program``.

A pass reads the caller's options (:class:`PassOptions`, frozen) and notes the decisions it
made in ``ctx`` (``ctx.note(...)``) so ``Plan.explain()`` can say why the plan looks the way
it does. Decisions the next stage acts on never travel in the context: they are in the IR
(a product join carries its contraction path, ``Join.path``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from tensorc.ir.nodes import Function


@dataclass(frozen=True)
class PassOptions:
    """The caller's options every pass may read."""

    optimize: Any = "auto"
    workers: int = 2
    grid: Any = None
    """Blocks per index (``{index: count}``) or one tuple per operand, or ``None``."""
    block_shape: Any = None
    """Block size per index or one tuple per operand, or ``None``."""
    layouts: dict[str, str] = field(default_factory=dict)
    nodes: int = 1
    """Nodes to plan for; more than one plans a distribution (``tensorc.passes.search``)."""
    planner: str = "auto"
    """The distribution search: ``auto``, ``heuristic``, ``greedy``, ``smt``, ``exhaustive``."""
    node_memory: int | None = None
    """Per-node memory budget in bytes (``None``: the planner's default)."""
    placed: dict[int, Any] | None = None
    """Operand position → its :class:`~tensorc.runtime.blocks.Blocks` layout, for operands
    already on the cluster; the planner weighs computing in that layout against
    repartitioning them."""


@dataclass
class PassContext:
    """One planning run: the options (read-only) and the log of decisions, in order."""

    options: PassOptions
    notes: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, **options: Any) -> PassContext:
        """A fresh context with these :class:`PassOptions`."""
        return cls(PassOptions(**options))

    def note(self, pass_name: str, text: str) -> None:
        self.notes.append(f"{pass_name}: {text}")


class Pass(Protocol):
    name: ClassVar[str]

    def run(self, program: Function, ctx: PassContext) -> Function: ...
