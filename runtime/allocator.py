"""Freed block memory kept by the C allocator of a worker process, so a call's blocks reuse
pages instead of faulting fresh ones in.

Contract: :func:`keep_freed_memory` tunes glibc's ``malloc`` of the process it runs in (a
Ray worker; never the user's own process): allocations up to :data:`HEAP_BLOCK_BYTES` come
from the heap instead of a fresh ``mmap`` each, and freed heap stays with the process
instead of going back to the system at every ``free``: up to ``keep_bytes`` in all, shared
out over the allocator's arenas (glibc's trim threshold applies to each arena, and it keeps
one per thread allocating at once: the main thread's, and one for each of the worker's kept
step threads, :func:`~tensorc.runtime.task_pool.helper_pool`, at most the machine's cores;
threads started afresh for each call would each take an arena of their own, up to 8 per
core, and the bound would not hold). It returns whether
the allocator took the settings (``False`` off glibc, or with ``keep_bytes`` 0). Called
more than once it does nothing more.

Why: a block kernel's result is a fresh array of megabytes. glibc serves it with ``mmap``
and returns it with ``munmap`` (or trims the heap top back), so every call faults its
result's pages in again; a page fault costs about 10-20 us on this class of machine, so a
2.6 MB block costs 6-13 ms of system time around a 0.7 ms product (measured in a node
worker: 640 faults per product, 1,270 per tall QR). With the freed pages kept, the faults
go away after a worker's first calls. The memory kept is resident: it is at most
``keep_bytes`` per worker above what its live blocks hold, and ``TENSORC_WORKER_KEEP_FREED``
(bytes, ``0`` to leave the allocator alone; a value that is not a number is ignored) sets
it.
"""

from __future__ import annotations

import ctypes
import os

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
"""glibc's ``mallopt`` parameters (``malloc.h``)."""

HEAP_BLOCK_BYTES = 32 * 2**20
"""Allocations up to this size come from the heap (glibc's largest mmap threshold on 64-bit
systems); larger ones are mapped and unmapped each time, as their faults are a smaller share
of the work on them."""

KEEP_FREED_BYTES = 256 * 2**20
"""Freed heap a worker keeps by default (the same bound as its idle read buffers)."""

KEEP_VARIABLE = "TENSORC_WORKER_KEEP_FREED"

_DONE: list[bool] = []


def keep_freed_memory(keep_bytes: int | None = None) -> bool:
    """Tune this process's allocator (module docstring); ``keep_bytes`` defaults to
    ``TENSORC_WORKER_KEEP_FREED`` or :data:`KEEP_FREED_BYTES`."""
    if _DONE:
        return _DONE[0]
    if keep_bytes is None:
        try:
            keep_bytes = int(os.environ.get(KEEP_VARIABLE, KEEP_FREED_BYTES))
        except ValueError:
            keep_bytes = KEEP_FREED_BYTES
    _DONE.append(keep_bytes > 0 and _set_glibc(keep_bytes))
    return _DONE[0]


def _set_glibc(keep_bytes: int) -> bool:
    try:  # the C library this process already runs on (no search: no subprocess)
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # pragma: no cover - not glibc (musl, macOS)
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    keep = min(keep_bytes // ((os.cpu_count() or 1) + 1), 2**31 - 1)  # per arena
    return all(mallopt(param, value) == 1 for param, value in (
        (M_MMAP_THRESHOLD, HEAP_BLOCK_BYTES), (M_TRIM_THRESHOLD, keep),
        (M_TOP_PAD, min(keep, HEAP_BLOCK_BYTES))))
