"""Block buffers reused across reads: fresh pages cost more than the read itself.

Contract: :class:`BlockBuffers` hands out C-ordered ndarrays by shape and dtype
(:meth:`~BlockBuffers.take`) and takes back the ones it handed out once their block is dead
(:meth:`~BlockBuffers.give`, or :meth:`~BlockBuffers.give_if_taken` for a value that may be
one of them). A block over glibc's mmap threshold (32 MiB at most) is a fresh mapping every
time it is allocated, and touching fresh pages on this kind of VM costs about a millisecond
per megabyte: a 64 MiB block read from the page cache takes longer to fault in than to
copy. A pool keeps at most ``keep_bytes`` of idle buffers (the oldest are dropped first);
it is thread-safe. The local task pool keeps one per run; a Ray node worker keeps one for
its process, so its calls' reads reuse the buffers of the calls before them.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np


class BlockBuffers:
    """Idle block buffers by (shape, dtype), and the ones handed out (module docstring)."""

    def __init__(self, keep_bytes: int | None = None) -> None:
        self.keep_bytes = keep_bytes
        self._free: dict[tuple, list[np.ndarray]] = {}
        self._idle = 0
        self._taken: dict[int, weakref.ref] = {}
        self._lock = threading.Lock()

    def take(self, shape: tuple[int, ...], dtype) -> np.ndarray:
        """An idle buffer of ``shape`` and ``dtype``, or a new one."""
        key = (tuple(shape), np.dtype(dtype))
        with self._lock:
            stack = self._free.get(key)
            buffer = stack.pop() if stack else None
            if buffer is not None:
                self._idle -= buffer.nbytes
        if buffer is None:
            buffer = np.empty(key[0], dtype=key[1])
        if self.keep_bytes is not None:
            with self._lock:
                self._taken[id(buffer)] = weakref.ref(buffer, self._forget(id(buffer)))
        return buffer

    def _forget(self, ident: int):
        def forget(_ref) -> None:
            with self._lock:
                self._taken.pop(ident, None)
        return forget

    def give(self, buffer: np.ndarray) -> None:
        """Take back a buffer this pool handed out; its block is dead."""
        with self._lock:
            self._taken.pop(id(buffer), None)
            if self.keep_bytes is not None and buffer.nbytes > self.keep_bytes:
                return
            self._free.setdefault((buffer.shape, buffer.dtype), []).append(buffer)
            self._idle += buffer.nbytes
            while self.keep_bytes is not None and self._idle > self.keep_bytes:
                self._drop_one()

    def give_if_taken(self, value) -> None:
        """:meth:`give` ``value`` if it is a buffer this pool handed out (tracked only when
        the pool has ``keep_bytes``), else nothing."""
        with self._lock:
            ref = self._taken.get(id(value))
            mine = ref is not None and ref() is value
        if mine:
            self.give(value)

    def _drop_one(self) -> None:
        key = next(k for k, stack in self._free.items() if stack)
        dropped = self._free[key].pop(0)
        self._idle -= dropped.nbytes
