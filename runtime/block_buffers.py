"""Block buffers reused across reads: fresh pages cost more than the read itself.

Contract: :class:`BlockBuffers` hands out C-ordered ndarrays by shape and dtype
(:meth:`~BlockBuffers.take`) and takes back one whose block is dead
(:meth:`~BlockBuffers.give`): the caller gives back only a buffer that no live value still
reads (the value a read made of it, or a view of it, has been dropped; kernels that read a
block return fresh arrays). A block over glibc's mmap threshold (32 MiB at most) is a fresh
mapping every time it is allocated, and touching fresh pages on this kind of VM costs about
a millisecond per megabyte: a 64 MiB block read from the page cache takes longer to fault
in than to copy. A pool keeps at most ``keep_bytes`` of idle buffers (the oldest dropped
first; ``None``: no limit) and is thread-safe. The local task pool keeps one per run; a Ray
node worker keeps one for its process, so its calls' reads reuse the buffers of the calls
before them.
"""

from __future__ import annotations

import threading

import numpy as np


class BlockBuffers:
    """Idle block buffers by (shape, dtype) (module docstring)."""

    def __init__(self, keep_bytes: int | None = None) -> None:
        self.keep_bytes = keep_bytes
        self._free: dict[tuple, list[np.ndarray]] = {}
        self._idle = 0
        self._lock = threading.Lock()

    def take(self, shape: tuple[int, ...], dtype) -> np.ndarray:
        """An idle buffer of ``shape`` and ``dtype``, or a new one."""
        key = (tuple(shape), np.dtype(dtype))
        with self._lock:
            stack = self._free.get(key)
            buffer = stack.pop() if stack else None
            if buffer is not None:
                self._idle -= buffer.nbytes
        return np.empty(key[0], dtype=key[1]) if buffer is None else buffer

    def give(self, buffer: np.ndarray) -> None:
        """Take back a buffer whose block is dead."""
        if self.keep_bytes is not None and buffer.nbytes > self.keep_bytes:
            return
        with self._lock:
            self._free.setdefault((buffer.shape, buffer.dtype), []).append(buffer)
            self._idle += buffer.nbytes
            while self.keep_bytes is not None and self._idle > self.keep_bytes:
                key = next(k for k, stack in self._free.items() if stack)
                self._idle -= self._free[key].pop(0).nbytes


def holds(value, buffer: np.ndarray) -> bool:
    """Whether ``value`` is ``buffer`` or a view of it (numpy keeps a view's base the
    array that owns the memory)."""
    return value is buffer or getattr(value, "base", None) is buffer
