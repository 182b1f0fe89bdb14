"""A block passed by value: the one stand-in for a Ray ref that a call may be bound to.

Contract: :class:`Inline` wraps a small driver array kept in ``Blocks.refs`` in place of an
ObjectRef: a block of a numpy operand of at most :data:`INLINE_BYTES`, or a result block the
driver made (:func:`made_here`: an einsum's fold, :mod:`tensorc.runtime.ray.calls`; a block
program's task, :mod:`tensorc.runtime.ray.block_waves`). The Ray executor passes its
``value`` inside the call message that reads it, so no task places it on a node first
(:mod:`tensorc.runtime.ray.call_batch`, :mod:`tensorc.runtime.ray.calls`).
"""

from __future__ import annotations

import numpy as np

INLINE_BYTES = 64 * 1024
"""A numpy operand's block up to this size travels inside the call messages that read it
(Ray inlines small arguments), not put in the object store first (about a millisecond a
put here)."""


class Inline:
    """A small block passed by value in the call messages that read it."""

    __slots__ = ("value",)

    def __init__(self, value) -> None:
        self.value = value


def made_here(value) -> Inline:
    """A result block the driver made, kept as an :class:`Inline`: read-only (an array),
    as a Ray object is, since later calls and arrays share it."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    return Inline(value)
