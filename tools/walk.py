"""Count the project modules one call walks through, for the architecture notes.

Runs one cold ``tc.einsum`` (MTTKRP) and one cold ``compute()`` of a small lazy program
under ``sys.setprofile`` and counts the calls that cross from one project module into
another in the drive-and-run path (api, program, lazy, driver, session, storage, runtime;
the compiler's own modules, ir/frontend/codegen/passes/planning/placement, are left out):
how many modules, how many entries, and how many entries into a module entered before.

    .venv/bin/python tools/walk.py
"""

from __future__ import annotations

import collections
import sys

import numpy as np

import tensorc as tc

LEFT_OUT = ("tensorc.ir", "tensorc.frontend", "tensorc.codegen", "tensorc.passes",
            "tensorc.planning", "tensorc.placement", "tensorc.errors", "tensorc.debug",
            "tensorc.progress", "tensorc.lazy.graph")


def walk(call) -> tuple[collections.Counter, int, int]:
    """``(entries per module, entries, re-entries)`` of the cross-module calls ``call`` makes."""
    entries: collections.Counter = collections.Counter()
    order: list[str] = []

    def profile(frame, event, arg):
        if event != "call" or frame.f_back is None:
            return
        callee = frame.f_globals.get("__name__", "")
        caller = frame.f_back.f_globals.get("__name__", "")
        if (callee != caller and callee.startswith("tensorc") and caller.startswith("tensorc")
                and not callee.startswith(LEFT_OUT)):
            entries[callee] += 1
            order.append(callee)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    seen: set[str] = set()
    again = 0
    for module in order:
        again += module in seen
        seen.add(module)
    return entries, len(order), again


def main() -> None:
    rng = np.random.default_rng(0)
    x, b, c = rng.random((40, 41, 42)), rng.random((40, 5)), rng.random((41, 5))
    tc.clear_plan_cache()
    lazy = tc.exp(tc.asarray(rng.random((300, 20))) @ tc.asarray(rng.random(20))) + 1.0
    for name, call in (("einsum (cold)", lambda: tc.einsum("ijk,if,jf->if", x, b, c)),
                       ("compute() (cold)", lazy.compute)):
        entries, count, again = walk(call)
        print(f"{name}: {len(entries)} modules, {count} entries, {again} re-entries")
        print("   ", ", ".join(f"{m.removeprefix('tensorc.')} {n}"
                              for m, n in entries.most_common()))


if __name__ == "__main__":
    main()
