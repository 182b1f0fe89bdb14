"""Progress of a long evaluation: a terminal bar of tasks done / total and tasks per node.

Contract: ``Progress(total, nodes)`` is a context manager; ``advance(tasks, per_node)`` adds
the tasks of one finished statement (``per_node``: tasks each node ran, or ``None``). The bar
(tqdm) appears only after :data:`DELAY_SECONDS`, only when stderr is a terminal, and never
with ``TENSORC_PROGRESS=0``; otherwise every call is a no-op.
"""

from __future__ import annotations

import os
import sys

DELAY_SECONDS = 2.0


def enabled() -> bool:
    """Whether a bar may be shown (a terminal, and ``TENSORC_PROGRESS`` is not ``0``)."""
    if os.environ.get("TENSORC_PROGRESS", "1").strip() in ("0", "false", "off", "no"):
        return False
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


class Progress:
    """A delayed progress bar over tasks (see the module docstring)."""

    def __init__(self, total: int, nodes: int = 1, force: bool | None = None) -> None:
        self.total = total
        self.per_node = [0] * max(1, nodes)
        self.bar = None
        if force if force is not None else enabled():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="task", delay=DELAY_SECONDS, leave=False,
                            desc="tensorc", file=sys.stderr, dynamic_ncols=True)

    def advance(self, tasks: int, per_node: list[int] | None = None) -> None:
        if per_node:
            for node, count in enumerate(per_node[:len(self.per_node)]):
                self.per_node[node] += count
        if self.bar is not None:
            if len(self.per_node) > 1:
                self.bar.set_postfix_str(
                    " ".join(f"n{k}:{c}" for k, c in enumerate(self.per_node)), refresh=False)
            self.bar.update(tasks)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()
