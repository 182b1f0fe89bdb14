"""A block passed by value: the one stand-in for a Ray ref that a call may be bound to.

Contract: :class:`Inline` wraps a small driver array kept in ``Blocks.refs`` in place of an
ObjectRef: a block of a numpy operand of at most :data:`INLINE_BYTES`, or a result block a
fold made in the driver (:mod:`tensorc.runtime.ray.calls`). The Ray executor passes its
``value`` inside the call message that reads it, so no task places it on a node first
(:mod:`tensorc.runtime.ray.call_batch`, :mod:`tensorc.runtime.ray.calls`).
"""

from __future__ import annotations

INLINE_BYTES = 64 * 1024
"""A numpy operand's block up to this size travels inside the call messages that read it
(Ray inlines small arguments), not put in the object store first (about a millisecond a
put here)."""


class Inline:
    """A small block passed by value in the call messages that read it."""

    __slots__ = ("value",)

    def __init__(self, value) -> None:
        self.value = value
