"""The default pass pipeline and its driver, verifying the IR after every pass.

Order and the invariant each pass leaves (see ``passes/README.md``)::

    canonicalize → reduce-pushdown → contraction-path → fuse-maps

``run_pipeline`` returns the final program and the IR after each pass (the programs
themselves: the IR is immutable, so a snapshot costs nothing until ``Plan.explain()``
prints it with :func:`~tensorc.ir.printer.format_program`).
"""

from __future__ import annotations

import time

from tensorc import debug
from tensorc.ir.nodes import Function
from tensorc.ir.printer import format_program
from tensorc.ir.verify import verify
from tensorc.passes.base import Pass, PassContext
from tensorc.passes.canonicalize import Canonicalize
from tensorc.passes.contraction_path import ContractionPathPass
from tensorc.passes.fuse_maps import FuseMaps
from tensorc.passes.reduce_pushdown import ReducePushdown

DEFAULT_PIPELINE: tuple[Pass, ...] = (
    Canonicalize(),
    ReducePushdown(),
    ContractionPathPass(),
    FuseMaps(),
)


def run_pipeline(
    program: Function,
    ctx: PassContext,
    passes: tuple[Pass, ...] = DEFAULT_PIPELINE,
    keep_text: bool = True,
) -> tuple[Function, list[tuple[str, Function]]]:
    """Run ``passes`` in order, verifying after each; return the program and the program
    after each pass (``keep_text=False``: none)."""
    verify(program)
    stages: list[tuple[str, Function]] = []
    if keep_text:
        stages.append(("input", program))
    for step in passes:
        started = time.perf_counter()
        notes_before = len(ctx.notes)
        program = verify(step.run(program, ctx))
        debug.log(1, f"pass {step.name}: {(time.perf_counter() - started) * 1e3:.3f} ms")
        for note in ctx.notes[notes_before:]:
            debug.log(3, note)
        if keep_text:
            stages.append((step.name, program))
            if debug.level() >= 2:
                debug.log(2, f"IR after {step.name}:\n{format_program(program)}")
    return program, stages
