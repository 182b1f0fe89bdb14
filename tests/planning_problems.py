"""The planning problem of one einsum from shapes alone, as the planning tests build it."""

from __future__ import annotations

from tensorc.frontend.einsum import einsum_program
from tensorc.frontend.subscripts import parse_einsum
from tensorc.passes.pipeline import run_pipeline
from tensorc.planning.distribution import Problem
from tensorc.planning.pricing import planning_context


def problem(subscripts: str, shapes, nodes: int, **kwargs) -> Problem:
    """``subscripts`` over float64 operands of ``shapes`` after the algebraic passes, to be
    distributed over ``nodes`` nodes (``kwargs`` go to :class:`Problem`)."""
    spec = parse_einsum(subscripts, shapes)
    program = einsum_program(spec, shapes, ("float64",) * len(shapes), "float64")
    final, _ = run_pipeline(program, planning_context(workers=2), keep_text=False)
    return Problem(subscripts, final, nodes, **kwargs)
