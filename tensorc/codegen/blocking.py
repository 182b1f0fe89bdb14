"""The blocking codegen lowers with: one block size per index name.

Operands that share an index share its blocking, so a blocking is a block size per index
name. The partition step (``tensorc.planning.blocking``) or the distribution planner chooses
it; codegen reads it here and nowhere else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Blocking:
    """Block size per index; ``blocks(name)`` gives the half-open ranges of its blocks."""

    sizes: tuple[tuple[str, int], ...]
    block: tuple[tuple[str, int], ...]

    def block_size(self, name: str) -> int:
        return dict(self.block)[name]

    def count(self, name: str) -> int:
        size = dict(self.sizes)[name]
        step = self.block_size(name)
        return max(1, math.ceil(size / step)) if step else 1

    def ranges(self, name: str) -> list[tuple[int, int]]:
        size = dict(self.sizes)[name]
        step = max(self.block_size(name), 1)
        if size == 0:
            return [(0, 0)]
        return [(start, min(start + step, size)) for start in range(0, size, step)]

    def counts(self) -> dict[str, int]:
        return {name: self.count(name) for name, _ in self.sizes}

    def describe(self) -> str:
        parts = []
        for name, size in self.sizes:
            parts.append(f"{name}: {size}/{self.block_size(name)} -> {self.count(name)}")
        return ", ".join(parts) if parts else "(scalar)"
