"""A node-call argument kept in the executor's store between calls.

Contract: :class:`Kept` wraps a value that later node calls will read again unchanged (a
piece of a sparse operand made with ``tc.asarray``: its owner never changes it). An
executor that ships arguments (the Ray executor's
:func:`~tensorc.runtime.ray.node_calls.run_node_calls`) stores it once per session and
hands the same stored object to every later call that reads it, as Dask's ``persist``
keeps chunks; what it stored dies with the ``Kept``, or when a later session (a new
connection, or the same one after its nodes changed) stores it again. ``nbytes`` is the
value's size.
"""

from __future__ import annotations

import weakref


class Kept:
    """A value stored once per session and read by many calls (module docstring)."""

    __slots__ = ("value", "nbytes", "_stored", "__weakref__")

    def __init__(self, value, nbytes: int) -> None:
        self.value = value
        self.nbytes = int(nbytes)
        self._stored: tuple | None = None  # (the session, its membership epoch, handle)

    def stored_for(self, session, epoch: int):
        """The handle this value was stored under in ``session`` (an object the executor
        keeps for as long as the session lives) at membership ``epoch``, or ``None``."""
        kept = self._stored
        if kept is not None and kept[0]() is session and kept[1] == epoch:
            return kept[2]
        return None

    def store(self, session, epoch: int, handle):
        """Record ``handle`` as this value's in ``session`` at ``epoch``, dropping the
        handle of any earlier session or epoch (what it pinned is released); returns it."""
        self._stored = (weakref.ref(session), epoch, handle)
        return handle
