"""One debug hook for the whole compiler, switched by environment variables.

- ``TENSORC_DEBUG=1`` — pass timings and plan summaries on stderr;
- ``TENSORC_DEBUG=2`` — also the IR after every pass;
- ``TENSORC_DEBUG=3`` — also every decision a pass notes;
- ``TENSORC_DUMP_DIR=path`` — write each new plan's ``explain()`` to
  ``path/plan-<graph name>.txt``.

Nothing else in tensorc prints.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path


def level() -> int:
    """The current ``TENSORC_DEBUG`` level (0 when unset or not a number)."""
    try:
        return int(os.environ.get("TENSORC_DEBUG", "0"))
    except ValueError:
        return 0


def log(at_level: int, message: str) -> None:
    """Print ``message`` to stderr when ``TENSORC_DEBUG`` is at least ``at_level``."""
    if level() >= at_level:
        print(f"[tensorc] {message}", file=sys.stderr)


def dump(name: str, text: Callable[[], str]) -> Path | None:
    """Write ``text()`` to ``$TENSORC_DUMP_DIR/name`` when that variable is set (``text`` is
    called only then: an ``explain()`` costs a fifth of a small plan's planning)."""
    directory = os.environ.get("TENSORC_DUMP_DIR")
    if not directory:
        return None
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    target = path / name
    target.write_text(text() + "\n")
    return target
