"""BLAS threads for a node worker's threaded call: all the cores for a large step left alone.

Contract: a node worker's call that runs its steps on several threads (``threads``; each
step's BLAS calls on ``cores // threads`` threads, one here) keeps a :class:`StepThreads` on
the thread that drives it: the worker's own thread. threadpoolctl lets one thread at a time
change OpenBLAS's thread count (the one that last took control; a limit entered and left
gives it up) and silently ignores the others, and the call's own limit is entered there.
Before a step starts, :meth:`StepThreads.starting` gives BLAS all ``cores`` when the step
:func:`widens` (a compute step reading a block of at least :data:`ALONE_BYTES`, whose kernel
is not one of :data:`~tensorc.codegen.block_kernels.ONE_THREAD_KERNELS`) and starts *alone*
(no other step runs or is ready), and ``cores // threads`` otherwise; after steps finish,
:meth:`StepThreads.left_alone` does the same for the one step still running when nothing
else is ready (its later BLAS calls take the cores: a triangular solve in halves is many
calls); :meth:`StepThreads.done` restores the call's count. No other step starts while a
step holds all the cores, so BLAS's threads never outnumber them. Plain ``stage`` tasks
(not node workers) run their steps without it: several may share a node, and they do not
start with :data:`WORKER_ENV`.

Why: a block program's chain of factorisations leaves one step running at a time at its
head and tail (a 4096² Cholesky on one node, 4 x 4 blocks: the first diagonal factor, and
the last factor, solve, update and factor), one core idle beside it. Small steps keep their
share: a BLAS call on two threads waits for its second thread at each of its barriers, and
on cores that other nodes' processes share that thread is often not running (a 1536²
Cholesky's 384² steps took up to 47 ms instead of 1 ms). OpenBLAS's idle threads spin for
2^28 cycles (about 0.1 s) after each threaded call before they sleep, taking a core from
the steps that follow: node workers are started with ``OPENBLAS_THREAD_TIMEOUT`` =
:data:`OPENBLAS_TIMEOUT` (2^20 cycles, about 0.4 ms; :data:`WORKER_ENV`, the driver's own
``OPENBLAS_THREAD_TIMEOUT`` when it has one). Measured in docs/performance.md.
"""

from __future__ import annotations

import os

from tensorc.codegen.block_kernels import runs_one_thread
from tensorc.runtime.ray.stages import RUN
from tensorc.runtime.task_pool import blas_controller

ALONE_BYTES = 4 * 2**20
"""The largest block a step reads must be at least this large for the step to take all the
cores when alone (a 724² float64 block; the Cholesky's 1024² steps do, its 384² ones not)."""

OPENBLAS_TIMEOUT = 20
"""log2 of the cycles an idle OpenBLAS thread spins before it sleeps, in node workers."""

WORKER_ENV = {"OPENBLAS_THREAD_TIMEOUT": os.environ.get("OPENBLAS_THREAD_TIMEOUT",
                                                      str(OPENBLAS_TIMEOUT))}
"""Environment variables node workers are started with (read when BLAS loads)."""


def widens(step, largest: int) -> bool:
    """Whether ``step`` (the largest block it reads: ``largest`` bytes) may take all the
    cores when alone: a compute step (a read from storage does no BLAS; its size is the
    file's) reading a block of at least :data:`ALONE_BYTES`, whose kernel does not make
    many small BLAS calls."""
    if step.kind != RUN:
        return False
    expr = getattr(step.kernel, "expr", None)  # a block program's kernel expression
    if expr is not None and runs_one_thread(expr):
        return False
    return largest >= ALONE_BYTES


class StepThreads:
    """A threaded call's BLAS thread count (module docstring)."""

    def __init__(self, cores: int, threads: int) -> None:
        self.cores, self.shared = cores, max(1, cores // threads)
        self.libraries = [library for library in blas_controller().lib_controllers
                          if library.user_api == "blas"]  # not OpenMP's
        self.now = self.shared  # the call's own limit set it so

    def starting(self, step, largest: int, alone: bool) -> None:
        """Before ``step`` (its largest block ``largest`` bytes) starts; ``alone``: nothing
        else runs or is ready."""
        self._set(self.cores if alone and widens(step, largest) else self.shared)

    def left_alone(self, step, largest: int) -> None:
        """``step`` (its largest block ``largest`` bytes) runs on with nothing else running
        or ready."""
        if widens(step, largest):
            self._set(self.cores)

    def done(self) -> None:
        """The call's own count back (its steps have ended, or failed)."""
        self._set(self.shared)

    def _set(self, count: int) -> None:
        if count != self.now:
            for library in self.libraries:
                library.set_num_threads(count)
            self.now = count
