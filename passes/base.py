"""What a pass is: a small named object with ``run(program, ctx) -> program``.

A pass reads the caller's options (:class:`PassOptions`, frozen) and notes the decisions it
made in ``ctx`` (``ctx.note(...)``) so ``Plan.explain()`` can say why the plan looks the way
it does. Decisions the next stage acts on never travel in the context: they are in the IR
(a product join carries its contraction path, ``Join.path``).

Passes are rewrites; they price nothing themselves. A pass that chooses between rewrites by
cost (contraction-path) asks ``ctx.pricing``, a :class:`ContractionPricing` the planner
supplies (``tensorc.planning.pricing``), so the cost model has one home above the passes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from tensorc.errors import PlanError
from tensorc.ir.nodes import Function

Path = list[tuple[int, ...]]
"""A contraction order in opt_einsum's linear format."""


@dataclass(frozen=True)
class PassOptions:
    """The caller's options every pass may read."""

    optimize: Any = "auto"
    workers: int = 2
    grid: Any = None
    """Blocks per index (``{index: count}``) or one tuple per operand, or ``None``."""
    block_shape: Any = None
    """Block size per index or one tuple per operand, or ``None``."""
    orders: dict[str, str] = field(default_factory=dict)
    """Memory order of each input by name (``"C"``, ``"F"`` or ``"other"``)."""
    nodes: int = 1
    """Nodes to plan for; more than one plans a distribution (``tensorc.planning.search``)."""
    planner: str = "auto"
    """The distribution search: ``auto``, ``heuristic``, ``greedy``, ``smt``, ``exhaustive``."""
    node_memory: int | None = None
    """Per-node memory budget in bytes (``None``: the planner's default)."""
    placed: dict[int, Any] | None = None
    """Operand position → its :class:`~tensorc.placement.blocks.Blocks` layout, for operands
    already on the cluster; the planner weighs computing in that layout against
    repartitioning them."""
    memory_limit: int | None = None
    """Bytes one worker (this process, or one Ray node) may hold while the plan runs:
    blocks read or copied, intermediates and the result (``None``: no budget)."""
    memory_source: str = ""
    """Where ``memory_limit`` came from, for ``explain()``."""
    sink_chunks: tuple[int, ...] | None = None
    """Set when the result streams to a sink (written block by block, never held whole):
    the sink's chunk shape, which the result's blocks align with (``()``: any blocks)."""
    stored: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Input name → chunk shape, for inputs read from storage block by block (blocks align
    with these chunks; their reads count against ``memory_limit``)."""


@dataclass
class PassContext:
    """One planning run: the options (read-only) and the log of decisions, in order."""

    options: PassOptions
    notes: list[str] = field(default_factory=list)
    pricing: ContractionPricing | None = None
    """The cost model a pass asks when it chooses between rewrites by cost."""

    @classmethod
    def of(cls, **options: Any) -> PassContext:
        """A fresh context with these :class:`PassOptions`."""
        return cls(PassOptions(**options))

    def note(self, pass_name: str, text: str) -> None:
        self.notes.append(f"{pass_name}: {text}")

    def require_pricing(self, pass_name: str) -> ContractionPricing:
        """The context's pricing model, or an error naming the pass that needs one."""
        if self.pricing is None:
            raise PlanError(f"pass {pass_name} chooses by cost and needs a pricing model: "
                            "build its context with tensorc.planning.pricing.planning_context")
        return self.pricing


class ContractionPricing(Protocol):
    """What the contraction-path pass asks the planner's cost model."""

    def block_counts(self, program: Function, ctx: PassContext) -> dict[str, int]:
        """Blocks per index the planner is expected to choose for ``program``."""
        ...

    def choose_path(self, keys, output, sizes: dict[str, int], itemsize: int,
                    optimize: Any) -> Path | None:
        """A contraction order (``None``: numpy's single loop, ``optimize=False``)."""
        ...

    def fused_seconds(self, keys, output, path: Path, sizes: dict[str, int],
                      counts: dict[str, int], itemsize: int, workers: int) -> float:
        """Modelled time of one fused stage running the whole ``path`` per block tuple."""
        ...

    def pairwise_seconds(self, keys, output, path: Path, sizes: dict[str, int],
                         counts: dict[str, int], itemsize: int, workers: int) -> float:
        """Modelled time of one stage per step of ``path``."""
        ...


class Pass(Protocol):
    name: ClassVar[str]

    def run(self, program: Function, ctx: PassContext) -> Function: ...
