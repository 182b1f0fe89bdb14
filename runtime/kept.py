"""A node-call argument kept in the executor's store between calls.

Contract: :class:`Kept` wraps a value that later node calls will read again unchanged (a
piece of a sparse operand made with ``tc.asarray``: its owner never changes it). An
executor that ships arguments (the Ray executor's
:func:`~tensorc.runtime.ray.node_calls.run_node_calls`) stores it once per session and
hands the same stored object to every later call that reads it, as Dask's ``persist``
keeps chunks; what it stored dies with the ``Kept``. ``nbytes`` is the value's size.
"""

from __future__ import annotations


class Kept:
    """A value stored once per session and read by many calls (module docstring)."""

    __slots__ = ("value", "nbytes", "stored", "__weakref__")

    def __init__(self, value, nbytes: int) -> None:
        self.value = value
        self.nbytes = int(nbytes)
        self.stored: dict = {}
        """The executor's handle of the stored value, by session (the executor's key)."""
